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
// bytes, one per sample) stay copies. Every view's offset is 64-byte aligned, as every plan
// tensor's must be; a range that is not stays a copy too.
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

namespace hgp {

/// Where a value's bytes lie when it is a view.
struct ValueView {
  /// The value whose bytes contain this one's (itself possibly a view).
  const Value* parent = nullptr;
  /// Byte offset within the parent, a multiple of 64.
  int64_t offset = 0;
  /// View (a Reshape, Slice or Split result) or Part (a Concat operand written in place).
  AliasKind kind = AliasKind::View;
};

struct ViewPlan {
  /// The views, by value.
  std::map<const Value*, ValueView> views;
  /// The nodes that become no step: all their results are views of their operands, or (Concat)
  /// all their operands are parts of their result.
  std::set<const Node*> elided;
};

/// The views of graph `g`. Values in `unplaced` (carry results, which take their state's
/// storage) take no part.
ViewPlan findViews(const Graph& g, const std::set<const Value*>& unplaced);

} // namespace hgp
