// CostModel.h - predicted time of every step of a program, of the whole iteration, and the
// critical path.
//
// Each step's time is a roofline over the target: its launch cost inside a graph, plus the larger
// of its arithmetic time (FLOPs over the math mode's peak, at the efficiency the library kernels
// reach) and its memory time (bytes over the bandwidth the kernels reach), stretched by wave
// quantization (a kernel of 1.2 waves takes about as long as one of 2). On one stream the
// iteration takes the sum of its steps; the critical path, the longest dependency chain through
// the program, is what any number of streams would still take.
//
// With measurements from a profiling run (`--records`, runtime/profile/Records.h), a step's time
// is what it measured instead: the sum of its kernels' durations plus, per kernel, the median
// idle gap between consecutive kernels of one stream in that run (what the replayed graph spends
// between kernels; the estimate's launchSeconds plays that role). Its launch shape is that of
// its longest kernel.
//
// A collective (AllReduce, one bucket of gradients) costs what a ring all-reduce over the target's
// GPU-to-GPU links takes: 2(N-1) latency hops plus 2(N-1)/N of the bucket's bytes over the link
// bandwidth, at the fraction of it NCCL reaches. It uses a few SMs, so the stream schedule lets
// it overlap compute at no cost to the kernels it runs beside.
#pragma once

#include "compiler/analysis/KernelModel.h"
#include "runtime/profile/Records.h"

#include <string>
#include <vector>

namespace hgp {

/// The fractions of the peaks that the kernels reach, and a fixed cost per convolution or
/// matrix-product kernel (setup, split-K reduction, tails) beyond the launch. The defaults were
/// fitted by grid search (`hgpc plan --calibration`) to the ten benchmark cases measured on the
/// H200 (docs/benchmarks-history.md; bench/prediction.py): mean absolute error 9.4% on those
/// cases, and 15.9% when each case is predicted from a fit to the other nine, which is the figure
/// to expect on new models.
struct CostCalibration {
  double computeEfficiency = 0.40;
  double memoryEfficiency = 0.60;
  double gemmFixedSeconds = 4e-6;
  /// Ring all-reduce: the fraction of the link bandwidth reached, and the latency of one hop.
  /// Fitted to the gradient all-reduces traced on 2 H200s while they overlap the backward pass
  /// (docs/distributed.md, scaling benchmark): ResNet-50 b128 102 MB in 0.92 ms, ResNet-18 32x32
  /// b128 45 MB in 0.33 ms, about 28% of NVLink's 450 GB/s. nccl-tests on an idle GPU reach far
  /// more; during backward NCCL's few SMs compete with the compute kernels. (It was 0.80 before
  /// that measurement, which predicted 0.32 and 0.14 ms.)
  double linkEfficiency = 0.28;
  double hopSeconds = 3e-6;
};

/// Predicted time of a ring all-reduce of `bytes` over `ranks` GPUs of target `t`.
double allReduceSeconds(const Target& t, double bytes, int64_t ranks, const CostCalibration& cal = {});

struct StepCost {
  LaunchShape launch;
  double flops = 0, bytes = 0;
  double seconds = 0;
  double waves = 0;
  int blocksPerSm = 0;
  bool onCriticalPath = false;
  bool measured = false; ///< Time and launch shape come from profiling records.
  int kernels = 0;       ///< Measured: the records (kernels, copies, memsets) it ran.
};

struct ProgramCost {
  std::vector<StepCost> steps;      ///< Parallel to the program's steps.
  double serialSeconds = 0;         ///< One stream: the sum of the steps.
  double criticalPathSeconds = 0;   ///< Unlimited streams: the longest dependency chain.
  std::vector<int> criticalPath;    ///< Step indices along it, in order.
  /// The step times were measured with several streams running at once, so they already include
  /// what sharing the GPU cost (the schedule then applies no sharing rule of its own).
  bool sharingMeasured = false;
};

/// One step's predicted time.
StepCost stepCost(const Target& t, const Plan& plan, const PlanStep& step,
                  Precision precision, const CostCalibration& cal = {});

/// Every step of a program, the iteration and the critical path. With `measured` (of this
/// program, measureProgram in Records.h), measured times and launch shapes replace the
/// estimates of every step.
ProgramCost programCost(const Target& t, const Plan& plan, const PlanProgram& program,
                        Precision precision, const CostCalibration& cal = {},
                        const ProgramMeasurement* measured = nullptr);

} // namespace hgp
