// FlopCount.h - arithmetic cost of IR nodes, for `hgpc inspect` and the cost model.
//
// Multiply-adds count as two FLOPs. Memory-bound ops count one FLOP per element they produce
// (a few for normalizations and softmax), which is a rough measure but keeps reports comparable.
#pragma once

#include "ir/Graph.h"

namespace hgp {

/// FLOPs of one execution of node `n`.
int64_t flopsOf(const Node& n);

} // namespace hgp
