#include "runtime/cuda/DeviceLane.h"

#include "runtime/cuda/CudaLibraries.h"

namespace hgp::cuda {

Expected<DeviceMemory> allocateDevice(size_t bytes) {
  void* p = nullptr;
  HGP_CUDA_TRY(cudaMalloc(&p, bytes));
  return DeviceMemory(p);
}

Status DeviceContext::open(int index) {
  HGP_TRY(loadCudaLibraries());
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Status(ErrorCode::Device, std::string("no usable GPU: ") + cudaGetErrorString(e));
  }
  if (index < 0 || index >= count)
    return Status(ErrorCode::Device,
                  "no GPU " + std::to_string(index) + " (" + std::to_string(count) + " found)");
  device = index;
  HGP_CUDA_TRY(cudaSetDevice(device));
  HGP_CUDA_TRY(cudaGetDeviceProperties(&props, device));
  return Status::ok();
}

void DeviceContext::applyTo(CudaContext& c) const {
  c.device = device;
  c.props = props;
  c.deterministic = deterministic;
  c.verbose = verbose;
  c.cudnnFusion = cudnnFusion;
  c.allowTf32 = allowTf32;
  c.workspaceLimit = workspaceLimit;
  c.tuning = tuning;
  c.kernels = kernels;
  c.comm = comm;
}

Expected<std::unique_ptr<Lane>> Lane::create(const DeviceContext& device) {
  std::unique_ptr<Lane> l(new Lane());
  CudaContext& c = l->ctx;
  device.applyTo(c);
  // On any failure `l` goes out of scope and frees what was made so far.
  HGP_CUDA_TRY(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  HGP_CUDNN_TRY(cudnnCreate(&c.cudnn));
  HGP_CUDNN_TRY(cudnnSetStream(c.cudnn, c.stream));
  HGP_CUBLAS_TRY(cublasCreate_v2(&c.cublas));
  HGP_CUBLAS_TRY(cublasSetStream_v2(c.cublas, c.stream));
  HGP_CUDA_TRY(cudaMalloc(&l->cublasWorkspace_, kCublasWorkspace));
  HGP_CUBLAS_TRY(cublasSetWorkspace_v2(c.cublas, l->cublasWorkspace_, kCublasWorkspace));
  HGP_CUDA_TRY(cudaEventCreateWithFlags(&l->joined, cudaEventDisableTiming));
  return l;
}

Lane::~Lane() {
  // Statuses are dropped on purpose: a destructor has no one to report to, and every step below
  // must still run to free the rest.
  if (ctx.stream) (void)cudaStreamSynchronize(ctx.stream);
  if (joined) (void)cudaEventDestroy(joined);
  if (ctx.workspace) (void)cudaFree(ctx.workspace);
  if (cublasWorkspace_) (void)cudaFree(cublasWorkspace_);
  if (ctx.cublas) (void)cublasDestroy_v2(ctx.cublas);
  if (ctx.cudnn) (void)cudnnDestroy(ctx.cudnn);
  if (ctx.stream) (void)cudaStreamDestroy(ctx.stream);
}

} // namespace hgp::cuda
