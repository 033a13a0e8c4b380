// BatchSlicing.h - the intra-layer split and the inter-layer pipeline, as one transformation of a
// memory-planned plan.
//
// Intra-layer split: a step whose work is independent per sample (a convolution's forward and
// data gradient, activations, pooling, elementwise ops and their gradients, ...) becomes k steps
// over contiguous batch slices of its operands. In NCHW a batch slice is a contiguous byte range,
// so a slice is just another plan tensor over the parent's bytes (docs/plan-format.md, "Batch
// slices"); the stream scheduler, which orders steps by the byte ranges they touch, then sees the
// k slices as independent and may run them on k streams. The filter gradient sums over the
// batch, so its slices accumulate into one result (attribute accumulate=1 after the first slice)
// instead of summing partial copies: no extra memory and no extra kernel, at the price of running
// the slices one after another, which a pipeline overlaps with the other layers' work anyway.
//
// Inter-layer pipeline: a run of consecutive splittable steps between barriers (BatchNormTrain and
// its gradient, losses, Gemm, reductions, Dropout, the optimizer, ...) is split into m micro-
// batches and reordered so that micro-batch i of every step of the run comes before micro-batch
// i + 1 of any: the scheduler then overlaps the later stages' micro-batch i with the earlier
// stages' i + 1. Barriers in the middle of a run that no later member depends on move after it.
//
// Where the widths and depths come from: forced by flags (tests), or by the analyzer. Its width
// for a convolution phase (SplitWidth.h, among widths the stream pool can run at once) is a
// step's k; a run's depth m is the largest width it
// picks in the run (the stage size), the run's steps then running whole per stage. A run keeps
// the analyzer's slicing only where the stream schedule of the program (StreamSchedule.h, under
// the cost model) is predicted to be faster with it than without, taking runs in program order.
//
// Neither changes the math beyond float reassociation: every slice computes what the whole step
// computes on its samples. The new order is a topological order of the byte-range conflicts
// (read after write, write after read, write after write) among the slices taken in the plain
// layer-by-layer order, so any sharing of bytes that the memory plan set up stays correct; a step
// whose own slices would overwrite bytes a later slice of it still reads is left whole.
//
// The code is in three parts: the rules (batchOperands: which operands of a step carry the
// batch, from the op), the policy (sliceBatches in BatchSlicing.cpp: which runs, which widths
// and depths, whether the schedule is predicted faster), and the mechanics that cut tensors and
// steps into slices and order them (SliceMechanics.h), which decide nothing.
#pragma once

#include "compiler/analysis/CostModel.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hgp {

struct SliceOptions {
  bool split = true;    ///< Off (--no-split): no intra-layer split.
  bool pipeline = true; ///< Off (--no-pipeline): no micro-batch pipeline.
  /// Forced width (--split-width) for every splittable step and depth (--pipeline-depth) for
  /// every run of two or more; 0 takes the analyzer's choice.
  int width = 0, depth = 0;
  /// The GPU the analyzer predicts for; without one, nothing is split unless forced.
  const Target* target = nullptr;
  /// The stream pool the schedule that judges the analyzer's choices may use.
  int maxStreams = 4;
  Precision precision = Precision::TF32;
  CostCalibration cal;
  double minGain = 1.05;
};

/// What the transformation did to one step of the result.
struct StepSlicing {
  int width = 1, depth = 1; ///< The step's sub-batch width and its run's pipeline depth.
  int micro = 0, part = 0;  ///< Which micro-batch, and which of its `width` parts.
};

/// What the transformation did to one program.
struct ProgramSlicing {
  std::vector<StepSlicing> steps; ///< One entry per step of the transformed program.
  int splitSteps = 0;             ///< Steps replaced by slices.
  int pipelines = 0;              ///< Runs pipelined over micro-batches.
};

struct SliceResult {
  std::map<std::string, ProgramSlicing> programs;
};

/// How a step's operands carry the batch, for a step the transformation may slice: which inputs
/// and outputs are sliced along dim 0 (the rest are used whole, like weights), and whether the
/// result is a sum over the batch that slices accumulate into (ConvBwdFilter).
struct BatchOperands {
  int64_t batch = 0;
  std::vector<bool> in, out;
  bool accumulates = false;
};

/// The step's batch operands, or nullopt when it is a barrier: an op that mixes samples, or one
/// whose batched operands are not transient tensors with `batch` rows (plan inputs stay whole:
/// the CUDA backend double-buffers them at other addresses).
std::optional<BatchOperands> batchOperands(const Plan& plan, const PlanStep& step, int64_t batch);

/// Applies the split and the pipeline to every program of `plan` (after the memory plan).
SliceResult sliceBatches(Plan& plan, const SliceOptions& options);

} // namespace hgp
