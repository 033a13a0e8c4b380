// DeviceLane.h - the CUDA backend's device-wide context and its per-stream lanes.
//
// A DeviceContext is what every stream of a run shares: the GPU, its properties, and the settings
// the executors read (determinism, TF32, the scratch limit, the tuning cache, the plan's
// generated kernels, the communicator). A Lane is one stream of the plan with what its steps use
// alone: the CUDA stream, a cuDNN and a cuBLAS handle bound to it, cuBLAS's workspace, the scratch
// workspace executors reserve (CudaContext::reserveWorkspace), and the event recorded when a run's
// work on it is done. Steps on different lanes never share scratch. A Lane owns all of these and
// frees them, after waiting for its stream, when it goes; so does DeviceMemory for one
// cudaMalloc. Nothing the backend allocates is freed by hand.
#pragma once

#include "runtime/cuda/CudaKernel.h"

#include <memory>

namespace hgp::cuda {

/// cuBLAS's workspace, per lane.
constexpr size_t kCublasWorkspace = size_t(32) << 20;

struct CudaFreeDeleter {
  void operator()(void* p) const { (void)cudaFree(p); }
};
/// Device memory from cudaMalloc, freed when its owner goes.
using DeviceMemory = std::unique_ptr<void, CudaFreeDeleter>;
/// cudaMalloc of `bytes`, checked.
Expected<DeviceMemory> allocateDevice(size_t bytes);

/// The device-wide context: the settings every lane's CudaContext carries.
struct DeviceContext {
  int device = 0;
  cudaDeviceProp props{};
  bool deterministic = false;
  bool verbose = false;
  bool cudnnFusion = true;
  bool allowTf32 = true; ///< From the plan's precision (planPrecision), set at load.
  size_t workspaceLimit = size_t(1) << 30;
  TuningCache* tuning = nullptr;
  const FusedKernels* kernels = nullptr;
  Communicator* comm = nullptr;

  /// Loads cuDNN and cuBLAS, checks that GPU `index` exists, makes it the thread's device and
  /// reads its properties. A Device error says why no GPU can be used.
  Status open(int index);
  /// Copies the settings into a lane's context; its stream, handles and workspace stay.
  void applyTo(CudaContext& c) const;
};

/// One stream of the plan and the resources only its steps use.
class Lane {
public:
  /// A new stream with its handles and cuBLAS workspace, configured from `device`.
  static Expected<std::unique_ptr<Lane>> create(const DeviceContext& device);
  /// Waits for the stream, then frees everything the lane owns.
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  /// What the lane's executors receive (CudaArgs::ctx).
  CudaContext ctx;
  /// Recorded at the end of a run on this lane; the main lane waits for it.
  cudaEvent_t joined = nullptr;
  /// Scratch plus cuBLAS workspace, for Backend::deviceMemoryBytes.
  size_t deviceBytes() const { return ctx.workspaceBytes + kCublasWorkspace; }

private:
  Lane() = default;
  void* cublasWorkspace_ = nullptr;
};

} // namespace hgp::cuda
