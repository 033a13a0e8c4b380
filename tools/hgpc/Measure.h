// Measure.h - `hgpc explore --measure`: one configuration timed on the GPU through the
// generated executable, as bench/bench.py times hgpc.
//
// The configuration is compiled into a training executable in a scratch folder, which then
// trains `steps` steps on synthetic data with `--hold-batch` (the step without the input
// pipeline, as the cost model predicts it) and writes its metrics every `every` steps. The step
// time is the median over the metrics windows after the first two (the first run of a program
// times the cuDNN algorithms and the second captures the CUDA graph). A configuration that does
// not fit, does not compile, fails to run or runs past the timeout is reported with the reason,
// never fatal: the runner's out-of-memory exit (8) reads "out of memory".
#pragma once

#include "tools/hgpc/Report.h"

namespace hgp {

struct MeasureOptions {
  std::string runner;  ///< The prebuilt hgpc-runner to embed.
  std::string workDir; ///< Where executables and logs go (removed by the caller).
  int steps = 48;
  int every = 8;
  int timeoutSeconds = 300; ///< A run that takes longer is killed and reported.
};

/// Compiles `options` into an executable and times it on the GPU.
Measurement measureConfiguration(CompileOptions options, const MeasureOptions& m);

} // namespace hgp
