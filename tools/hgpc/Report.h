// Report.h - one training configuration (model, batch, precision, target) as the analyses see
// it, for `hgpc compare` and `hgpc explore`.
//
// A configuration is compiled in-process exactly as `hgpc plan` compiles it (no machine code),
// and its train program is costed (CostModel.h) and scheduled over the streams
// (StreamSchedule.h). The report keeps what a person choosing a model or a configuration asks
// about: parameters, FLOPs per step (StepWork.h, the one FLOP model), the plan's peak device
// memory (the persistent and transient regions of the static memory plan), the predicted step
// time on the stream schedule and the images per second it gives, whether it fits the memory
// limit, and where the time goes: per op family, per phase (forward, backward, optimizer) and
// per stage and layer of the model.
//
// The memory check: a configuration fits when its arena plus kRuntimeReserveBytes (the CUDA
// context, the cuBLAS and cuDNN workspaces and the runner's margin) is at most the limit: the
// target's memory by default, `--memory-limit`, or with `--measure` the device's free memory.
//
// Renderers: a fixed-width text table (ReportText.cpp), JSON (ReportJson.cpp), and one
// self-contained HTML page with inline SVG charts (ReportHtml.cpp): no script, no style sheet or
// font from elsewhere, so that it opens offline and can be mailed.
#pragma once

#include "tools/hgpc/Compile.h"

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace hgp {

/// Device memory the runner needs beyond the plan's arena: the CUDA context and the libraries'
/// loaded kernels (about 0.5 GiB on an H200), the 32 MiB cuBLAS workspace, at least 64 MiB of
/// cuDNN workspace and the 64 MiB the CUDA backend keeps free (runtime/cuda/CudaBackend.cpp,
/// load), rounded up to 1 GiB so that a plan said to fit does fit.
constexpr int64_t kRuntimeReserveBytes = int64_t(1) << 30;

/// Time and bytes of a set of steps: an op family, a phase, a stage or a layer.
struct ReportGroup {
  std::string name;
  double seconds = 0; ///< The sum of the steps' predicted times (on one stream).
  double flops = 0;
  double resultBytes = 0; ///< Bytes of the results the steps write.
  int steps = 0;
};

/// A measurement of a configuration on the GPU (`hgpc explore --measure`).
struct Measurement {
  bool ran = false;          ///< A step time was measured.
  double stepSeconds = 0;    ///< The median over the steady-state windows.
  std::string failure;       ///< Why not: "out of memory", the runner's message, ...
};

struct ConfigReport {
  std::string model; ///< The file's stem.
  std::string path;
  int64_t batch = 0;
  std::string precision, target;
  std::string error; ///< Non-empty: the configuration did not compile; the rest is empty.
  int64_t parameters = 0;
  double flops = 0;      ///< Per training step.
  double bytesMoved = 0; ///< The cost model's reads and writes per step.
  int64_t persistentBytes = 0, transientBytes = 0;
  int64_t memoryLimitBytes = 0;
  bool fits = false;
  double stepSeconds = 0;   ///< Predicted, on the stream schedule.
  double serialSeconds = 0; ///< Predicted, on one stream.
  int streams = 1;
  std::vector<ReportGroup> families, phases, stages, layers;
  std::optional<Measurement> measured;

  int64_t arenaBytes() const { return persistentBytes + transientBytes; }
  int64_t neededBytes() const { return arenaBytes() + kRuntimeReserveBytes; }
  double imagesPerSecond() const { return stepSeconds > 0 ? double(batch) / stepSeconds : 0; }
  /// Measured: the signed error of the prediction relative to the measurement.
  std::optional<double> predictionError() const;
};

/// Compiles `options` (model, batch, precision, training options) for `target` and reports it;
/// `memoryLimitBytes` decides `fits`. A configuration that does not compile is returned with
/// `error` set, so that one bad configuration does not end a sweep; the error is returned only
/// for a failure that every configuration would share (an unreadable model, a bad flag).
Expected<ConfigReport> reportConfiguration(CompileOptions options, const Target& target,
                                           int64_t memoryLimitBytes);

/// `hgpc explore`'s search: the largest batch (a multiple of 8 above 8, else a power of two)
/// whose plan fits `memoryLimitBytes`, trying at most up to `maxBatch`; 0 when batch 1 does not
/// fit. `known` holds reports already made (searched batches are added to it).
Expected<int64_t> largestFittingBatch(const CompileOptions& options, const Target& target,
                                      int64_t memoryLimitBytes, std::vector<ConfigReport>& known,
                                      int64_t maxBatch = 1 << 16);

/// The side-by-side table of `hgpc compare`: totals per model, then time per op family, per
/// phase, and which model is cheaper where.
void printCompareTable(const std::vector<ConfigReport>& models, std::ostream& os);

/// `hgpc explore`'s table: one row per configuration, the best that fits and the largest batch
/// that fits per precision marked; with measurements, measured beside predicted and the error.
void printExploreTable(const std::vector<ConfigReport>& configs,
                       const std::vector<std::pair<std::string, int64_t>>& largestBatch,
                       std::ostream& os);

/// The mean absolute prediction error over the measured configurations, if any ran.
std::optional<double> meanAbsoluteError(const std::vector<ConfigReport>& configs);

/// The index of the fastest configuration (images/s) that fits, or -1.
int bestFitting(const std::vector<ConfigReport>& configs);

/// JSON for scripts: {"command": ..., "configurations": [...], ...} with every field above.
void writeReportJson(const std::string& command, const std::vector<ConfigReport>& configs,
                     const std::vector<std::pair<std::string, int64_t>>& largestBatch,
                     std::ostream& os);

/// The self-contained HTML page of `hgpc compare`: the table, then per model the predicted
/// time and the result bytes of each layer as inline SVG bar charts, and time per op family
/// side by side.
void writeCompareHtml(const std::vector<ConfigReport>& models, std::ostream& os);

/// The self-contained HTML page of `hgpc explore`: images/s against batch, one line per
/// precision, with the memory limit drawn (the largest fitting batch of each precision), peak
/// memory against batch with the limit, and the table.
void writeExploreHtml(const std::vector<ConfigReport>& configs,
                      const std::vector<std::pair<std::string, int64_t>>& largestBatch,
                      std::ostream& os);

/// Human units: "12.3 M", "4.56 G" (powers of 1000), and MiB / GiB from bytes.
std::string humanCount(double v);
std::string humanBytes(double bytes);

} // namespace hgp
