// Small kernels the cuDNN and cuBLAS executors need around the library calls.
#include "runtime/cuda/DeviceUtil.cuh"

namespace hgp::cuda {

namespace {

template <typename T>
__global__ void addChannelBias(T* y, const T* bias, int64_t total, int64_t c, int64_t spatial) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = fromFloat<T>(toFloat(y[i]) + toFloat(bias[(i / spatial) % c]));
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

} // namespace

Status launchAddChannelBias(DType t, void* y, const void* bias, int64_t n, int64_t c,
                            int64_t spatial, cudaStream_t stream) {
  int64_t total = n * c * spatial;
  switch (t) {
  case DType::F32:
    addChannelBias<<<gridFor(total), kBlock, 0, stream>>>(static_cast<float*>(y),
                                                          static_cast<const float*>(bias), total,
                                                          c, spatial);
    return Status::ok();
  case DType::BF16:
    addChannelBias<<<gridFor(total), kBlock, 0, stream>>>(
        static_cast<__nv_bfloat16*>(y), static_cast<const __nv_bfloat16*>(bias), total, c, spatial);
    return Status::ok();
  case DType::F16:
    addChannelBias<<<gridFor(total), kBlock, 0, stream>>>(
        static_cast<__half*>(y), static_cast<const __half*>(bias), total, c, spatial);
    return Status::ok();
  default:
    return Status(ErrorCode::Internal, std::string("conv bias in ") + dtypeName(t));
  }
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
