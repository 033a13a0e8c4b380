// Shape rules for the pooling family.
#include "ir/OpInfo.h"

namespace hgp {

namespace {

/// The pooled shape of x under the window attributes (dilations optional, default 1).
Expected<Shape> pooledShape(const InferContext& ctx, const Shape& x) {
  if (x.size() < 3 || x.size() > 5)
    return ctx.fail("pooling needs 1 to 3 spatial dims, got rank " + std::to_string(x.size()));
  size_t r = x.size() - 2;
  HGP_ASSIGN_OR_RETURN(auto k, intsOfLength(ctx, "kernel_shape", r));
  HGP_ASSIGN_OR_RETURN(auto s, intsOfLength(ctx, "strides", r));
  HGP_ASSIGN_OR_RETURN(auto p, intsOfLength(ctx, "pads", 2 * r));
  auto d = ctx.attrs.getInts("dilations", std::vector<int64_t>(r, 1));
  if (d.size() != r) return ctx.fail("dilations must have one entry per spatial dim");
  bool ceil = ctx.attrs.getInt("ceil_mode", 0) != 0;
  Shape y = {x[0], x[1]};
  for (size_t i = 0; i < r; ++i) {
    if (k[i] < 1 || s[i] < 1 || d[i] < 1) return ctx.fail("kernel, strides and dilations must be positive");
    if (p[i] < 0 || p[r + i] < 0) return ctx.fail("pads must not be negative");
    if (p[i] >= k[i] * d[i] || p[r + i] >= k[i] * d[i])
      return ctx.fail("pads must be smaller than the window");
    int64_t o = windowOutputSize(x[2 + i], k[i], s[i], p[i], p[r + i], d[i], ceil);
    if (o < 1) return ctx.fail("the pooling window is larger than the padded input");
    y.push_back(o);
  }
  return y;
}

} // namespace

Status inferMaxPool(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "input"));
  HGP_ASSIGN_OR_RETURN(Shape y, pooledShape(ctx, ctx.in(0).shape));
  ctx.outputs = {{ctx.in(0).dtype, y}};
  return Status::ok();
}

Status inferMaxPoolBwd(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "dY"));
  HGP_TRY(requireSameFloat(ctx, 1, 0, "X"));
  HGP_ASSIGN_OR_RETURN(Shape y, pooledShape(ctx, ctx.in(1).shape));
  if (y != ctx.in(0).shape) return ctx.fail("dY shape does not match the pooled shape of X");
  ctx.outputs = {ctx.in(1)};
  return Status::ok();
}

Status inferAveragePool(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "input"));
  if (ctx.attrs.has("dilations")) {
    for (int64_t d : ctx.attrs.getInts("dilations"))
      if (d != 1) return ctx.fail("AveragePool with dilations is not supported");
  }
  HGP_ASSIGN_OR_RETURN(Shape y, pooledShape(ctx, ctx.in(0).shape));
  ctx.outputs = {{ctx.in(0).dtype, y}};
  return Status::ok();
}

Status inferAveragePoolBwd(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "dY"));
  HGP_ASSIGN_OR_RETURN(Shape x, ctx.attrs.requireInts("x_shape"));
  HGP_ASSIGN_OR_RETURN(Shape y, pooledShape(ctx, x));
  if (y != ctx.in(0).shape) return ctx.fail("dY shape does not match the pooled x_shape");
  ctx.outputs = {{ctx.in(0).dtype, x}};
  return Status::ok();
}

Status inferGlobalAveragePool(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "input"));
  if (ctx.in(0).rank() < 3) return ctx.fail("GlobalAveragePool needs rank 3 or more");
  Shape y = ctx.in(0).shape;
  for (size_t i = 2; i < y.size(); ++i) y[i] = 1;
  ctx.outputs = {{ctx.in(0).dtype, y}};
  return Status::ok();
}

Status inferGlobalAveragePoolBwd(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "dY"));
  HGP_ASSIGN_OR_RETURN(Shape x, ctx.attrs.requireInts("x_shape"));
  Shape y = x;
  for (size_t i = 2; i < y.size(); ++i) y[i] = 1;
  if (x.size() < 3 || y != ctx.in(0).shape) return ctx.fail("dY does not match x_shape");
  ctx.outputs = {{ctx.in(0).dtype, x}};
  return Status::ok();
}

} // namespace hgp
