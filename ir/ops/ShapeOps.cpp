// Shape rules for data movement: Concat, Split, Slice, Reshape, Transpose, Pad, Expand and the
// gradients of Slice and Pad. These ops move bytes, so any dtype is allowed except where a value
// must be produced (Pad's fill and the gradients, which are f32).
#include "ir/OpInfo.h"
#include "runtime/plan/Layout.h"

namespace hgp {

Status inferConcat(InferContext& ctx) {
  const TensorType& first = ctx.in(0);
  HGP_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs.requireInt("axis"));
  if (axis < 0 || axis >= first.rank()) return ctx.fail("axis out of range");
  Shape y = first.shape;
  y[size_t(axis)] = 0;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    const TensorType& t = ctx.in(i);
    if (t.dtype != first.dtype || t.rank() != first.rank())
      return ctx.fail("all inputs must have the same dtype and rank");
    for (int64_t d = 0; d < t.rank(); ++d)
      if (d != axis && t.shape[size_t(d)] != first.shape[size_t(d)])
        return ctx.fail("input " + std::to_string(i) + " shape " + shapeToString(t.shape) +
                        " differs from " + shapeToString(first.shape) + " off the concat axis");
    y[size_t(axis)] += t.shape[size_t(axis)];
  }
  ctx.outputs = {{first.dtype, y}};
  return Status::ok();
}

Status inferSplit(InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  HGP_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs.requireInt("axis"));
  if (axis < 0 || axis >= x.rank()) return ctx.fail("axis out of range");
  HGP_ASSIGN_OR_RETURN(auto sizes, ctx.attrs.requireInts("split"));
  if (ctx.numOutputs >= 0 && size_t(ctx.numOutputs) != sizes.size())
    return ctx.fail("split has " + std::to_string(sizes.size()) + " sizes for " +
                    std::to_string(ctx.numOutputs) + " results");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 1) return ctx.fail("split sizes must be positive");
    total += s;
    Shape y = x.shape;
    y[size_t(axis)] = s;
    ctx.outputs.push_back({x.dtype, y});
  }
  if (total != x.shape[size_t(axis)])
    return ctx.fail("split sizes add up to " + std::to_string(total) + ", the axis has " +
                    std::to_string(x.shape[size_t(axis)]));
  return Status::ok();
}

namespace {
/// Slice's result shape for input shape x; checks the normalized starts/ends/steps.
Expected<Shape> slicedShape(const InferContext& ctx, const Shape& x) {
  size_t r = x.size();
  HGP_ASSIGN_OR_RETURN(auto st, intsOfLength(ctx, "starts", r));
  HGP_ASSIGN_OR_RETURN(auto en, intsOfLength(ctx, "ends", r));
  HGP_ASSIGN_OR_RETURN(auto sp, intsOfLength(ctx, "steps", r));
  Shape y(r);
  for (size_t i = 0; i < r; ++i) {
    if (sp[i] == 0) return ctx.fail("slice steps must not be 0");
    if (sp[i] > 0) {
      if (st[i] < 0 || st[i] > x[i] || en[i] < st[i] || en[i] > x[i])
        return ctx.fail("slice bounds are not normalized");
      y[i] = (en[i] - st[i] + sp[i] - 1) / sp[i];
    } else {
      if (st[i] < 0 || st[i] >= x[i] || en[i] < -1 || en[i] > st[i])
        return ctx.fail("slice bounds are not normalized");
      y[i] = (st[i] - en[i] - sp[i] - 1) / -sp[i];
    }
    if (y[i] < 1) return ctx.fail("the slice is empty along dim " + std::to_string(i));
  }
  return y;
}

Expected<Shape> paddedShape(const InferContext& ctx, const Shape& x) {
  HGP_ASSIGN_OR_RETURN(auto pads, intsOfLength(ctx, "pads", 2 * x.size()));
  std::string mode = ctx.attrs.getString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return ctx.fail("Pad mode '" + mode + "' is not supported");
  Shape y = x;
  for (size_t i = 0; i < x.size(); ++i) {
    y[i] = x[i] + pads[i] + pads[x.size() + i];
    if (y[i] < 1) return ctx.fail("Pad would make dim " + std::to_string(i) + " empty");
    if (mode == "reflect" && (pads[i] >= x[i] || pads[x.size() + i] >= x[i]))
      return ctx.fail("reflect padding must be smaller than the dim it pads");
    if (mode != "constant" && (pads[i] < 0 || pads[x.size() + i] < 0))
      return ctx.fail("negative pads are only supported in constant mode");
  }
  return y;
}
} // namespace

Status inferSlice(InferContext& ctx) {
  HGP_ASSIGN_OR_RETURN(Shape y, slicedShape(ctx, ctx.in(0).shape));
  ctx.outputs = {{ctx.in(0).dtype, y}};
  return Status::ok();
}

