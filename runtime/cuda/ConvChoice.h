// ConvChoice.h - the kernels the convolution executors (ConvOps.cpp) launch after cuDNN, and
// what they use to choose among cuDNN's ways of running a phase: a timer for candidates, the
// algorithm classes a diagnostic can leave out, and the check that a fused statistics engine's
// channel sums agree with hgpc's sums kernel before the engine is kept.
#pragma once

#include "runtime/cuda/CudaKernel.h"
#include "runtime/support/Status.h"

#include <cmath>
#include <cudnn.h>
#include <vector>

namespace hgp::cuda {

/// The bias and Relu epilogue after a convolution (ConvBias.cu).
Status launchConvEpilogue(const CudaArgs& a, const DeviceTensor& y, const DeviceTensor* bias,
                          int64_t c, int64_t plane, bool relu);
/// The channel sums of y into sum and sumsq, and the scratch that takes (NormOps.cu).
Status channelSumsScratch(const CudaArgs& a, const DeviceTensor& y, bool nhwc, size_t& bytes);
Status launchChannelSums(const CudaArgs& a, const DeviceTensor& y, bool nhwc, void* scratch,
                         float* sum, float* sumsq);

/// HGPC_CONV_ALGOS=gemm, a diagnostic (docs/testing.md): only GEMM-class algorithms, never FFT
/// or Winograd, whose float32 rounding is several times an implicit GEMM's.
bool gemmOnly();
bool isTransform(cudnnConvolutionFwdAlgo_t a);
bool isTransform(cudnnConvolutionBwdDataAlgo_t a);
bool isTransform(cudnnConvolutionBwdFilterAlgo_t a);

/// The channel sums and sums of squares the step's outputs 1 and 2 hold now, on the host.
Expected<std::vector<float>> readSums(CudaArgs& a);
/// Whether a fused engine's sums agree with the unfused ones to what the rounding of y in 16
/// bits allows: each sum within 2e-3 of sqrt(count * sumsq), which bounds the sum of |y|.
bool sameSums(const std::vector<float>& want, const std::vector<float>& got, double count);

/// Milliseconds per run of `fn` on the stream (the mean of three after a warm-up); infinity if a
/// run fails.
template <typename Fn> double timeRuns(cudaStream_t stream, Fn&& fn) {
  cudaEvent_t start = nullptr, stop = nullptr;
  double ms = INFINITY;
  if (cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess && fn() &&
      cudaEventRecord(start, stream) == cudaSuccess) {
    bool ok = fn() && fn() && fn();
    float t = 0;
    if (ok && cudaEventRecord(stop, stream) == cudaSuccess &&
        cudaEventSynchronize(stop) == cudaSuccess && cudaEventElapsedTime(&t, start, stop) == cudaSuccess)
      ms = double(t) / 3;
  }
  (void)cudaGetLastError();
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  return ms;
}

} // namespace hgp::cuda
