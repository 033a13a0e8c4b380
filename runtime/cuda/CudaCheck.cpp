#include "runtime/cuda/CudaCheck.h"

#include <cstring>

namespace hgp::cuda {

std::string failedCall(const char* call, const char* file, int line) {
  std::string c(call);
  size_t paren = c.find('(');
  if (paren != std::string::npos) c = c.substr(0, paren) + "(...)";
  const char* base = std::strrchr(file, '/');
  return c + " failed at " + (base ? base + 1 : file) + ":" + std::to_string(line);
}

Status cudaError(cudaError_t e, const char* call, const char* file, int line) {
  return Status(ErrorCode::Device, failedCall(call, file, line) + ": " + cudaGetErrorName(e) + " (" +
                                       cudaGetErrorString(e) + ")");
}

Status cudnnError(cudnnStatus_t e, const char* call, const char* file, int line) {
  return Status(ErrorCode::Device, failedCall(call, file, line) + ": " + cudnnGetErrorString(e));
}

Status cublasError(cublasStatus_t e, const char* call, const char* file, int line) {
  return Status(ErrorCode::Device, failedCall(call, file, line) + ": " + cublasGetStatusString(e));
}

} // namespace hgp::cuda