Status inferSliceBwd(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "dY"));
  HGP_ASSIGN_OR_RETURN(Shape x, ctx.attrs.requireInts("x_shape"));
  HGP_ASSIGN_OR_RETURN(Shape y, slicedShape(ctx, x));
  if (y != ctx.in(0).shape) return ctx.fail("dY does not match the slice of x_shape");
  ctx.outputs = {{ctx.in(0).dtype, x}};
  return Status::ok();
}

Status inferReshape(InferContext& ctx) {
  HGP_ASSIGN_OR_RETURN(Shape y, ctx.attrs.requireInts("shape"));
  for (int64_t d : y)
    if (d < 1) return ctx.fail("Reshape target dims must be resolved and positive");
  if (numElements(y) != ctx.in(0).numElements())
    return ctx.fail("cannot reshape " + shapeToString(ctx.in(0).shape) + " to " +
                    shapeToString(y));
  ctx.outputs = {{ctx.in(0).dtype, y}};
  return Status::ok();
}

Status inferTranspose(InferContext& ctx) {
  const Shape& x = ctx.in(0).shape;
  HGP_ASSIGN_OR_RETURN(auto perm, intsOfLength(ctx, "perm", x.size()));
  std::vector<bool> seen(x.size());
  Shape y(x.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= int64_t(x.size()) || seen[size_t(perm[i])])
      return ctx.fail("perm is not a permutation");
    seen[size_t(perm[i])] = true;
    y[i] = x[size_t(perm[i])];
  }
  ctx.outputs = {{ctx.in(0).dtype, y}};
  return Status::ok();
}

Status inferPad(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "input"));
  HGP_ASSIGN_OR_RETURN(Shape y, paddedShape(ctx, ctx.in(0).shape));
  ctx.outputs = {{ctx.in(0).dtype, y}};
  return Status::ok();
}

Status inferPadBwd(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "dY"));
  HGP_ASSIGN_OR_RETURN(Shape x, ctx.attrs.requireInts("x_shape"));
  HGP_ASSIGN_OR_RETURN(Shape y, paddedShape(ctx, x));
  if (y != ctx.in(0).shape) return ctx.fail("dY does not match the padded x_shape");
  ctx.outputs = {{ctx.in(0).dtype, x}};
  return Status::ok();
}

Status inferExpand(InferContext& ctx) {
  HGP_ASSIGN_OR_RETURN(Shape target, ctx.attrs.requireInts("shape"));
  HGP_ASSIGN_OR_RETURN(Shape y, broadcastShapes(ctx.in(0).shape, target));
  ctx.outputs = {{ctx.in(0).dtype, y}};
  return Status::ok();
}

Status inferCast(InferContext& ctx) {
  // Between the float dtypes, or between one of them and bool (a graph boundary's bool).
  bool fromBool = ctx.in(0).dtype == DType::Bool;
  if (!fromBool) HGP_TRY(requireFloat(ctx, 0, "input"));
  std::string to = ctx.attrs.getString("to");
  Expected<DType> t = parseDType(to);
  bool toFloat = t && (*t == DType::F32 || *t == DType::BF16 || *t == DType::F16);
  if (!t || (!toFloat && *t != DType::Bool) || (fromBool && !toFloat))
    return ctx.fail("Cast to '" + to + "': only f32, bf16 and f16, and bool from and to them, are "
                    "supported");
  ctx.outputs = {{*t, ctx.in(0).shape}};
  return Status::ok();
}

Status inferCastGroup(InferContext& ctx) {
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    HGP_TRY(requireFloat(ctx, i, "input"));
    if (ctx.in(i).dtype != ctx.in(0).dtype)
      return ctx.fail("CastGroup operands must share one dtype; operand " + std::to_string(i) +
                      " is " + dtypeName(ctx.in(i).dtype) + ", operand 0 " +
                      dtypeName(ctx.in(0).dtype));
  }
  std::string to = ctx.attrs.getString("to");
  Expected<DType> t = parseDType(to);
  if (!t || (*t != DType::F32 && *t != DType::BF16 && *t != DType::F16))
    return ctx.fail("CastGroup to '" + to + "': only f32, bf16 and f16 are supported");
  std::vector<int64_t> layouts = ctx.attrs.getInts("layouts");
  if (!layouts.empty() && layouts.size() != ctx.numInputs())
    return ctx.fail("CastGroup layouts must have one entry per operand");
  ctx.outputs.clear();
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    int64_t l = layouts.empty() ? 0 : layouts[i];
    if (l < 0 || l > 2 || (l != 0 && ctx.in(i).rank() != 4))
      return ctx.fail("CastGroup layouts entry " + std::to_string(l) + " for operand " +
                      std::to_string(i) + " (0, or 1 and 2 for rank-4 operands)");
    Shape y = l == 1 ? channelsLastShape(ctx.in(i).shape)
              : l == 2 ? channelsFirstShape(ctx.in(i).shape)
                       : ctx.in(i).shape;
    ctx.outputs.push_back({*t, y});
  }
  return Status::ok();
}

} // namespace hgp
