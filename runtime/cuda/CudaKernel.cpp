#include "runtime/cuda/CudaKernel.h"

namespace hgp::cuda {

Status CudaContext::reserveWorkspace(size_t bytes) {
  if (bytes <= workspaceBytes) return Status::ok();
  if (capturing)
    return Status(ErrorCode::Internal, "a step asked for more workspace during graph capture");
  HGP_CUDA_TRY(cudaStreamSynchronize(stream));
  if (workspace) HGP_CUDA_TRY(cudaFree(workspace));
  workspace = nullptr;
  workspaceBytes = 0;
  cudaError_t e = cudaMalloc(&workspace, bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return makeError(ErrorCode::OutOfMemory, "cannot allocate %.1f MiB of scratch memory",
                     double(bytes) / (1 << 20));
  }
  workspaceBytes = bytes;
  ++workspaceGeneration;
  return Status::ok();
}

Status CudaArgs::fail(const std::string& msg) const {
  return Status(ErrorCode::Internal,
                std::string("cuda ") + opName(step.op) + " '" + step.loc + "': " + msg);
}

Dims contiguous(const Shape& s) {
  Dims d;
  d.rank = int(s.size());
  int64_t st = 1;
  for (int i = d.rank - 1; i >= 0; --i) {
    d.size[i] = s[size_t(i)];
    d.stride[i] = st;
    st *= s[size_t(i)];
  }
  return d;
}

Dims broadcastTo(const Shape& s, const Shape& out) {
  Dims own = contiguous(s);
  Dims d;
  d.rank = int(out.size());
  int off = d.rank - int(s.size());
  for (int i = 0; i < d.rank; ++i) {
    d.size[i] = out[size_t(i)];
    d.stride[i] = i < off || s[size_t(i - off)] == 1 ? 0 : own.stride[i - off];
  }
  return d;
}

Status checkLaunch(const CudaArgs& a, const char* kernel) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return Status::ok();
  return Status(ErrorCode::Device, std::string("launching ") + kernel + " for " + opName(a.step.op) +
                                       " '" + a.step.loc + "': " + cudaGetErrorString(e));
}

Status copyTensorAsync(const PlanTensor& t, void* dst, const void* src, cudaMemcpyKind kind,
                       cudaStream_t stream) {
  if (!t.pitched()) {
    HGP_CUDA_TRY(cudaMemcpyAsync(dst, src, size_t(t.bytes()), kind, stream));
    return Status::ok();
  }
  size_t e = size_t(dtypeSize(t.type.dtype)), dense = size_t(t.row) * e, pitched = size_t(t.pitch) * e;
  bool toHost = kind == cudaMemcpyDeviceToHost;
  HGP_CUDA_TRY(cudaMemcpy2DAsync(dst, toHost ? dense : pitched, src, toHost ? pitched : dense, dense,
                                 size_t(t.type.numElements() / t.row), kind, stream));
  return Status::ok();
}

} // namespace hgp::cuda
