// CostModel.h - predicted time of every step of a program, of the whole iteration, and the
// critical path.
//
// Each step's time is a roofline over the target: its launch cost inside a graph and a fixed cost
// per kernel, plus the larger of its arithmetic time (FLOPs over the math mode's peak, at the
// efficiency the library kernels reach) and its memory time (bytes over the bandwidth the
// kernels reach), stretched by wave quantization (a kernel of 1.2 waves takes about as long as
// one of 2). A split-K GEMM also pays for its partial tiles and the kernel that adds them. On one
// stream the iteration takes the sum of its steps; the critical path, the longest dependency
// chain through the program, is what any number of streams would still take.
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

/// The fractions of the peaks that the kernels reach, and the fixed costs of a kernel beyond
/// its launch. Fitted to the H200 measurements (tests/integration/test_cost_model_h200.py:
/// ResNet-50 over batches 32-256 in tf32 and bf16 from `hgpc explore --measure`, and the ten
/// benchmark cases of docs/benchmarks.md in both precisions), in a form whose batch dependence is
/// that of the measurements: a step costs a fixed part per kernel plus work at a rate, so the
/// per-image time falls with the batch as the fixed parts spread. The earlier fit (0.40 for every
/// math mode, 0.60 of the bandwidth, 2 us a kernel) over-predicted ResNet-50 tf32 by 11% at batch
/// 32 and 38% at 256, and its stream schedule hid a sixth of its one-stream sum behind kernels
/// that the split-K cap of 16 left at a tenth of a wave (measured: 1% from the streams).
struct CostCalibration {
  /// Tensor-core convolutions and matrix products in bf16 and fp16, and FP32 arithmetic.
  double computeEfficiency = 0.40;
  /// Tensor-core convolutions and matrix products in TF32, whose peak is half of bf16's: the
  /// kernels reach a larger fraction of it. The tf32 cases want 0.60 (VGG-16 b32 +5%, ResNet-50
  /// b128 -0.5%); bf16's 0.40 fits ResNet-50 (CUPTI: its convolutions reach 32% of the bf16 peak
  /// at b128) but not VGG-16 (+47%), whose large 3x3 convolutions reach more.
  double tf32ComputeEfficiency = 0.60;
  /// The fraction of the memory bandwidth streaming kernels reach (about 4 TB/s of the H200's 4.8).
  double memoryEfficiency = 0.85;
  /// Per convolution or matrix-product kernel: setup, tails.
  double gemmFixedSeconds = 4e-6;
  /// Per kernel of any kind, beyond the graph's launch gap (Target::launchSeconds): filling and
  /// draining the SMs.
  double kernelSeconds = 1e-6;
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
  /// The fraction of the memory bandwidth the step's kernels hold while they work: their bytes'
  /// time over the roofline's time, 1 for a memory-bound kernel. Kernels sharing the GPU cannot
  /// stream more than all of it (gpuUse).
  double bandwidthShare = 0;
  /// The graph's launch gaps of the step's kernels (Target::launchSeconds each), the part of
  /// `seconds` that kernels on other streams do not overlap: the front end issues one at a time.
  double launchSeconds = 0;
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

/// The fraction of the GPU a step holds while it runs: its SMs (gpuShare of its launch shape) or
/// its share of the memory bandwidth, whichever is larger. Kernels on separate streams overlap
/// as far as these fractions leave room: a kernel that leaves SMs idle but streams at the full
/// bandwidth does not make a concurrent one faster. It applies to the time past the launch
/// (busySeconds).
double gpuUse(const Target& t, const StepCost& c);

/// The part of a step's time that holds the GPU: seconds less its launch gaps.
double busySeconds(const StepCost& c);

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
