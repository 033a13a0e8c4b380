// FastDiv.h - unsigned division by a divisor fixed at launch, for the CUDA kernels' index math
// (the per-channel sums in DeviceUtil.cuh, the pooling kernels, the strided walk of
// StridedWalk.h), which would otherwise spend most of their instructions in integer division.
// Host and device share it, so that the CPU unit tests (tests/unit/StridedWalkTest.cpp) hold it
// to plain division.
#pragma once

#include <cstdint>

// HGP_INDEX_FN: a function for both sides; HGP_INDEX_UNROLL: unroll the loop that follows on the
// device (the host compilers, nvcc's host pass included, have no such pragma).
#if defined(__CUDACC__)
#define HGP_INDEX_FN __host__ __device__ __forceinline__
#else
#define HGP_INDEX_FN inline
#endif
#if defined(__CUDA_ARCH__)
#define HGP_INDEX_UNROLL _Pragma("unroll")
#else
#define HGP_INDEX_UNROLL
#endif

namespace hgp::cuda {

/// Unsigned division of n < 2^31 by a fixed divisor d < 2^31 with a multiply-high (Granlund and
/// Montgomery's round-up method): t = umulhi(n, m), q = (t + ((n - t) >> 1)) >> (l - 1), with
/// l = ceil(log2 d) and m = floor(2^32 (2^l - d) / d) + 1. The quotient is exact.
struct FastDiv {
  uint32_t d = 1, m = 0, l = 0;
  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor) {
    while ((uint64_t(1) << l) < d) ++l;
    m = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << l) - d)) / d + 1);
  }
  HGP_INDEX_FN uint32_t div(uint32_t n) const {
    if (l == 0) return n;
#if defined(__CUDA_ARCH__)
    uint32_t t = __umulhi(n, m);
#else
    uint32_t t = uint32_t((uint64_t(n) * m) >> 32);
#endif
    return (t + ((n - t) >> 1)) >> (l - 1);
  }
  /// n / d for 0 <= n < 2^31.
  HGP_INDEX_FN int operator()(int n) const { return int(div(uint32_t(n))); }
};

} // namespace hgp::cuda
