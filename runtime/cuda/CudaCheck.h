// CudaCheck.h - every CUDA, cuDNN and cuBLAS status becomes a Status with context.
//
//   HGP_CUDA_TRY(cudaMalloc(&p, n));
//   HGP_CUDNN_TRY(cudnnConvolutionForward(...));
//   HGP_CUBLAS_TRY(cublasGemmStridedBatchedEx(...));
//
// On failure the enclosing function returns ErrorCode::Device with the call as written, the
// file and line, and the library's own error string, e.g.
// "cudnnConvolutionForward(...) failed at ConvOps.cpp:88: CUDNN_STATUS_BAD_PARAM".
#pragma once

#include "runtime/cuda/CudaLibraries.h"
#include "runtime/support/Status.h"

#include <cuda_runtime.h>

#include <string>

namespace hgp::cuda {

/// "cudnnConvolutionForward(...) failed at ConvOps.cpp:88": the call as written (arguments
/// elided) and where it was made; the other libraries' checks (NCCL) use it too.
std::string failedCall(const char* call, const char* file, int line);

Status cudaError(cudaError_t e, const char* call, const char* file, int line);
Status cudnnError(cudnnStatus_t e, const char* call, const char* file, int line);
Status cublasError(cublasStatus_t e, const char* call, const char* file, int line);

} // namespace hgp::cuda

#define HGP_CUDA_TRY(call)                                                                         \
  do {                                                                                             \
    cudaError_t _hgp_e = (call);                                                                   \
    if (_hgp_e != cudaSuccess) return ::hgp::cuda::cudaError(_hgp_e, #call, __FILE__, __LINE__);   \
  } while (0)

#define HGP_CUDNN_TRY(call)                                                                        \
  do {                                                                                             \
    cudnnStatus_t _hgp_e = (call);                                                                 \
    if (_hgp_e != CUDNN_STATUS_SUCCESS)                                                            \
      return ::hgp::cuda::cudnnError(_hgp_e, #call, __FILE__, __LINE__);                           \
  } while (0)

#define HGP_CUBLAS_TRY(call)                                                                       \
  do {                                                                                             \
    cublasStatus_t _hgp_e = (call);                                                                \
    if (_hgp_e != CUBLAS_STATUS_SUCCESS)                                                           \
      return ::hgp::cuda::cublasError(_hgp_e, #call, __FILE__, __LINE__);                          \
  } while (0)
