// SliceMechanics.h - how batch slicing cuts a plan: tensors and steps into batch slices, and a
// run of sliced steps into a valid order.
//
// BatchSlicing.h holds the rules (which operands of a step carry the batch: batchOperands) and
// the policy (which steps to split, how wide, which runs to pipeline, whether the result is
// predicted faster). This is the part that does not decide anything:
//
//   - a slice of a tensor is another plan tensor over 1/n of its parent's rows, at the parent's
//     offset plus j/n of its bytes (one tensor per parent, j and n, shared by every step that
//     reads or writes that slice);
//   - a slice of a step reads and writes the slices of its batched operands, with the batch
//     attributes (x_shape, shape) divided and, for a result the slices add into
//     (BatchOperands::accumulates), accumulate=1 on every slice after the first;
//   - the slices of a run are ordered topologically by their byte-range conflicts (read after
//     write, write after read, write after write) among the slices taken in the plain
//     layer-by-layer order, preferring micro-batch i of every member before micro-batch i + 1 of
//     any. A step whose own slices would overwrite bytes a later slice of it still reads is kept
//     whole.
#pragma once

#include "compiler/schedule/BatchSlicing.h"

#include <map>
#include <tuple>
#include <vector>

namespace hgp {

/// A run of steps cut into slices, in the order they are to run.
struct SlicedRun {
  std::vector<PlanStep> steps;
  std::vector<StepSlicing> info; ///< Parallel to `steps`.
  int splitMembers = 0;          ///< Members actually cut (the others run whole).
};

/// Cuts steps of one plan into batch slices. The slice tensors it adds to the plan are shared by
/// every step cut with the same parent, j and n; sliceBatches drops those no step ends up using.
class SliceBuilder {
public:
  explicit SliceBuilder(Plan& plan) : plan_(plan) {}

  /// Whether every batched operand of `s` splits into `n` slices of whole, 64-byte aligned rows.
  bool divides(const PlanStep& s, const BatchOperands& b, int n) const;
  /// Whether two whole steps must keep their order: one writes bytes the other reads or writes.
  bool conflict(const PlanStep& a, const PlanStep& b) const;

  /// Slice j of n of tensor `parent`.
  int sliceTensor(int parent, int j, int n);
  /// Slice j of n of step `s`, whose batched operands `b` names.
  PlanStep sliceStep(const PlanStep& s, const BatchOperands& b, int j, int n);

  /// Cuts member p of a run into m * width[p] slices (micro-batch j / width[p], part
  /// j % width[p]) and orders all of them (see the file comment). `width` and `m` must divide
  /// every member (divides).
  SlicedRun sliceRun(const std::vector<const PlanStep*>& members,
                     const std::vector<const BatchOperands*>& operands,
                     const std::vector<int>& width, int m);

private:
  Plan& plan_;
  std::map<std::tuple<int, int, int>, int> slices_;
};

} // namespace hgp
