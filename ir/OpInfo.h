// OpInfo.h - the compiler's half of the op table: shape rules and verifiers.
//
// Each op in runtime/plan/OpList.def has a function `Status infer<Name>(InferContext&)`,
// defined in ir/ops/<Family>Ops.cpp. It checks the operand types and attributes and
// computes the result types; the same function serves as the op's verifier, so a rule cannot
// drift from the check. Errors say what is wrong in terms a model author understands
// ("input channels 3 do not match weight channels 4 x group 1"); the caller adds the node name.
#pragma once

#include "runtime/plan/Attr.h"
#include "runtime/plan/OpKind.h"
#include "runtime/plan/Types.h"
#include "runtime/plan/Window.h"

#include <string>
#include <vector>

namespace hgp {

/// What a shape rule sees and fills in.
struct InferContext {
  OpKind op;
  const AttrMap& attrs;
  const std::vector<TensorType>& inputs;
  /// Requested number of results (Split needs it); rules for fixed-arity ops ignore it.
  int numOutputs;
  /// Results to fill in.
  std::vector<TensorType> outputs;

  const TensorType& in(size_t i) const { return inputs[i]; }
  size_t numInputs() const { return inputs.size(); }
  /// An InvalidModel error with `msg`.
  Status fail(const std::string& msg) const;
};

/// Checks operand counts against the op table, then runs the op's shape rule. On success,
/// `outputs` holds the result types.
Status inferTypes(OpKind op, const AttrMap& attrs, const std::vector<TensorType>& inputs,
                  int numOutputs, std::vector<TensorType>& outputs);

#define HGP_OP(Name, ...) Status infer##Name(InferContext& ctx);
#include "runtime/plan/OpList.def"

// ---- Helpers shared by the shape rules ----------------------------------------------------

/// The numpy broadcast of two shapes, or an error naming both.
Expected<Shape> broadcastShapes(const Shape& a, const Shape& b);
/// Requires a float32 input at position i.
Status requireF32(const InferContext& ctx, size_t i, const char* what);
/// Requires a floating-point compute input at position i: f32, or the bf16/f16 storage that
/// mixed precision (passes/MixedPrecision.cpp) gives activations and their gradients.
Status requireFloat(const InferContext& ctx, size_t i, const char* what);
/// Requires input i to be a float of the same dtype as input `ref` (no implicit promotion: the
/// mixed-precision pass inserts a Cast where types differ).
Status requireSameFloat(const InferContext& ctx, size_t i, size_t ref, const char* what);
/// Reads a list attribute that must have exactly `n` entries.
Expected<std::vector<int64_t>> intsOfLength(const InferContext& ctx, const char* name, size_t n);

} // namespace hgp
