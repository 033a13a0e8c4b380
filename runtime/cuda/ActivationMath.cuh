// ActivationMath.cuh - the float formulas of the activations that a BatchNorm can absorb, shared
// by their own CUDA executors (ActivationOps.cu) and the fused BatchNorm kernels
// (NormKernels.cuh), and written as the generated fused kernels write them
// (compiler/codegen/FusedKernelSource.cpp): products and sums with __fmul_rn/__fadd_rn, so no
// multiply-add is contracted. ActivationOps.cu is compiled with --fmad=false, the BatchNorm files
// are not, so expf inside them may round differently in the last place: a fused BatchNorm and
// the unfused chain agree to an ulp of expf there, not bit for bit (docs/fusion.md, "Numerics").
#pragma once

#include <cuda_runtime.h>

namespace hgp::cuda {

/// Relu as the Relu op computes it (NaN passes through).
__device__ __forceinline__ float reluOf(float v) {
  return v > 0.f ? v : (isnan(v) ? v : 0.f);
}

struct SiluF { // the generated fused kernels' silu()
  __device__ float operator()(float x) const { return __fdiv_rn(x, __fadd_rn(1.f, expf(-x))); }
};
struct SiluBwdF { // the generated fused kernels' silubwd()
  __device__ float operator()(float dy, float x) const {
    float s = __fdiv_rn(1.f, __fadd_rn(1.f, expf(-x)));
    return __fmul_rn(__fmul_rn(dy, s), __fadd_rn(1.f, __fmul_rn(x, __fsub_rn(1.f, s))));
  }
};
struct HardSwishF { // PyTorch's form: x * min(max(x + 3, 0), 6) / 6
  __device__ float operator()(float x) const {
    float r = __fadd_rn(x, 3.f);
    r = r < 0.f ? 0.f : (r > 6.f ? 6.f : r);
    return __fdiv_rn(__fmul_rn(x, r), 6.f);
  }
};
struct HardSwishBwdF { // 0 below -3, dy above 3, dy * (x/3 + 1/2) in between
  __device__ float operator()(float dy, float x) const {
    if (x < -3.f) return 0.f;
    if (x <= 3.f) return __fmul_rn(dy, __fadd_rn(__fdiv_rn(x, 3.f), 0.5f));
    return dy;
  }
};

} // namespace hgp::cuda
