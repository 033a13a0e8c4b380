// ConvChoice.cpp - the algorithm classes and the statistics check of ConvChoice.h.
#include "runtime/cuda/ConvChoice.h"

#include "runtime/cuda/CudaCheck.h"
#include "runtime/plan/Half.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace hgp::cuda {

/// HGPC_CONV_ALGOS=gemm, a diagnostic (docs/testing.md): only GEMM-class algorithms, never FFT
/// or Winograd, whose float32 rounding is several times an implicit GEMM's.
bool gemmOnly() {
  static const bool v = [] {
    const char* e = std::getenv("HGPC_CONV_ALGOS");
    return e && std::string(e) == "gemm";
  }();
  return v;
}
bool isTransform(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool isTransform(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool isTransform(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

/// The channel sums and sums of squares the step's outputs 1 and 2 hold now, on the host.
Expected<std::vector<float>> readSums(CudaArgs& a) {
  int64_t c = a.out[1].numel();
  std::vector<float> v(size_t(2 * c));
  HGP_CUDA_TRY(cudaStreamSynchronize(a.stream));
  HGP_CUDA_TRY(cudaMemcpy(v.data(), a.out[1].data, size_t(c) * 4, cudaMemcpyDeviceToHost));
  HGP_CUDA_TRY(cudaMemcpy(v.data() + c, a.out[2].data, size_t(c) * 4, cudaMemcpyDeviceToHost));
  return v;
}

/// Whether a fused engine's sums agree with the unfused ones to what the rounding of y in 16
/// bits allows: each sum within 2e-3 of sqrt(count * sumsq), which bounds the sum of |y|.
bool sameSums(const std::vector<float>& want, const std::vector<float>& got, double count) {
  size_t c = want.size() / 2;
  for (size_t i = 0; i < c; ++i) {
    double scale = std::sqrt(count * std::max(0.0, double(want[c + i])));
    if (!(std::fabs(double(got[i]) - want[i]) <= 2e-3 * scale + 1e-6) ||
        !(std::fabs(double(got[c + i]) - want[c + i]) <= 2e-3 * want[c + i] + 1e-6))
      return false;
  }
  return true;
}

Expected<bool> canaryIntact(const void* base, size_t offset, unsigned char fill) {
  HGP_ASSIGN_OR_RETURN(std::vector<uint8_t> band,
                       deviceBytes(static_cast<const unsigned char*>(base) + offset, kCanaryBytes));
  return std::all_of(band.begin(), band.end(), [fill](uint8_t b) { return b == fill; });
}

Expected<std::vector<uint8_t>> deviceBytes(const void* p, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  if (bytes) HGP_CUDA_TRY(cudaMemcpy(v.data(), p, bytes, cudaMemcpyDeviceToHost));
  return v;
}

namespace {
/// The 16-bit value at element i of `v` as an integer that counts units in the last place
/// (sign-magnitude made two's complement, so that -0 and +0 are both 0).
int ordered16(const std::vector<uint8_t>& v, size_t i) {
  int h = v[2 * i] | (v[2 * i + 1] << 8);
  return (h & 0x8000) ? -(h & 0x7fff) : h;
}
} // namespace

bool sameResult(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got, DType dtype) {
  if (want.size() != got.size() || (dtype != DType::BF16 && dtype != DType::F16)) return false;
  for (size_t i = 0; i < want.size() / 2; ++i)
    if (std::abs(ordered16(want, i) - ordered16(got, i)) > 2) return false;
  return true;
}

std::string resultDistance(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got) {
  size_t n = std::min(want.size(), got.size()) / 2, differ = 0;
  int most = 0;
  for (size_t i = 0; i < n; ++i) {
    int d = std::abs(ordered16(want, i) - ordered16(got, i));
    differ += d != 0;
    most = std::max(most, d);
  }
  return "y differs from the unfused convolution's in " + std::to_string(differ) + " of " +
         std::to_string(n) + " elements, by at most " + std::to_string(most) +
         " units in the last place";
}

} // namespace hgp::cuda
