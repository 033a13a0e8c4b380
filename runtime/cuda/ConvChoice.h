// ConvChoice.h - the kernels the convolution executors (ConvOps.cpp) launch after cuDNN, and
// what they use to choose among cuDNN's ways of running a phase: a timer for candidates, the
// algorithm classes a diagnostic can leave out, and the checks a fused statistics engine must
// pass before it is kept: it writes nothing but its outputs, its result equals the unfused
// convolution's, and its channel sums agree with hgpc's sums kernel.
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

/// A fused engine's outputs, written into guarded copies by checkedRun: y's bytes and the two
/// f32 sums, read back to the host.
struct CandidateOutputs {
  std::vector<uint8_t> y;
  std::vector<float> sums; ///< sum then sumsq, as readSums gives them
};

/// Runs `run(y, sum, sumsq)` once with its outputs in fresh device buffers, each followed by a
/// canary band, and reads them back. Fails (ErrorCode::Device, saying which output) when the
/// run wrote past an output: a cuDNN engine that does is never kept, since in the arena those
/// bytes belong to other tensors. On 2026-12-03 an fp16 channels-last statistics engine on the
/// H200 gave right forward results and wrong gradients (CudaConvBnStats.Fp16ChannelsLast)
/// while hgpc's sums kernel after a plain convolution did not; this check tells whether it
/// wrote outside its outputs.
template <typename Run>
Expected<CandidateOutputs> checkedRun(cudaStream_t stream, size_t yBytes, size_t sumFloats,
                                      Run&& run);

/// Whether a 16-bit result `got` equals `want` to one rounding of the dtype (bf16 or f16): each
/// element within 1/64 of max |want| (a different accumulation order moves a value by at most a
/// few units in its last place).
bool sameResult(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got, DType dtype);

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

/// The canary band after each guarded output, and its byte value.
inline constexpr size_t kCanaryBytes = 1 << 16;
inline constexpr unsigned char kCanary = 0xA5;

/// Whether the kCanaryBytes after `base + offset` (device memory) still hold kCanary.
Expected<bool> canaryIntact(const void* base, size_t offset);

template <typename Run>
Expected<CandidateOutputs> checkedRun(cudaStream_t stream, size_t yBytes, size_t sumFloats,
                                      Run&& run) {
  size_t sumBytes = sumFloats * sizeof(float);
  size_t ySpan = yBytes + kCanaryBytes, sSpan = sumBytes + kCanaryBytes;
  void* buf = nullptr;
  if (cudaMalloc(&buf, ySpan + 2 * sSpan) != cudaSuccess) {
    (void)cudaGetLastError();
    return Status(ErrorCode::OutOfMemory, "no memory for a fused engine's guarded outputs");
  }
  auto* base = static_cast<unsigned char*>(buf);
  Expected<CandidateOutputs> out = [&]() -> Expected<CandidateOutputs> {
    if (cudaMemset(base, kCanary, ySpan + 2 * sSpan) != cudaSuccess)
      return Status(ErrorCode::Device, "cudaMemset of a fused engine's guarded outputs failed");
    if (!run(base, base + ySpan, base + ySpan + sSpan) || cudaStreamSynchronize(stream) != cudaSuccess)
      return Status(ErrorCode::Device, "the fused engine failed on its guarded outputs");
    const char* names[3] = {"y", "sum", "sumsq"};
    size_t ends[3] = {yBytes, ySpan + sumBytes, ySpan + sSpan + sumBytes};
    for (int i = 0; i < 3; ++i) {
      Expected<bool> ok = canaryIntact(base, ends[i]);
      if (!ok) return ok.status();
      if (!*ok)
        return Status(ErrorCode::Device,
                      std::string("the fused engine wrote past its output ") + names[i]);
    }
    CandidateOutputs o;
    o.y.resize(yBytes);
    o.sums.resize(2 * sumFloats);
    if (cudaMemcpy(o.y.data(), base, yBytes, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(o.sums.data(), base + ySpan, sumBytes, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(o.sums.data() + sumFloats, base + ySpan + sSpan, sumBytes,
                   cudaMemcpyDeviceToHost) != cudaSuccess)
      return Status(ErrorCode::Device, "reading a fused engine's guarded outputs failed");
    return o;
  }();
  (void)cudaGetLastError();
  (void)cudaFree(buf);
  return out;
}

} // namespace hgp::cuda
