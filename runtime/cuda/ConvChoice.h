// ConvChoice.h - the kernels the convolution executors (ConvOps.cpp) launch after cuDNN, and
// what they use to choose among cuDNN's ways of running a phase: a timer for candidates, the
// algorithm classes a diagnostic can leave out, and the checks a fused statistics engine must
// pass before it is kept: it writes nothing but its outputs, its result equals the unfused
// convolution's, and its channel sums agree with hgpc's sums kernel.
#pragma once

#include "runtime/cuda/CudaKernel.h"
#include "runtime/support/Status.h"

#include <cmath>
#include <cstring>
#include <cudnn.h>
#include <string>
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

/// Runs `run(y, sum, sumsq, workspace)` once with its outputs and its workspace (exactly
/// `wsBytes`) in fresh device buffers filled with the byte `fill` (y and the workspace) or
/// `sumsFill` (sum and sumsq), each followed by a canary band of that byte, and reads the outputs
/// back. Fails (ErrorCode::Device, saying which) when the run
/// wrote past an output or past its workspace, or changed its input (`xBytes` at `x`): a cuDNN
/// engine that does is never kept, since in the arena those bytes belong to other tensors. Run
/// with two fills, an output that depends on what its buffer held before shows too. On
/// 2026-12-03 fp16 channels-last statistics engines on the H200 gave right forward results and
/// wrong gradients (CudaConvBnStats.Fp16ChannelsLast) in runs after the first, while hgpc's
/// sums kernel after a plain convolution did not; these checks look for why.
template <typename Run>
Expected<CandidateOutputs> checkedRun(cudaStream_t stream, size_t yBytes, size_t sumFloats,
                                      size_t wsBytes, const void* x, size_t xBytes,
                                      unsigned char fill, unsigned char sumsFill, Run&& run);

/// Whether a 16-bit result `got` (bf16 or f16) is `want` up to the rounding of another
/// accumulation order: every element within 2 units in the last place. On the H200 (2026-12-03)
/// cuDNN's f16 channels-last statistics engines 0, 1 and 3 for [8,14,14,64] put 217 of 100,352
/// elements up to 26 units off the plain convolution's (which matches the CPU's), enough to flip
/// ReLU decisions near zero: CudaConvBnStats.Fp16ChannelsLast's gradients were 0.4-37% off
/// the CPU reference with them and within bounds with hgpc's sums kernel. An engine whose result
/// is less exact than the convolution it replaces is not kept.
bool sameResult(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got, DType dtype);
/// How far a 16-bit result `got` is from `want`, for --verbose: "y differs from the unfused
/// convolution's in K of N elements, by at most U units in the last place".
std::string resultDistance(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got);

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

/// The canary band after each guarded buffer.
inline constexpr size_t kCanaryBytes = 1 << 16;

/// Whether the kCanaryBytes after `base + offset` (device memory) still hold `fill`.
Expected<bool> canaryIntact(const void* base, size_t offset, unsigned char fill);
/// The `bytes` at device address `p`, on the host.
Expected<std::vector<uint8_t>> deviceBytes(const void* p, size_t bytes);

