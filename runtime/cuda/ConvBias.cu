// Small kernels the cuDNN and cuBLAS executors need around the library calls.
#include "runtime/cuda/CudaKernel.h"

namespace hgp::cuda {

namespace {

__global__ void addChannelBias(float* y, const float* bias, int64_t total, int64_t c, int64_t spatial) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] += bias[(i / spatial) % c];
}

__global__ void broadcastCopy(const float* src, Dims from, float* dst, int64_t total) {
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

void launchAddChannelBias(float* y, const float* bias, int64_t n, int64_t c, int64_t spatial,
                          cudaStream_t stream) {
  int64_t total = n * c * spatial;
  addChannelBias<<<gridFor(total), kBlock, 0, stream>>>(y, bias, total, c, spatial);
}

void launchBroadcastCopy(const float* src, const Dims& from, float* dst, int64_t total,
                         cudaStream_t stream) {
  broadcastCopy<<<gridFor(total), kBlock, 0, stream>>>(src, from, dst, total);
}

} // namespace hgp::cuda
