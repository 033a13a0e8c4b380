// Profiler.h - CUPTI activity records of one training iteration, tied to plan steps.
//
// `EXE --profile FILE` and `--trace FILE.json` make the CUDA backend record the kernels, copies and
// memsets of one run of the train program through CUPTI's activity API (concurrent-kernel, memcpy
// and memset records, delivered through buffer callbacks and flushed at the end). CUPTI is loaded
// with dlopen only then, so an executable that is not asked to profile never needs it.
//
// Tying a kernel to its plan step ("graph" mapping, the normal case): the backend captures the
// program into a fresh CUDA graph while the profiler listens, remembering which step each captured
// node came from (CudaBackend's nodeStep). Kernel records of a graph launch carry `graphNodeId`,
// the CUPTI id of the node of the *instantiated* graph, whose nodes are clones of the captured
// ones; the resource callback CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, which fires during
// cudaGraphInstantiate, gives each clone with its original, so cuptiGetGraphNodeId(clone) ->
// step. The ids of the captured nodes themselves are registered too (noteCapturedNodes), in case
// a CUPTI version reports those. If the replay yields kernels none of whose node ids are known,
// the next run of the program is profiled op by op instead ("eager" mapping): each launch runs
// with cuptiActivityPushExternalCorrelationId(step), and external-correlation records tie the
// kernels' correlation ids to steps. No run is repeated for profiling: the profiled run is a
// normal training step.
#pragma once

#include "runtime/profile/Records.h"

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <vector>

namespace hgp::cuda {

/// One activity as CUPTI reported it, before it is named after its step.
struct RawActivity {
  ActivityKind kind = ActivityKind::Kernel;
  uint64_t start = 0, end = 0; ///< ns, CUPTI's clock.
  /// The plan step (index into the program) that launched it; -1 for a graph node no step owns;
  /// -2 when it could not be tied to the profiled run at all (dropped).
  int step = -2;
  std::string name; ///< Kernel name (demangled where possible) or copy kind.
  int grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  int regs = 0;
  int64_t staticSmem = 0, dynamicSmem = 0, bytes = 0;
};

class ActivityProfiler {
public:
  /// Loads CUPTI (libcupti.so.13, libcupti.so, then under $CUDA_HOME/extras/CUPTI/lib64 and
  /// /usr/local/cuda); ErrorCode::Device naming every place tried if it is absent.
  static Expected<std::unique_ptr<ActivityProfiler>> open();
  ~ActivityProfiler();

  /// Starts recording. `eager`: tie records to steps through correlation ids (pushStep/popStep
  /// around each launch) instead of graph node ids. Call stop() also when this fails.
  Status start(bool eager);
  /// Registers captured nodes (before the graph is instantiated) with the steps they belong to;
  /// their clones in the instantiated graph are tied to the same steps.
  void noteCapturedNodes(const std::map<cudaGraphNode_t, int>& nodeStep);
  /// Eager mapping: the launches between pushStep and popStep belong to `step`.
  Status pushStep(int step);
  Status popStep();
  /// Waits for the device, flushes CUPTI's buffers and stops recording. Returns the records that
  /// belong to the profiled run, in start order.
  Expected<std::vector<RawActivity>> stop();
  /// After stop(): whether kernels were seen whose graph node was never registered (the graph
  /// mapping failed, so the caller should profile a run eagerly).
  bool unmappedKernels() const { return unmapped_ > 0 && mapped_ == 0; }
  /// Between start() and stop().
  bool running() const { return running_; }

private:
  ActivityProfiler() = default;
  bool eager_ = false, running_ = false;
  int unmapped_ = 0, mapped_ = 0;
  void* subscriber_ = nullptr;
};

/// Names raw activities after the steps of `program` and lays them out as records (times from
/// the first record's start, in microseconds). launchSteps[s]: how many steps the launch that
/// starts at step s runs (an optimizer group's multi-tensor launch covers several).
ProfileRecords toRecords(const std::vector<RawActivity>& raw, const Plan& plan,
                         const PlanProgram& program, const std::vector<int>& launchSteps,
                         const std::string& gpu, int sms, const std::string& mapping);

} // namespace hgp::cuda
