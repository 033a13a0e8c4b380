// Internal to the pooling executors: what the NCHW kernels (PoolOps.cu) and the channels-last
// kernels (NhwcPoolOps.cu) share: the window geometry in 32-bit ints, the flat grid-stride
// launches, the window arithmetic both layouts apply per channel in the same order (which is
// why they agree bit for bit), and the channels-last executors that PoolOps.cu's dispatchers
// call for layout="nhwc".
#pragma once

#include "runtime/cuda/DeviceUtil.cuh"

namespace hgp::cuda::pool {

/// Window geometry in 32-bit ints (one plane is far below 2^31 elements; readPoolGeometry
/// checks), which keeps the index arithmetic of these kernels cheap.
struct PoolGeometry {
  int64_t planes = 0; ///< N * C.
  int in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int stride[3] = {1, 1, 1}, padBegin[3] = {0, 0, 0}, padEnd[3] = {0, 0, 0};
  int dilation[3] = {1, 1, 1};
  bool countIncludePad = false;

  __host__ __device__ int inVol() const { return in[0] * in[1] * in[2]; }
  __host__ __device__ int outVol() const { return out[0] * out[1] * out[2]; }
  __host__ __device__ int windowVol() const { return k[0] * k[1] * k[2]; }
};

/// Reads the window attributes and checks that y is the pooled shape of x.
Status readPoolGeometry(const CudaArgs& a, const Shape& x, const Shape& y, PoolGeometry& g);

/// Grid-stride launches over `total` elements, one per thread. Index spaces below 2^31 elements
/// use 32-bit index arithmetic (the decomposition into positions is most of these kernels'
/// integer work).
struct FlatLaunch {
  unsigned grid, threads;
  int64_t total;
  bool narrow() const { return total < (int64_t(1) << 31); }
};

inline FlatLaunch flatLaunch(const CudaArgs& a, int64_t total) {
  return {blocksFor(a, total, kBlock, 32), unsigned(kBlock), total};
}

#define HGP_FLAT_LOOP(I, i, n)                                                                     \
  for (I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); i < (n); i += I(gridDim.x) * I(blockDim.x))

/// The output positions of dim d whose undilated window [o*s - pad, o*s - pad + k) holds input
/// index i: [lo, hi], ascending (empty when lo > hi).
__device__ __forceinline__ void coveringRange(const PoolGeometry& g, int d, int i, int& lo,
                                              int& hi) {
  int t = i + g.padBegin[d] - g.k[d] + 1;
  lo = t <= 0 ? 0 : (t + g.stride[d] - 1) / g.stride[d];
  hi = min((i + g.padBegin[d]) / g.stride[d], g.out[d] - 1);
}

/// Calls fn(o, k) for each output position o of dim d whose (dilated) max window reads input
/// index i at window position k, in ascending o (window positions from the last to the first).
template <typename Fn>
__device__ __forceinline__ void maxCovering(const PoolGeometry& g, int d, int i, Fn&& fn) {
  for (int k = g.k[d] - 1; k >= 0; --k) {
    int t = i + g.padBegin[d] - k * g.dilation[d];
    if (t < 0) continue;
    int o = t / g.stride[d];
    if (o * g.stride[d] != t || o >= g.out[d]) continue;
    fn(o, k);
  }
}

/// coveringRange with the stride S (1 or 2) known at compile time: no division.
template <int S>
__device__ __forceinline__ void coveringRangeS(const PoolGeometry& g, int d, int i, int& lo,
                                               int& hi) {
  int t = i + g.padBegin[d] - g.k[d] + 1;
  lo = t <= 0 ? 0 : (t + S - 1) / S;
  hi = min((i + g.padBegin[d]) / S, g.out[d] - 1);
}

/// One dim of an average-pooling window: valid input [lo, hi), and the padded extent.
struct AvgSpan {
  int lo, hi, extent;
};

__device__ __forceinline__ AvgSpan avgSpan(const PoolGeometry& g, int d, int o) {
  int start = o * g.stride[d] - g.padBegin[d];
  int end = min(start + g.k[d], g.in[d] + g.padEnd[d]);
  return {max(start, 0), min(end, g.in[d]), end - start};
}

/// The divisor of an output position's average (0 when its window is empty).
inline __device__ int64_t avgWindow(const PoolGeometry& g, int od, int oh, int ow, AvgSpan s[3]) {
  s[0] = avgSpan(g, 0, od);
  s[1] = avgSpan(g, 1, oh);
  s[2] = avgSpan(g, 2, ow);
  if (s[0].hi <= s[0].lo || s[1].hi <= s[1].lo || s[2].hi <= s[2].lo) return 0;
  if (g.countIncludePad) return int64_t(s[0].extent) * s[1].extent * s[2].extent;
  return int64_t(s[0].hi - s[0].lo) * (s[1].hi - s[1].lo) * (s[2].hi - s[2].lo);
}

// ---- Channels-last executors (NhwcPoolOps.cu) ----------------------------------------------

/// MaxPool, MaxPoolBwd, AveragePool and GlobalAveragePool with layout="nhwc", for X's element
/// type; the gradients of the average pools take the NCHW x_shape attribute.
Status maxPoolNhwc(CudaArgs& a);
Status maxPoolBwdNhwc(CudaArgs& a);
Status avgPoolNhwc(CudaArgs& a);
Status avgPoolBwdNhwc(CudaArgs& a, const Shape& xNchw);
Status globalAvgNhwc(CudaArgs& a);
Status globalAvgBwdNhwc(CudaArgs& a, const Shape& xNchw);

} // namespace hgp::cuda::pool
