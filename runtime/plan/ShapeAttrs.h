// ShapeAttrs.h - the attributes of the data-movement ops (Concat, Split, Slice, Transpose,
// Reshape, Expand, Pad and the gradients of Slice and Pad) and the reductions' axes (ReduceSum,
// ReduceMean), read and checked against their shapes, and the row-major stride arithmetic their
// executors share, for both backends.
//
// Part of the ops' semantics (runtime/plan/OpList.def), like PoolWindow.h for the pooling
// windows: the CPU executors (runtime/cpu/ShapeOps.cpp, ReduceOps.cpp) and the CUDA executors
// (runtime/cuda/ShapeOps.cu, ReduceOps.cu) read the same attributes the same way and reach the same source
// view, and only the copy itself differs. Strides are in elements and may be zero (a broadcast)
// or negative (a reversed Slice). Errors are Internal, since the compiler's shape rules already
// guarantee every check here; the message says what does not fit, and the executor names its
// step in front of it.
#pragma once

#include "runtime/plan/Attr.h"
#include "runtime/plan/Types.h"

#include <vector>

namespace hgp {

// ---- Strides -----------------------------------------------------------------------------

/// The row-major strides of a shape.
std::vector<int64_t> stridesOf(const Shape& s);

/// The strides that read a tensor of shape `s` as if broadcast (numpy rules) to `out`: 0 on the
/// dims `s` broadcasts along, its own stride elsewhere.
std::vector<int64_t> broadcastStrides(const Shape& s, const Shape& out);

/// Merges adjacent dims that every stride list walks contiguously, so that loops over the view
/// have long inner runs, and drops dims of size 1. `strides` holds one list per operand; the
/// result keeps at least one dim (of size 1 and stride 0 when nothing is left).
void coalesceDims(Shape& shape, std::vector<std::vector<int64_t>*> strides);

// ---- Attributes --------------------------------------------------------------------------

/// Reads the integer list attribute `name`, which must be present and have exactly `n` entries.
Status readIntList(const AttrMap& attrs, const char* name, size_t n, std::vector<int64_t>& out);

/// Checks that `parts` stacked along `axis` make up `whole` (Concat's operands and result,
/// Split's results and operand): the same rank, the same dims off the axis, and the parts' dims
/// along it adding up to the whole's.
Status checkStacking(const std::vector<const Shape*>& parts, const Shape& whole, int64_t axis);

/// Where a result's elements are in its source: element i (row-major over the result's shape)
/// is at base + sum(index[d] * strides[d]).
struct SourceView {
  std::vector<int64_t> strides;
  int64_t base = 0;
};

/// Slice's view of `x` that makes `y`, from starts, ends and steps (one entry per dim, already
/// normalized by the frontend: 0 <= start <= end <= dim for a positive step, -1 <= end <= start
/// < dim for a negative one). SliceBwd reads the same attributes with x = its x_shape.
Expected<SourceView> readSliceView(const AttrMap& attrs, const Shape& x, const Shape& y);

/// Transpose's view of `x` that makes `y`, from perm: the strides (base 0).
Expected<SourceView> readTransposeView(const AttrMap& attrs, const Shape& x, const Shape& y);

/// Checks Reshape's `shape` attribute against its result `y`, and that `x` has as many elements.
Status checkReshape(const AttrMap& attrs, const Shape& x, const Shape& y);

/// Expand's result shape: the numpy broadcast of `x` and the `shape` attribute.
Expected<Shape> readExpandShape(const AttrMap& attrs, const Shape& x);

enum class PadMode : int { Constant, Reflect, Edge };

/// Pad's attributes, checked against the unpadded shape `x` and the padded one `y`.
struct PadSpec {
  PadMode mode = PadMode::Constant;
  float value = 0.f;                 ///< The fill of constant mode.
  std::vector<int64_t> before, after; ///< Per dim; negative crops, in constant mode only.
};

/// Reads pads (all begins, then all ends), mode ("constant", "reflect" or "edge") and value.
/// PadBwd reads the same attributes with x = its x_shape and y = its dY's shape.
Expected<PadSpec> readPad(const AttrMap& attrs, const Shape& x, const Shape& y);

/// ReduceSum's and ReduceMean's axes and keepdims, read against X's shape.
struct ReduceAxes {
  std::vector<bool> reduced; ///< Per dim of X: whether it is summed over.
  Shape result;              ///< Y's shape: X's without the reduced dims, or with 1 for each
                             ///< of them under keepdims=1 (the default).
  bool none = false;         ///< `axes` is empty: Y is X unchanged.
};

/// Reads axes (sorted, unique, each in [0, rank)) and keepdims.
Expected<ReduceAxes> readReduceAxes(const AttrMap& attrs, const Shape& x);

} // namespace hgp
