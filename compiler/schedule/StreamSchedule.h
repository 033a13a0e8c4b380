// StreamSchedule.h - DAG concurrency: which steps of a program may run at once, on which of a
// bounded pool of streams, and the fewest cross-stream events that keep every dependency.
//
// Dependencies come from the plan itself: a step depends on the last writer of the bytes it reads
// (read after write) and, because the memory plan lets tensors with disjoint lifetimes share
// bytes, on every earlier reader and writer of the bytes it overwrites (write after read and
// write after write). Those edges are reduced transitively; then each step continues the stream
// of a predecessor that is still that stream's last step when it can (no event needed), opens a
// new stream while the pool (`maxStreams`) has one, and otherwise joins the stream that frees
// first under the cost model. Collectives (AllReduce buckets) run on a stream of their own,
// outside the pool, so that communication overlaps the rest of the backward pass; no compute
// step is placed on it. An edge between streams becomes an event only if stream order and the
// events kept so far do not already imply it. Consecutive optimizer updates that the CUDA
// backend fuses into one multi-tensor launch stay on one stream: they all wait for the finite
// check over every gradient (a step with a non-finite gradient is skipped), so the update cannot
// overlap the backward pass and spreading it would only split the launch.
//
// AssignStreams.h writes the schedule into the plan, and the CUDA backend runs it.
#pragma once

#include "compiler/analysis/CostModel.h"

#include <vector>

namespace hgp {

struct StreamSchedule {
  int streams = 1;
  std::vector<int> stream; ///< Per step.
  int commStream = -1;     ///< The collectives' own stream, or -1 when the program has none.
  struct Event {
    int from, to; ///< Step `to` waits for step `from`, which runs on another stream.
  };
  std::vector<Event> events;
  /// Predicted time of the scheduled program when concurrent kernels do not slow each other
  /// down, and with the analyzer's sharing rule for kernels that overlap in time (the same as the
  /// first when the step times were measured with the streams running at once: the slowdown is
  /// already in them).
  double idealSeconds = 0, sharedSeconds = 0;
  size_t dependencyEdges = 0, reducedEdges = 0;
  /// Each step's direct dependencies after transitive reduction (reducedDependencies).
  std::vector<std::vector<int>> dependencies;
};

/// The direct dependencies of every step (indices of earlier steps), transitively reduced.
std::vector<std::vector<int>> reducedDependencies(const Plan& plan, const PlanProgram& program,
                                                  size_t* allEdges = nullptr);

StreamSchedule scheduleStreams(const Target& t, const Plan& plan, const PlanProgram& program,
                               const ProgramCost& cost, int maxStreams);

} // namespace hgp