template <typename Run>
Expected<CandidateOutputs> checkedRun(cudaStream_t stream, size_t yBytes, size_t sumFloats,
                                      size_t wsBytes, const void* x, size_t xBytes,
                                      unsigned char fill, unsigned char sumsFill, Run&& run) {
  size_t sumBytes = sumFloats * sizeof(float);
  // y, sum, sumsq and the workspace, each followed by its canary band.
  size_t span[4] = {yBytes + kCanaryBytes, sumBytes + kCanaryBytes, sumBytes + kCanaryBytes,
                    wsBytes + kCanaryBytes};
  size_t at[4] = {0, span[0], span[0] + span[1], span[0] + span[1] + span[2]};
  size_t used[4] = {yBytes, sumBytes, sumBytes, wsBytes};
  void* buf = nullptr;
  if (cudaMalloc(&buf, at[3] + span[3]) != cudaSuccess) {
    (void)cudaGetLastError();
    return Status(ErrorCode::OutOfMemory, "no memory for a fused engine's guarded outputs");
  }
  auto* base = static_cast<unsigned char*>(buf);
  Expected<CandidateOutputs> out = [&]() -> Expected<CandidateOutputs> {
    HGP_ASSIGN_OR_RETURN(std::vector<uint8_t> xBefore, deviceBytes(x, xBytes));
    unsigned char fills[4] = {fill, sumsFill, sumsFill, fill};
    for (int i = 0; i < 4; ++i)
      if (cudaMemset(base + at[i], fills[i], span[i]) != cudaSuccess)
        return Status(ErrorCode::Device, "cudaMemset of a fused engine's guarded outputs failed");
    if (!run(base, base + at[1], base + at[2], base + at[3]) ||
        cudaStreamSynchronize(stream) != cudaSuccess)
      return Status(ErrorCode::Device, "the fused engine failed on its guarded outputs");
    const char* names[4] = {"output y", "output sum", "output sumsq", "workspace"};
    for (int i = 0; i < 4; ++i) {
      HGP_ASSIGN_OR_RETURN(bool ok, canaryIntact(base, at[i] + used[i], fills[i]));
      if (!ok) return Status(ErrorCode::Device, std::string("the fused engine wrote past its ") + names[i]);
    }
    HGP_ASSIGN_OR_RETURN(std::vector<uint8_t> xAfter, deviceBytes(x, xBytes));
    if (xAfter != xBefore) return Status(ErrorCode::Device, "the fused engine changed its input x");
    CandidateOutputs o;
    HGP_ASSIGN_OR_RETURN(o.y, deviceBytes(base, yBytes));
    HGP_ASSIGN_OR_RETURN(std::vector<uint8_t> s1, deviceBytes(base + at[1], sumBytes));
    HGP_ASSIGN_OR_RETURN(std::vector<uint8_t> s2, deviceBytes(base + at[2], sumBytes));
    o.sums.resize(2 * sumFloats);
    std::memcpy(o.sums.data(), s1.data(), sumBytes);
    std::memcpy(o.sums.data() + sumFloats, s2.data(), sumBytes);
    return o;
  }();
  (void)cudaGetLastError();
  (void)cudaFree(buf);
  return out;
}

/// Why a statistics engine's candidate plan must not be kept, or "" when it may: run twice on
/// guarded buffers (checkedRun), its y must not depend on the fill and must equal the unfused
/// `wantY`, and its sums must agree with the kernel's `want`. `distance` gets resultDistance of
/// its y. The sums start at zero in the first run and at about 8.2e5 (bytes 0x49) in the second,
/// so that an engine that adds into its sums instead of writing them fails: fills that read as
/// floats near zero (0xA5, or 0x3C's 0.0115) hid that inside sameSums' bound, and in the arena
/// the sums' buffer holds the last step's sums or another tensor's bytes.
template <typename Run>
std::string statisticsFault(cudaStream_t stream, const std::vector<uint8_t>& wantY, DType dtype,
                            const std::vector<float>& want, double count, size_t wsBytes,
                            const void* x, size_t xBytes, std::string& distance, Run&& run) {
  size_t sums = want.size() / 2;
  auto got = checkedRun(stream, wantY.size(), sums, wsBytes, x, xBytes, 0xA5, 0x00, run);
  if (!got) return got.status().message();
  distance = resultDistance(wantY, got->y);
  auto again = checkedRun(stream, wantY.size(), sums, wsBytes, x, xBytes, 0x3C, 0x49, run);
  if (!again) return again.status().message();
  if (got->y != again->y) return "its result depends on what its buffer held";
  if (!sameResult(wantY, got->y, dtype)) return "its result differs from the convolution's";
  if (!sameSums(want, got->sums, count)) return "its sums disagree with the kernel's";
  if (!sameSums(want, again->sums, count)) return "its sums depend on what their buffers held";
  return "";
}

} // namespace hgp::cuda
