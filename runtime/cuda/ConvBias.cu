// Small kernels the cuDNN and cuBLAS executors need around the library calls: a convolution's
// epilogue (bias and the fused Relu) and the broadcast that seeds a GEMM with its bias.
#include "runtime/cuda/DeviceUtil.cuh"

namespace hgp::cuda {

namespace {

/// y = act(y + bias[channel]) over `total` elements in vectors of N, in place. `plane` elements
/// share a channel and `c` channels repeat (NCHW: plane = H*W; channels-last: plane = 1). With
/// N > 1, either plane % N == 0 (a vector lies in one channel) or `row` is set (plane == 1 and
/// c % N == 0: a vector covers N consecutive channels). The sum is rounded to T before the Relu,
/// as the unfused bias add stores it; relu keeps NaN, as Relu does.
template <typename T, int N, bool Row>
__global__ void convEpilogue(T* y, const T* bias, int64_t total, int64_t c, int64_t plane,
                             bool relu) {
  HGP_GRID_LOOP(q, total / N) {
    int64_t i = q * N;
    float v[N];
    loadVec<N>(y + i, v);
    if (bias) {
      if constexpr (Row) {
        float b[N];
        loadVec<N>(bias + i % c, b);
#pragma unroll
        for (int k = 0; k < N; ++k) v[k] = toFloat(fromFloat<T>(v[k] + b[k]));
      } else {
        float b = toFloat(bias[(i / plane) % c]);
#pragma unroll
        for (int k = 0; k < N; ++k) v[k] = toFloat(fromFloat<T>(v[k] + b));
      }
    }
    if (relu)
#pragma unroll
      for (int k = 0; k < N; ++k) v[k] = v[k] > 0.f || isnan(v[k]) ? v[k] : 0.f;
    storeVec<N>(y + i, v);
  }
}

template <typename T>
__global__ void broadcastCopy(const T* src, Dims from, T* dst, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rest = i, off = 0;
    for (int d = from.rank - 1; d >= 0; --d) {
      off += (rest % from.size[d]) * from.stride[d];
      rest /= from.size[d];
    }
    dst[i] = src[off];
  }
}

template <typename T>
Status launchEpilogue(const CudaArgs& a, T* y, const T* bias, int64_t total, int64_t c,
                      int64_t plane, bool relu) {
  constexpr int V = kVec<T>;
  bool aligned = alignedTo(16, {y, bias});
  if (aligned && plane % V == 0)
    convEpilogue<T, V, false><<<blocksFor(a, total / V), kBlock, 0, a.stream>>>(y, bias, total, c,
                                                                                plane, relu);
  else if (aligned && plane == 1 && c % V == 0)
    convEpilogue<T, V, true><<<blocksFor(a, total / V), kBlock, 0, a.stream>>>(y, bias, total, c,
                                                                               plane, relu);
  else
    convEpilogue<T, 1, false><<<blocksFor(a, total), kBlock, 0, a.stream>>>(y, bias, total, c,
                                                                            plane, relu);
  return checkLaunch(a, "convEpilogue");
}

} // namespace

Status launchConvEpilogue(const CudaArgs& a, const DeviceTensor& y, const DeviceTensor* bias,
                          int64_t c, int64_t plane, bool relu) {
  if (bias && bias->dtype != y.dtype) return a.fail("the bias must have the result's dtype");
  return dispatchFloat(a, y.dtype, [&](auto t) {
    using T = decltype(t);
    return launchEpilogue<T>(a, y.as<T>(), bias ? bias->as<T>() : nullptr, y.numel(), c, plane,
                             relu);
  });
}

void launchBroadcastCopy(const void* src, const Dims& from, void* dst, int64_t total,
                         int64_t elemSize, cudaStream_t stream) {
  if (elemSize == 2)
    broadcastCopy<<<gridFor(total), kBlock, 0, stream>>>(static_cast<const uint16_t*>(src), from,
                                                         static_cast<uint16_t*>(dst), total);
  else
    broadcastCopy<<<gridFor(total), kBlock, 0, stream>>>(static_cast<const float*>(src), from,
                                                         static_cast<float*>(dst), total);
}

} // namespace hgp::cuda
