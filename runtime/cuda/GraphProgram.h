// GraphProgram.h - a plan program as the CUDA backend runs it: launches on lanes, replayed as
// CUDA graphs.
//
// A program's steps become launches: one step, or a run of consecutive optimizer steps (OpList.def
// Optimizer) with the same scalar operands, which share one multi-tensor launch. Each launch runs
// on its step's lane (PlanStep::stream); a launch that waits for launches on other lanes
// (PlanStep::waits) waits for the events recorded after them. In a capture these become the
// graph's edges, so the replayed graph has exactly the plan's dependencies.
//
// The first run of a program on each input slot executes its launches eagerly; executors build
// their descriptors then and, the very first time, time algorithms (TuningCache). The next run on
// that slot captures the whole program into a CUDA graph; every later run replays it. Capture
// sits behind a CaptureGuard, which always ends the capture it began, also when enqueueing fails
// halfway, so that no stream is left capturing. A Program owns its graphs and events.
#pragma once

#include "runtime/cuda/InputStaging.h"

#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace hgp::cuda {

/// One unit of work: a step, or a group of optimizer steps (which share a lane). A launch that
/// reads an input keeps a state per slot, since the slots' inputs live at different addresses
/// and executors may keep device tables of their operands' addresses; every other launch shares
/// one state.
struct Launch {
  std::vector<int> steps;
  int lane = 0;
  std::vector<int> waits;     ///< Launches on other lanes whose events this one waits for.
  cudaEvent_t done = nullptr; ///< Recorded after it, when a launch on another lane waits for it.
  bool perSlot = false;
  std::unique_ptr<StepState> states[kSlots];
  std::unique_ptr<StepState>& state(int slot) { return states[perSlot ? slot : 0]; }
};

struct Program {
  Program() = default;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  /// Destroys the graphs and the launches' events.
  ~Program();

  const PlanProgram* source = nullptr;
  std::vector<Launch> launches;
  std::vector<int> inputs; ///< Input-role tensors (copied from staging at its start).
  int runs = 0;
  bool prepared[kSlots] = {false, false}; ///< Whether the slot's first (eager) run happened.
  bool timed = false;                     ///< --op-times has been written for this program.
  cudaGraphExec_t graphs[kSlots] = {nullptr, nullptr};
  uint64_t graphGeneration[kSlots] = {0, 0}; ///< The workspace generation each graph saw.
  std::map<cudaGraphNode_t, int> nodeStep;   ///< For naming the step behind a failing graph node.
  std::vector<bool> usesLane;                ///< Which lanes the program's launches run on.

  /// Destroys slot `slot`'s graph, so that the next run captures it afresh.
  Status dropGraph(int slot);
  /// "Conv 'conv1'": the op and place of step `step`, for messages.
  std::string describeStep(int step) const;
};

/// Fills `p` from program `src` of `plan`, whose steps use `lanes` lanes: the launches, their
/// waits (with an event on each launch waited for) and the inputs.
Status buildProgram(Program& p, const Plan& plan, const PlanProgram& src, size_t lanes);

/// Called after `step` was enqueued on `stream` during a capture: the stream's capture leaves and
/// all their ancestors that no earlier step owns are this step's nodes (Program::nodeStep).
void noteCapturedNodes(Program& p, int step, cudaStream_t stream);

/// Begins a thread-local capture on a stream and always ends it: end() hands over the graph;
/// without end() (an error while enqueueing) the destructor ends the capture, destroys what was
/// captured and clears the error it leaves. `mark(true)` is called when the capture begins and
/// `mark(false)` when it ends (the executors' CudaContext::capturing).
class CaptureGuard {
public:
  CaptureGuard(cudaStream_t stream, std::function<void(bool)> mark);
  ~CaptureGuard();
  CaptureGuard(const CaptureGuard&) = delete;
  CaptureGuard& operator=(const CaptureGuard&) = delete;

  /// Whether the capture began; the error when it did not.
  const Status& began() const { return began_; }
  /// Ends the capture and returns the graph (the caller destroys it).
  Expected<cudaGraph_t> end();

private:
  cudaStream_t stream_;
  std::function<void(bool)> mark_;
  Status began_;
  bool open_ = false;
};

/// Instantiates `graph` as slot `slot`'s graph of `p`; the error names the step of the node that
/// failed. Destroys `graph` in every case.
Status instantiateGraph(Program& p, int slot, cudaGraph_t graph);

} // namespace hgp::cuda
