// Shape rules for the convolution family: Conv, ConvTranspose and their gradients.
#include "ir/OpInfo.h"

namespace hgp {

namespace {

struct ConvGeometry {
  int64_t r = 0;
  std::vector<int64_t> strides, pads, dilations;
  int64_t group = 1;
};

Expected<ConvGeometry> readGeometry(const InferContext& ctx, int64_t rank) {
  ConvGeometry g;
  if (rank < 3 || rank > 5)
    return ctx.fail("convolution needs a 3-D, 4-D or 5-D input (1 to 3 spatial dims), got rank " +
                    std::to_string(rank));
  g.r = rank - 2;
  HGP_ASSIGN_OR_RETURN(g.strides, intsOfLength(ctx, "strides", size_t(g.r)));
  HGP_ASSIGN_OR_RETURN(g.pads, intsOfLength(ctx, "pads", size_t(2 * g.r)));
  HGP_ASSIGN_OR_RETURN(g.dilations, intsOfLength(ctx, "dilations", size_t(g.r)));
  HGP_ASSIGN_OR_RETURN(g.group, ctx.attrs.requireInt("group"));
  if (g.group < 1) return ctx.fail("group must be positive");
  for (int64_t i = 0; i < g.r; ++i) {
    if (g.strides[i] < 1) return ctx.fail("strides must be positive");
    if (g.dilations[i] < 1) return ctx.fail("dilations must be positive");
    if (g.pads[i] < 0 || g.pads[i + g.r] < 0) return ctx.fail("pads must not be negative");
  }
  return g;
}

/// Output shape of Conv for input shape x and weight shape w.
Expected<Shape> convForwardShape(const InferContext& ctx, const Shape& x, const Shape& w) {
  HGP_ASSIGN_OR_RETURN(ConvGeometry g, readGeometry(ctx, int64_t(x.size())));
  if (w.size() != x.size())
    return ctx.fail("weight rank " + std::to_string(w.size()) + " does not match input rank " +
                    std::to_string(x.size()));
  int64_t c = x[1], m = w[0];
  if (c % g.group != 0 || m % g.group != 0)
    return ctx.fail("group " + std::to_string(g.group) + " does not divide input channels " +
                    std::to_string(c) + " and output channels " + std::to_string(m));
  if (w[1] * g.group != c)
    return ctx.fail("input channels " + std::to_string(c) + " do not match weight channels " +
                    std::to_string(w[1]) + " x group " + std::to_string(g.group));
  Shape y = {x[0], m};
  for (int64_t i = 0; i < g.r; ++i) {
    int64_t o = windowOutputSize(x[2 + i], w[2 + i], g.strides[i], g.pads[i], g.pads[g.r + i],
                                 g.dilations[i], false);
    if (o < 1)
      return ctx.fail("the kernel (" + std::to_string(w[2 + i]) + ", dilation " +
                      std::to_string(g.dilations[i]) + ") is larger than the padded input (" +
                      std::to_string(x[2 + i]) + ") along spatial dim " + std::to_string(i));
    y.push_back(o);
  }
  return y;
}

Status checkBias(const InferContext& ctx, int64_t channels) {
  if (ctx.numInputs() < 3) return Status::ok();
  HGP_TRY(requireSameFloat(ctx, 2, 0, "bias"));
  if (ctx.in(2).shape != Shape{channels})
    return ctx.fail("bias shape " + shapeToString(ctx.in(2).shape) + " must be [" +
                    std::to_string(channels) + "]");
  return Status::ok();
}

} // namespace

Status inferConv(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "input"));
  HGP_TRY(requireSameFloat(ctx, 1, 0, "weight"));
  HGP_ASSIGN_OR_RETURN(Shape y, convForwardShape(ctx, ctx.in(0).shape, ctx.in(1).shape));
  HGP_TRY(checkBias(ctx, ctx.in(1).shape[0]));
  std::string act = ctx.attrs.getString("activation", "none");
  if (act != "none" && act != "relu")
    return ctx.fail("activation must be \"none\" or \"relu\", not \"" + act + "\"");
  ctx.outputs = {{ctx.in(0).dtype, y}};
  // stats=1 (fuse-conv-bn): the channel sums of Y and Y^2 as two more f32[M] results.
  bool stats = ctx.attrs.getInt("stats", 0) != 0;
  if (ctx.numOutputs >= 0 && ctx.numOutputs != (stats ? 3 : 1))
    return ctx.fail(stats ? "stats=1 gives three results (Y, sum, sumsq)" : "Conv has one result");
  if (stats) {
    if (act != "none" || ctx.numInputs() == 3)
      return ctx.fail("stats=1 takes no bias and no activation");
    TensorType sum{DType::F32, {y[1]}};
    ctx.outputs.push_back(sum);
    ctx.outputs.push_back(sum);
  }
  return Status::ok();
}

