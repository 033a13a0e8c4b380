// CudaBackend.h - executes a plan on one GPU, each program as one replayed CUDA graph.
//
// Memory: the persistent and transient regions of the plan are one cudaMalloc each; the memory
// plan already decided every offset, so nothing is allocated while training. Before allocating,
// the backend checks that the plan fits in the free device memory.
//
// The backend is in parts, a file each:
//   DeviceLane.h     the device-wide context and the lanes: each stream of the plan is a lane (a
//                    CUDA stream with its own cuDNN and cuBLAS handles, cuBLAS workspace and
//                    scratch memory). Lane 0 is the main stream; the other lanes fork from it at
//                    the start of a run and join it at the end.
//   InputStaging.h   the two input slots, their pinned staging buffers and the prefetch.
//   GraphProgram.h   programs as launches on lanes, captured once per slot (behind a guard that
//                    always ends the capture) and replayed; runs never synchronize with the host.
//   ProfiledRun.cpp  --op-times and --profile/--trace.
//   CudaBackend.cpp  the Backend interface: loading a plan, running, reading and writing.
//
// --op-times: the first run after a program's graph exists is executed op by op instead, with an
// event after every launch, and each launch's time is appended to the file (the launches of a
// step run back to back, so the times are kernel times plus any gap the host leaves).
//
// --profile / --trace: the train program's first run on an already prepared slot (its third
// run) is captured afresh while CUPTI listens, replayed once and recorded (Profiler.h says how
// kernels are tied to steps); the records and the Chrome trace are written right after.
//
// This header is internal to runtime/cuda; the rest of the runtime creates the backend through
// createCudaBackend (runtime/Backend.h).
#pragma once

#include "runtime/Backend.h"
#include "runtime/cuda/DeviceLane.h"
#include "runtime/cuda/GraphProgram.h"
#include "runtime/cuda/InputStaging.h"
#include "runtime/cuda/Nccl.h"
#include "runtime/cuda/Profiler.h"
#include "runtime/cuda/TuningCache.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace hgp::cuda {

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(const BackendOptions& o) : opts_(o), tuning_(o.tuningCache) {}
  /// Waits for every stream; the members then free what they own.
  ~CudaBackend() override;

  /// Opens the device, creates the main lane and the staging streams, CUPTI for --profile and
  /// --trace, and the communicator for more than one rank.
  Status init();

  Status collectiveError() override { return comm_ ? comm_->asyncError() : Status::ok(); }
  void abortCollectives() override {
    if (comm_) comm_->abort();
  }
  const char* name() const override { return "cuda"; }
  Status load(const Plan& plan, const InitData& data) override;
  Status run(const std::string& name) override;
  Status read(int tensor, void* dst) override;
  Status write(int tensor, const void* src) override;
  bool supportsPrefetch() const override { return true; }
  Status prefetch(int tensor, const void* src) override;
  int64_t deviceMemoryBytes() const override;

private:
  // CudaBackend.cpp
  CudaContext& lane(int k) { return lanes_[size_t(k)]->ctx; }
  CudaContext& mainLane() { return lane(0); }
  /// Changes whenever any lane's scratch memory moves (a graph captured before points at freed
  /// memory then).
  uint64_t workspaceGeneration() const;
  void setCapturing(bool on);
  /// Waits for the main stream, or with `device` for everything on the GPU.
  Status sync(bool device = false);
  uint8_t* address(int i) const;
  /// Copies every tensor's initial value (InitialValues.h) to the device.
  Status initialize(const Plan& plan, const InitData& data);
  Expected<Program*> program(const std::string& name);
  CudaArgs argsFor(const PlanStep& s, std::unique_ptr<StepState>& state);
  /// Enqueues the program: the staged input copies, then every launch on its lane. With
  /// `marks`, records marks[0] first, marks[1] after the copies and marks[i + 2] after launch i,
  /// and runs the launches one after another whatever their lanes, so that the marks time them.
  /// With `serialize` the host waits for the device before every launch, so that algorithms
  /// timed by the first run do not share the GPU with other lanes' work.
  Status enqueue(Program& p, int slot, std::vector<cudaEvent_t>* marks = nullptr,
                 bool serialize = false);
  /// Captures the program on slot `slot` into its graph.
  Status capture(Program& p, int slot);

  // ProfiledRun.cpp
  /// Runs the program op by op with an event around every launch and appends the times to
  /// opts_.opTimes.
  Status timeLaunches(Program& p, int slot);
  /// Runs the program once while CUPTI records it (a fresh capture and one replay, or op by op
  /// with a correlation id per step), then writes --profile and --trace.
  Status profileRun(Program& p, int slot, bool eager);

  BackendOptions opts_;
  TuningCache tuning_;
  DeviceContext device_;
  std::unique_ptr<Communicator> comm_; ///< Data parallelism; null with one rank.
  /// Lane 0: the main stream; lanes 1, 2, ...: the plan's other streams.
  std::vector<std::unique_ptr<Lane>> lanes_;
  const Plan* plan_ = nullptr;
  std::unique_ptr<FusedKernels> fusedKernels_; ///< The plan's generated kernels (FusedOps.cpp).
  DeviceMemory persistent_, transient_;
  std::vector<DeviceTensor> views_;
  InputStaging staging_;
  int slot_ = 0;      ///< The slot of the next run.
  int inputSlot_ = 0; ///< The slot whose device inputs were last written or run on (for read()).
  std::map<std::string, Program> programs_;
  /// --profile / --trace: Pending until the train program's profiled run; EagerPending when the
  /// graph mapping failed and the next run is profiled op by op.
  enum class ProfileState { Off, Pending, EagerPending, Done } profile_ = ProfileState::Off;
  std::unique_ptr<ActivityProfiler> profiler_;
  bool profilingEager_ = false; ///< enqueue() brackets each launch with a step correlation id.
};

} // namespace hgp::cuda
