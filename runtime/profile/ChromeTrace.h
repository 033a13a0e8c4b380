// ChromeTrace.h - a profiled iteration as a Chrome trace (JSON), for Perfetto or chrome://tracing.
//
// `EXE --trace FILE.json` writes one replayed iteration of the train program: one process for the
// GPU, one track per stream the plan uses (plus one for the backend's input copies), every kernel,
// copy and memset a complete ("X") slice named "<Op> <source node>" (the op names the phase:
// Conv, ConvBwdData, ConvBwdFilter, ...) with the kernel name and launch shape as arguments, and
// every cross-stream event edge of the plan (PlanStep::waits) a flow arrow from the last record of
// the step waited for to the first record of the waiting step. It is built from the same records
// that --profile writes, so it can be made from a records file too, without a GPU.
#pragma once

#include "runtime/profile/Records.h"

#include <ostream>
#include <string>

namespace hgp {

/// Writes the records of `program` as Chrome trace JSON. `plan` (may be null) gives the waits
/// for the flow arrows.
void writeChromeTrace(const ProfileRecords& records, const Plan* plan, const std::string& program,
                      std::ostream& os);

/// The same into a file (ErrorCode::Io if it cannot be written).
Status writeChromeTraceFile(const ProfileRecords& records, const Plan* plan,
                            const std::string& program, const std::string& path);

} // namespace hgp
