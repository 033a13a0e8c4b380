// Printer.h - the textual IR: printing, parsing and verification entry points.
//
// The form, one statement per line:
//
//   graph "lenet5" {
//     input %input: f32[64,1,28,28]
//     param %conv1.weight: f32[6,1,5,5]
//     %t0: act f32[64,6,28,28] = Conv(%input, %conv1.weight, %conv1.bias) {group=1, ...} loc("/conv1/Conv")
//     output %t9
//     carry %bn1.running_mean <- %t12
//   }
//
// printGraph(parseGraph(text)) == text for any text printGraph produced. Initial data of
// parameters is not part of the text.
#pragma once

#include "ir/Graph.h"

#include <memory>
#include <string>
#include <string_view>

namespace hgp {

std::string printGraph(const Graph& g);
Expected<std::unique_ptr<Graph>> parseGraph(std::string_view text,
                                            const std::string& sourceName = "<ir>");

/// Checks the IR invariants: unique names, operands defined before use (topological order),
/// operand counts, each node's shape rule agreeing with its declared result types, roles
/// (node results are act or grad; graph values are not), and carries pairing a state or param
/// with a value of the same type. The error names the first offending node or value.
Status verifyGraph(const Graph& g);

} // namespace hgp
