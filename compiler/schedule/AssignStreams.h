// AssignStreams.h - writes the stream schedule into the plan, so that the backends execute it.
//
// For every program of the plan, StreamSchedule picks each step's stream from a bounded pool and
// the fewest cross-stream events that keep every dependency (the bytes each step reads and
// writes, including the sharing the memory plan introduced). This pass stores the result in the
// steps themselves: PlanStep::stream, and PlanStep::waits for the events. The CUDA backend runs
// each stream of the plan on a stream of its own with its own library handles and scratch
// memory; the CPU backend ignores both fields, since plan order already satisfies them.
// With maxStreams 1 the plan is left on one stream with no waits.
#pragma once

#include "compiler/analysis/CostModel.h"
#include "runtime/profile/Records.h"

namespace hgp {

struct StreamAssignment {
  int programs = 0, maxStreamsUsed = 1;
  size_t events = 0;
};

/// Schedules every program of `plan` for `target` over at most `maxStreams` streams. With
/// `records` (hgpc compile --records), the programs they profiled are scheduled with their
/// measured step times instead of the estimates.
StreamAssignment assignStreams(Plan& plan, const Target& target, Precision precision,
                               int maxStreams, const CostCalibration& cal = {},
                               const ProfileRecords* records = nullptr);

} // namespace hgp
