// CudaKernel.h - what a CUDA executor receives, and the helpers executors share.
//
// Each op in runtime/plan/OpList.def has `Status cuda::exec<Name>(CudaArgs&)` in
// runtime/cuda/<Family>Ops.{cu,cpp}. An executor enqueues its work on `a.stream` and returns; it
// never synchronizes, allocates device memory or copies to the host, because the backend
// captures whole programs into CUDA graphs. The first execution of a step happens eagerly,
// before capture: that is where an executor builds what it keeps between calls (cuDNN
// descriptors, the algorithms it timed, device-side pointer tables) in `a.state`, and asks for
// scratch memory with `a.ctx.reserveWorkspace`. Later executions (captured, then replayed) reuse
// them. Every CUDA, cuDNN and cuBLAS status is checked with the macros of CudaCheck.h.
//
// Semantics are the CPU executors' (runtime/cpu): the GPU op suite compares the two.
#pragma once

#include "runtime/cuda/CudaCheck.h"
#include "runtime/plan/Plan.h"

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

namespace hgp::cuda {

class TuningCache;
class Communicator;

/// A tensor on the device.
struct DeviceTensor {
  DType dtype = DType::F32;
  const Shape* shape = nullptr;
  void* data = nullptr;
  /// A pitched view (PlanTensor::row/pitch): rows of `row` elements, `pitch` apart; 0: dense.
  /// Only the operands the op table's HGP_PITCHED entries name can be (Plan::validate).
  int64_t row = 0, pitch = 0;

  bool pitched() const { return pitch != 0; }
  /// Elements from one channels-last pixel to the next: the pitch, or the channel count.
  int64_t pixelPitch() const { return pitched() ? pitch : dim(rank() - 1); }

  int64_t numel() const { return numElements(*shape); }
  int64_t rank() const { return int64_t(shape->size()); }
  int64_t dim(int64_t i) const { return (*shape)[size_t(i)]; }
  float* f32() const { return static_cast<float*>(data); }
  template <typename T> T* as() const { return static_cast<T*>(data); }
};

/// What an executor keeps between executions of its step.
struct StepState {
  virtual ~StepState() = default;
};

/// The plan's generated kernels (Plan::kernels), loaded from their cubins (FusedOps.cpp).
class FusedKernels {
public:
  FusedKernels() = default;
  FusedKernels(const FusedKernels&) = delete;
  FusedKernels& operator=(const FusedKernels&) = delete;
  ~FusedKernels();
  /// Loads every kernel of `plan` with cudaLibraryLoadData; fails, naming both, when a cubin's
  /// architecture is not the device's (`props`).
  Status load(const Plan& plan, const cudaDeviceProp& props);
  /// The kernel named `name`, or nullptr.
  cudaKernel_t find(const std::string& name) const;

private:
  std::vector<std::pair<std::string, cudaKernel_t>> kernels_;
  std::vector<cudaLibrary_t> libraries_;
};

/// Device-wide resources shared by all executors.
struct CudaContext {
  int device = 0;
  cudaDeviceProp props{};
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  /// Only deterministic algorithms (cuDNN's `determinism` flag, no atomics in our kernels).
  bool deterministic = false;
  /// Say on stderr what was chosen (--verbose).
  bool verbose = false;
  /// Convolutions with an epilogue may run as one cuDNN fused graph (BackendOptions).
  bool cudnnFusion = true;
  /// Tensor cores may round fp32 inputs to TF32 in convolutions and matrix products.
  bool allowTf32 = true;
  /// The most scratch memory one step may use, in bytes (the algorithm search respects it).
  size_t workspaceLimit = size_t(1) << 30;
  TuningCache* tuning = nullptr;
  /// The plan's generated kernels (FusedElementwise steps); null before a plan is loaded.
  const FusedKernels* kernels = nullptr;
  /// The data-parallel communicator (Nccl.h); null when the run has one rank.
  Communicator* comm = nullptr;

  /// The shared scratch buffer; grows only outside capture (during a program's eager first run).
  void* workspace = nullptr;
  size_t workspaceBytes = 0;
  /// Counts reallocations of the workspace. A graph captured under an older generation points at
  /// freed memory, so the backend re-captures it.
  uint64_t workspaceGeneration = 0;
  /// Makes the workspace at least `bytes` large. Fails during capture.
  Status reserveWorkspace(size_t bytes);
  bool capturing = false;
};

struct CudaArgs {
  const PlanStep& step;
  std::vector<DeviceTensor> in, out;
  CudaContext& ctx;
  cudaStream_t stream;
  /// Null until the executor's first call sets it.
  std::unique_ptr<StepState>& state;

  const AttrMap& attrs() const { return step.attrs; }
  /// An Internal error naming the step.
  Status fail(const std::string& msg) const;
  /// The state, created on the first call.
  template <typename S> S& stateAs() {
    if (!state) state = std::make_unique<S>();
    return static_cast<S&>(*state);
  }
};

#define HGP_OP(Name, ...) Status exec##Name(CudaArgs& a);
#include "runtime/plan/OpList.def"

// ---- Helpers for kernels -------------------------------------------------------------------

/// Threads per block for elementwise kernels.
constexpr int kBlock = 256;
/// Blocks for a grid-stride loop over n elements.
inline unsigned gridFor(int64_t n, int maxBlocks = 65535 * 8) {
  int64_t b = (n + kBlock - 1) / kBlock;
  return unsigned(b < 1 ? 1 : b > maxBlocks ? maxBlocks : b);
}

/// Up to 8 dims of sizes and strides, passed to kernels by value.
constexpr int kMaxDims = 8;
struct Dims {
  int rank = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride[kMaxDims] = {};
};
/// Row-major strides of a shape.
Dims contiguous(const Shape& s);
/// Strides for reading `s` broadcast to `out` (0 on broadcast dims), left-padded to out's rank.
Dims broadcastTo(const Shape& s, const Shape& out);

/// Enqueues a copy of plan tensor `t` between the device and dense host memory (`kind`), row by
/// row when `t` is a pitched view (the device side holds its rows `pitch` elements apart).
Status copyTensorAsync(const PlanTensor& t, void* dst, const void* src, cudaMemcpyKind kind,
                       cudaStream_t stream);

/// Checks the launch that was just enqueued (cudaGetLastError), naming the step.
Status checkLaunch(const CudaArgs& a, const char* kernel);

} // namespace hgp::cuda
