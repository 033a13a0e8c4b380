// Views.h - which node results can live inside another value's bytes, so that no step copies them.
//
// Data movement is a view where it can be (DESIGN.md). A view is a value whose bytes lie inside
// another value's, at a byte offset, as one contiguous range:
//   - a Reshape result (the frontend's Flatten, Squeeze and Unsqueeze too; Identity is no node)
//     is its input's bytes, at offset 0;
//   - a Slice result, or a Split result, is the range of its input it selects, when that range
//     is contiguous in row-major order (every dim before the first cut one has extent 1, every
//     dim after it is taken whole, steps of 1);
//   - a Concat operand is written by its producer into its slice of the Concat's result (Concat
//     in place, a "part"), when each slice is one contiguous range (every dim before the axis
//     has extent 1, as along the batch axis or at batch 1).
// A step whose results are all views of its operands, or whose operands are all parts of its
// result, runs no kernel: the plan emitter leaves it out, and the tensors say whose bytes they
// share (docs/plan-format.md, "Views").
//
// Slices that are not contiguous (a channel slice of a batch of more than one sample: N runs of
// bytes, one per sample) stay copies, unless strided views are on (`hgpc compile
// --strided-views`). Then such a range is a pitched view (PlanTensor::row/pitch): rows of `row`
// elements, `pitch` apart, where exactly one dim is cut and every dim before it is whole (a
// channel range of NCHW: a row per sample; of NHWC: a row per pixel). A pitched view is made
// only where every step that touches it accepts a pitched operand there (acceptsPitched, the
// op table's HGP_PITCHED entries): a Concat part's producer must write it pitched, and every
// reader of a part or of a Split/Slice result must read it pitched. A Concat whose operands are
// a run of another in-place Concat's parts (DenseNet: each layer concatenates all earlier
// features, and the block's last Concat holds them all) becomes a view of that Concat's result
// too, so one buffer per dense block holds every feature map once. Pitched views do not nest:
// a pitched value has no views of its own, and a value with pitched views is no pitched view.
// A Concat, Split or Slice that stays a copy under --strided-views says why (`copy` attribute).
//
// Every contiguous view's offset is 64-byte aligned, as every plan tensor's must be; a pitched
// view's offset, row and pitch are multiples of 16 bytes (a vector). A range that is not stays
// a copy.
//
// Only transient node results take part: graph inputs, parameters and constants live in the
// persistent region (inputs are double-buffered by the CUDA backend), and carried results take
// their state's storage. A value has at most one parent, and the parents form trees; the memory
// plan places each tree's root and keeps it live as long as any member is.
#pragma once

#include "ir/Graph.h"
#include "runtime/plan/Plan.h"

#include <map>
#include <set>
#include <string>

namespace hgp {

/// Where a value's bytes lie when it is a view.
struct ValueView {
  /// The value whose bytes contain this one's (itself possibly a view).
  const Value* parent = nullptr;
  /// Byte offset within the parent, a multiple of 64.
  int64_t offset = 0;
  /// View (a Reshape, Slice or Split result) or Part (a Concat operand written in place).
  AliasKind kind = AliasKind::View;
  /// A pitched view's rows, in elements (PlanTensor::row/pitch); 0: contiguous.
  int64_t row = 0, pitch = 0;
};

struct ViewPlan {
  /// The views, by value.
  std::map<const Value*, ValueView> views;
  /// The nodes that become no step: all their results are views of their operands, or (Concat)
  /// all their operands are parts of their result.
  std::set<const Node*> elided;
  /// With strided views: why a Concat, Split or Slice stays a copy.
  std::map<const Node*, std::string> copies;
};

/// The views of graph `g`. Values in `unplaced` (carry results, which take their state's
/// storage) take no part. `strided` also makes pitched views.
ViewPlan findViews(const Graph& g, const std::set<const Value*>& unplaced, bool strided = false);

} // namespace hgp