Status inferConvTranspose(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "input"));
  HGP_TRY(requireSameFloat(ctx, 1, 0, "weight"));
  const Shape &x = ctx.in(0).shape, &w = ctx.in(1).shape;
  HGP_ASSIGN_OR_RETURN(ConvGeometry g, readGeometry(ctx, int64_t(x.size())));
  if (w.size() != x.size()) return ctx.fail("weight rank does not match input rank");
  if (w[0] != x[1])
    return ctx.fail("input channels " + std::to_string(x[1]) + " do not match weight dim 0 (" +
                    std::to_string(w[0]) + ")");
  if (x[1] % g.group != 0) return ctx.fail("group does not divide the input channels");
  HGP_ASSIGN_OR_RETURN(auto outPad, intsOfLength(ctx, "output_padding", size_t(g.r)));
  int64_t m = w[1] * g.group;
  Shape y = {x[0], m};
  for (int64_t i = 0; i < g.r; ++i) {
    if (outPad[i] < 0 || (outPad[i] >= g.strides[i] && outPad[i] >= g.dilations[i]))
      return ctx.fail("output_padding must be smaller than the stride or the dilation");
    y.push_back((x[2 + i] - 1) * g.strides[i] + (w[2 + i] - 1) * g.dilations[i] + 1 + outPad[i] -
                g.pads[i] - g.pads[g.r + i]);
  }
  HGP_TRY(checkBias(ctx, m));
  ctx.outputs = {{ctx.in(0).dtype, y}};
  return Status::ok();
}

Status inferConvBwdData(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "dY"));
  HGP_TRY(requireSameFloat(ctx, 1, 0, "weight"));
  HGP_ASSIGN_OR_RETURN(Shape x, ctx.attrs.requireInts("x_shape"));
  HGP_ASSIGN_OR_RETURN(Shape y, convForwardShape(ctx, x, ctx.in(1).shape));
  if (y != ctx.in(0).shape)
    return ctx.fail("dY shape " + shapeToString(ctx.in(0).shape) + " does not match the "
                    "convolution of x_shape " + shapeToString(x) + " (" + shapeToString(y) + ")");
  ctx.outputs = {{ctx.in(0).dtype, x}};
  return Status::ok();
}

Status inferConvBwdFilter(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "X"));
  HGP_TRY(requireSameFloat(ctx, 1, 0, "dY"));
  HGP_ASSIGN_OR_RETURN(Shape w, ctx.attrs.requireInts("w_shape"));
  HGP_ASSIGN_OR_RETURN(Shape y, convForwardShape(ctx, ctx.in(0).shape, w));
  if (y != ctx.in(1).shape)
    return ctx.fail("dY shape " + shapeToString(ctx.in(1).shape) + " does not match the "
                    "convolution output " + shapeToString(y));
  ctx.outputs = {{ctx.in(0).dtype, w}};
  return Status::ok();
}

} // namespace hgp
