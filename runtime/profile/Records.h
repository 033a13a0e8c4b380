// Records.h - what one profiled training iteration measured, kernel by kernel.
//
// `EXE --profile FILE` replays the train program once under CUPTI and writes every kernel, copy
// and memset of that replay with the plan step it belongs to, its real launch shape and its time
// (runtime/cuda/Profiler.h). `hgpc plan/compile --records FILE` reads the file back and lets the
// cost model use these measurements in place of its estimates, so a plan made on a machine
// without a GPU can be refined from one profiling run on the target. The runtime owns the format
// (as it owns the plan's); docs/profiling.md describes it line by line. printRecords and
// parseRecords round-trip: parseRecords(printRecords(r)) prints back to the same text.
#pragma once

#include "runtime/plan/Plan.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hgp {

enum class ActivityKind : uint8_t { Kernel, Memcpy, Memset };

/// One kernel (or copy, or memset) of the profiled iteration.
struct ActivityRecord {
  ActivityKind kind = ActivityKind::Kernel;
  std::string program;
  /// The plan step that launched it, or -1 for work no step owns (the input copies the backend
  /// forks inside every run).
  int step = -1;
  /// Steps step .. step + covers - 1 share this launch (the optimizer updates that run as one
  /// multi-tensor launch).
  int covers = 1;
  std::string op;  ///< The step's op ("-" when step is -1): names the phase (ConvBwdData, ...).
  std::string loc; ///< The step's source node.
  int stream = 0;  ///< The plan stream of the step; -1 for the backend's input-copy stream.
  std::string name; ///< Kernel: its (mangled or demangled) name. Memcpy: HtoD, DtoD, ...
  int grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  int regs = 0;
  int64_t staticSmem = 0, dynamicSmem = 0; ///< Bytes per block.
  int64_t bytes = 0;                       ///< Memcpy and memset: bytes moved or set.
  double startUs = 0; ///< From the start of the iteration's first record.
  double durUs = 0;

  int64_t blocks() const { return int64_t(grid[0]) * grid[1] * grid[2]; }
  int threads() const { return block[0] * block[1] * block[2]; }
  bool operator==(const ActivityRecord&) const = default;
};

/// A profiled program: its step count (checked against the plan that reads the records) and the
/// time from its first record's start to its last record's end.
struct ProfiledProgram {
  std::string name;
  int steps = 0;
  double spanUs = 0;
  bool operator==(const ProfiledProgram&) const = default;
};

struct ProfileRecords {
  static constexpr int kVersion = 1;
  std::string model;
  int64_t batch = 0;
  std::string gpu;
  int sms = 0;
  /// How records were tied to steps: "graph" (the replayed graph's nodes) or "eager" (an op by
  /// op run with a correlation id per step).
  std::string mapping = "graph";
  std::vector<ProfiledProgram> programs;
  std::vector<ActivityRecord> records; ///< In start order.

  const ProfiledProgram* findProgram(const std::string& name) const;
  bool operator==(const ProfileRecords&) const = default;
};

std::string printRecords(const ProfileRecords& r);
/// Errors (ErrorCode::BadData) carry the source name, line and column.
Expected<ProfileRecords> parseRecords(std::string_view text, const std::string& sourceName = "<records>");
/// Reads and parses a records file (ErrorCode::Io if it cannot be read).
Expected<ProfileRecords> readRecordsFile(const std::string& path);

/// Checks that the records were made from this plan: same model name and batch, and for every
/// profiled program that the plan has, the same step count and, step by step, the same op.
/// Errors are ErrorCode::BadData and say what differs.
Status checkRecordsMatch(const ProfileRecords& r, const Plan& plan);

/// What the records say about each step of one program.
struct StepMeasurement {
  int kernels = 0;          ///< Records attributed to it (a shared launch counts for each step).
  double launches = 0;      ///< The same, with a launch shared by n steps counting 1/n.
  double busySeconds = 0;   ///< Sum of its records' durations (shared launches split evenly).
  /// The launch shape of its longest kernel (blocks = 0 when it ran none).
  int64_t blocks = 0;
  int threads = 0, regs = 0;
  int64_t smem = 0;
};

struct ProgramMeasurement {
  bool present = false;                 ///< Whether the records profiled this program.
  std::vector<StepMeasurement> steps;   ///< Parallel to the program's steps.
  /// The median idle time between consecutive records on one stream: what the replayed graph
  /// spends between two kernels (launch latency), in seconds.
  double gapSeconds = 0;
  int gapSamples = 0;
  double spanSeconds = 0;               ///< The profiled iteration, first start to last end.
  /// Plan streams its records ran on. With more than one, every duration already includes the
  /// slowdown of sharing the GPU with the other streams' kernels.
  int streams = 0;
};

/// Groups the records of `program` by step. Records of steps outside the program are ignored
/// (checkRecordsMatch rejects them first).
ProgramMeasurement measureProgram(const ProfileRecords& r, const PlanProgram& program);

} // namespace hgp
