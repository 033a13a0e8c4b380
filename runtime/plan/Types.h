// Types.h - element types, shapes and tensor roles: the vocabulary of the plan schema.
//
// The runtime owns the plan schema (docs/plan-format.md), and the compiler's IR reuses these
// definitions, so a dtype or a role means the same thing on both sides of the contract.
#pragma once

#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hgp {

/// Element types. Training math is float32; the others carry labels, counters, flags and the
/// lower-precision storage that later passes introduce.
enum class DType : uint8_t { F32, F64, F16, BF16, I64, I32, I8, U8, Bool };

/// "f32", "i64", ...: the spelling used in IR and plan text.
const char* dtypeName(DType t);
/// Parses a dtype spelling.
Expected<DType> parseDType(std::string_view s);
/// Bytes per element.
int64_t dtypeSize(DType t);
bool isFloatDType(DType t);

/// A static shape. Rank 0 is a scalar. Every dim is positive.
using Shape = std::vector<int64_t>;

/// The number of elements; 1 for a scalar.
int64_t numElements(const Shape& s);
/// "[64,3,32,32]".
std::string shapeToString(const Shape& s);

/// A dtype and a shape.
struct TensorType {
  DType dtype = DType::F32;
  Shape shape;
  int64_t numElements() const { return hgp::numElements(shape); }
  int64_t bytes() const { return numElements() * dtypeSize(dtype); }
  int64_t rank() const { return int64_t(shape.size()); }
  bool operator==(const TensorType&) const = default;
};

/// "f32[64,3,32,32]".
std::string typeToString(const TensorType& t);

/// What a tensor is for. The role decides where it lives (persistent storage or the transient
/// arena), what a checkpoint saves and what the optimizer updates.
enum class TensorRole : uint8_t {
  Input,      ///< Fed from the host each step (images, labels).
  Param,      ///< Trainable weights, updated by the optimizer.
  State,      ///< Persistent non-trainable tensors: BN running stats, optimizer buffers, counters.
  Const,      ///< Read-only data known at compile time.
  Activation, ///< Forward intermediate results.
  Gradient,   ///< Backward intermediate results.
};

/// "input", "param", "state", "const", "act", "grad".
const char* roleName(TensorRole r);
Expected<TensorRole> parseRole(std::string_view s);
/// Whether tensors of this role outlive one iteration.
inline bool isPersistentRole(TensorRole r) {
  return r == TensorRole::Input || r == TensorRole::Param || r == TensorRole::State ||
         r == TensorRole::Const;
}

} // namespace hgp
