// CpuKernel.h - what a CPU executor receives, and helpers the executors share.
//
// Each op in runtime/plan/OpList.def has `Status exec<Name>(KernelArgs&)` in
// runtime/cpu/<Family>Ops.cpp. Executors are written to be obviously right: plain loops over
// row-major float32 data, with parallelFor (runtime/support/ThreadPool.h) on the outer loop of the
// heavy ones and the blocked GEMM in Gemm.h for convolutions and matrix products. Shapes were
// verified by the compiler, so executors may assume the shape rule holds; they still fail cleanly
// (ErrorCode::Internal) on anything the rule does not cover rather than read out of bounds.
#pragma once

#include "runtime/plan/Plan.h"
#include "runtime/plan/ShapeAttrs.h"

#include <cstdint>
#include <vector>

namespace hgp::cpu {

/// A tensor's type and bytes, as an executor sees them.
struct TensorView {
  DType dtype = DType::F32;
  const Shape* shape = nullptr;
  void* data = nullptr;
  /// The dtype the tensor is stored as: `dtype`, or bf16/f16 for the float32 copy the backend
  /// gives an executor of a 16-bit tensor (which it rounds back after the step). A fused
  /// executor that must round an intermediate as the unfused ops would have stored it reads it.
  DType stored = DType::F32;

  int64_t numel() const { return numElements(*shape); }
  int64_t rank() const { return int64_t(shape->size()); }
  int64_t dim(int64_t i) const { return (*shape)[size_t(i)]; }
  template <typename T> T* as() const { return static_cast<T*>(data); }
  float* f32() const { return as<float>(); }
};

struct KernelArgs {
  const PlanStep& step;
  std::vector<TensorView> in, out;

  const AttrMap& attrs() const { return step.attrs; }
  /// An Internal error naming the step.
  Status fail(const std::string& msg) const;
};

#define HGP_OP(Name, ...) Status exec##Name(KernelArgs& a);
#include "runtime/plan/OpList.def"

// ---- Shared helpers ------------------------------------------------------------------------

/// Philox-4x32-10 (Salmon et al., SC'11): four 32-bit outputs for a 128-bit counter and a 64-bit
/// key. Dropout on every backend draws from this, so masks agree bit for bit.
void philox4x32(uint32_t counter[4], uint32_t key0, uint32_t key1, uint32_t out[4]);

/// The uniform float in [0, 1) that dropout compares with its ratio, for element `index` at
/// iteration `iter` of the dropout site (seed, key).
float dropoutUniform(uint64_t seed, uint64_t key, uint64_t iter, uint64_t index);

} // namespace hgp::cpu
