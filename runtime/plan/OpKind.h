// OpKind.h - the op enum and its static properties, generated from OpList.def.
#pragma once

#include "runtime/support/Status.h"

#include <string_view>

namespace hgp {

enum class OpKind : uint16_t {
#define HGP_OP(Name, ...) Name,
#include "runtime/plan/OpList.def"
};

/// The number of ops in the table.
constexpr int kNumOps = 0
#define HGP_OP(Name, ...) +1
#include "runtime/plan/OpList.def"
    ;

/// Operand counts and properties of an op, as OpList.def states them.
struct OpTraits {
  const char* name;
  const char* family;
  int minInputs, maxInputs, minOutputs, maxOutputs; ///< -1: unbounded.
  bool differentiable;
};

const OpTraits& opTraits(OpKind op);
inline const char* opName(OpKind op) { return opTraits(op).name; }
/// Looks an op up by its spelling in IR and plan text.
Expected<OpKind> parseOpKind(std::string_view name);

} // namespace hgp
