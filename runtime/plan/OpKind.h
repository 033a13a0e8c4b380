// OpKind.h - the op enum and its static properties, generated from OpList.def.
//
// Every fact about an op lives in its OpList.def entry: the operand counts, whether it has a
// gradient, and its properties (the Props column): which backends' executors take 16-bit tensors,
// which layouts it has, how batch slicing cuts it, which operands mixed precision lowers, which
// results are written in place. opTraits(op) reads them; passes and backends ask it instead of
// keeping their own lists of ops, so that an op added to the table is never silently left out of
// one of them.
#pragma once

#include "runtime/support/Status.h"

#include <cstdint>
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

/// Yes-or-no properties of an op (the flags of OpList.def's Props column).
enum class OpFlag : uint32_t {
  CudaHalf = 1u << 0,     ///< The CUDA executor takes bf16/f16 tensors.
  Optimizer = 1u << 1,    ///< Consecutive steps may share one multi-tensor CUDA launch.
  ChannelsLast = 1u << 2, ///< Has a layout="nhwc" form for rank-4 tensors.
  LayoutFree = 1u << 3,   ///< Same-shape elementwise math, indifferent to the layout.
  Fusible = 1u << 4,      ///< May be an instruction of a FusedElementwise program.
  FusedAlpha = 1u << 5,   ///< As a fused instruction, carries alpha.
  FusedBounds = 1u << 6,  ///< As a fused instruction, carries min and max.
  FusedBeta = 1u << 7,    ///< As a fused instruction, carries beta (HardSigmoid's offset).
  FusedBroadcast = 1u << 8, ///< As a fused instruction, may read broadcast inputs of the step.
  CpuHalf = 1u << 9,      ///< The CPU executor reads and writes bf16/f16 storage itself.
  FusedApprox = 1u << 10, ///< As a fused instruction, carries Gelu's form (approximate).
  FusedCount = 1u << 11,  ///< As a fused instruction, carries count (a pooling gradient's spread).
};

/// Which operands of a step batch slicing may cut along the batch dimension (dimension 0).
/// BatchSlicing.cpp's batchOperands applies the rule to a step's tensors.
enum class BatchRule : uint8_t {
  None,       ///< The step stays whole.
  All,        ///< Every operand and result has the batch.
  First,      ///< Operand 0 and result 0 have the batch; the others (weights) are whole.
  Accumulate, ///< Operands 0 and 1 have the batch; slices add into the f32 result (a filter
              ///< gradient).
  Broadcast,  ///< The result has the batch; each operand has it or broadcasts along it.
  Axis,       ///< Like All, when the op's `axis` attribute is 1 or more.
  Fused,      ///< Like All, unless a dropout inside numbers the elements (an i64 operand).
};

/// Which operands mixed precision gives the low dtype (passes/MixedPrecision.cpp).
enum class PrecisionRule : uint8_t {
  Low,       ///< Every float operand.
  F32,       ///< None: every operand stays float32.
  LowFirst1, ///< Operand 0 only.
  LowFirst2, ///< Operands 0 and 1.
  Keep,      ///< Each operand keeps the dtype it has (a Cast).
};

/// The Props column of one OpList.def entry: the pieces joined with |.
struct OpProps {
  uint32_t flags = 0;
  BatchRule batch = BatchRule::None;
  PrecisionRule precision = PrecisionRule::Low;
  /// For result k, 1 + the input it overwrites, or 0 for none (InPlace).
  uint8_t inPlace[4] = {0, 0, 0, 0};

  constexpr OpProps operator|(const OpProps& o) const {
    OpProps r = *this;
    r.flags |= o.flags;
    if (o.batch != BatchRule::None) r.batch = o.batch;
    if (o.precision != PrecisionRule::Low) r.precision = o.precision;
    for (int k = 0; k < 4; ++k)
      if (o.inPlace[k]) r.inPlace[k] = o.inPlace[k];
    return r;
  }
};

/// The words of OpList.def's Props column. Only OpKind.cpp brings them into scope.
namespace opprops {
constexpr OpProps flag(OpFlag f) { return {uint32_t(f)}; }
constexpr OpProps batch(BatchRule b) { return {0, b}; }
constexpr OpProps precision(PrecisionRule p) { return {0, BatchRule::None, p}; }

constexpr OpProps NoProps{};
constexpr OpProps CudaHalf = flag(OpFlag::CudaHalf), Optimizer = flag(OpFlag::Optimizer),
                  ChannelsLast = flag(OpFlag::ChannelsLast), LayoutFree = flag(OpFlag::LayoutFree),
                  Fusible = flag(OpFlag::Fusible), FusedAlpha = flag(OpFlag::FusedAlpha),
                  FusedBounds = flag(OpFlag::FusedBounds), FusedBeta = flag(OpFlag::FusedBeta),
                  FusedBroadcast = flag(OpFlag::FusedBroadcast), CpuHalf = flag(OpFlag::CpuHalf),
                  FusedApprox = flag(OpFlag::FusedApprox), FusedCount = flag(OpFlag::FusedCount);
constexpr OpProps BatchAll = batch(BatchRule::All), BatchFirst = batch(BatchRule::First),
                  BatchAccumulate = batch(BatchRule::Accumulate),
                  BatchBroadcast = batch(BatchRule::Broadcast), BatchAxis = batch(BatchRule::Axis),
                  BatchFused = batch(BatchRule::Fused);
constexpr OpProps F32Operands = precision(PrecisionRule::F32),
                  KeepDType = precision(PrecisionRule::Keep);
/// The first `n` operands (1 or 2) get the low dtype, the others stay float32.
constexpr OpProps LowOperands(int n) {
  return precision(n == 1 ? PrecisionRule::LowFirst1 : PrecisionRule::LowFirst2);
}
/// Result k overwrites input `inputs[k]` (at most four results).
constexpr OpProps InPlace(int i0, int i1 = -1, int i2 = -1, int i3 = -1) {
  OpProps p;
  int in[4] = {i0, i1, i2, i3};
  for (int k = 0; k < 4; ++k) p.inPlace[k] = uint8_t(in[k] + 1);
  return p;
}
} // namespace opprops

/// Operand counts and properties of an op, as OpList.def states them.
struct OpTraits {
  const char* name;
  const char* family;
  int minInputs, maxInputs, minOutputs, maxOutputs; ///< -1: unbounded.
  bool differentiable;
  OpProps props;

  bool has(OpFlag f) const { return (props.flags & uint32_t(f)) != 0; }
  BatchRule batchRule() const { return props.batch; }
  PrecisionRule precisionRule() const { return props.precision; }
  /// For ops that update a state in place (optimizers, BN running statistics, counters, the
  /// metrics ring): the input that result `output` may overwrite, or -1 (InPlace). When the
  /// result is carried into that state, the plan gives the two the same storage; the executors
  /// are written so that this aliasing is safe, and also work when the result has storage of its
  /// own.
  int inPlaceInput(int output) const {
    return output >= 0 && output < 4 ? int(props.inPlace[output]) - 1 : -1;
  }
};

const OpTraits& opTraits(OpKind op);
inline const char* opName(OpKind op) { return opTraits(op).name; }
/// Whether the op's OpList.def entry has flag `f`.
inline bool opHas(OpKind op, OpFlag f) { return opTraits(op).has(f); }
/// Looks an op up by its spelling in IR and plan text.
Expected<OpKind> parseOpKind(std::string_view name);

} // namespace hgp
