// PlanReport.h - `hgpc plan`: the scheduled plan as a stable text report.
//
// For every step of the train program: its op (which names the phase: Conv, ConvBwdData,
// ConvBwdFilter, ...), stream (StreamSchedule.h), algorithm ("auto": chosen by timing on the
// GPU at the first run), the step's sub-batch width and its run's micro-batch pipeline depth as
// BatchSlicing.h applied them (1 and 1 for a step left whole), the estimated launch shape and
// occupancy, the predicted time and the memory offset of its result; then the streams,
// events, peak memory, the predicted iteration time and the critical path. Golden copies live in
// tests/plans/, so that a change to the analyses shows up in review. With profiling records
// (`--records`), measured times and launch shapes replace the estimates; the header says so and
// every measured row ends in "measured".
#pragma once

#include "compiler/analysis/CostModel.h"
#include "compiler/schedule/BatchSlicing.h"

#include <ostream>

namespace hgp {

/// The scheduled train (or forward) program as a Graphviz digraph (`hgpc plan --emit dot`): a
/// cluster per stream, steps labelled with op, source and predicted time, the transitively
/// reduced dependencies as edges, and the events among them drawn bold.
void printPlanDot(const Plan& plan, const Target& target, Precision precision,
                  int maxStreams, const CostCalibration& cal, std::ostream& os,
                  const ProfileRecords* records = nullptr);

/// Schedules the train (or forward) program over at most `maxStreams` streams and prints it;
/// `slicing` (from sliceBatches) fills the width and depth columns.
void printPlanReport(const Plan& plan, const Target& target, Precision precision,
                     int maxStreams, const CostCalibration& cal, std::ostream& os,
                     const ProfileRecords* records = nullptr, const SliceResult* slicing = nullptr);

} // namespace hgp
