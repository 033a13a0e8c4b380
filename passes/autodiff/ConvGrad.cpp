// Gradient rules for the convolution family.
#include "passes/autodiff/GradContext.h"

namespace hgp {

namespace {
/// The window attributes shared by a convolution and its gradient ops.
AttrMap geometry(const AttrMap& a) {
  AttrMap g;
  for (const char* k : {"strides", "pads", "dilations", "group"})
    if (const AttrValue* v = a.find(k)) g.set(k, *v);
  return g;
}

/// The bias gradient: dY summed over every dim but the channels.
Expected<Value*> biasGrad(GradContext& ctx, Value* dy) {
  std::vector<int64_t> axes = {0};
  for (int64_t i = 2; i < dy->rank(); ++i) axes.push_back(i);
  AttrMap a;
  a.setInts("axes", axes);
  a.setInt("keepdims", 0);
  return ctx.emit1(OpKind::ReduceSum, {dy}, a);
}
} // namespace

Status gradConv(GradContext& ctx) {
  // fuse-conv-epilogue runs after autodiff; a convolution with a Relu epilogue has no rule.
  if (ctx.attrs().getString("activation", "none") != "none")
    return Status(ErrorCode::Internal, "a convolution with a fused activation cannot be "
                                       "differentiated: run fuse-conv-epilogue after autodiff");
  Value* dy = ctx.outGrad(0);
  if (ctx.needs(0)) {
    AttrMap a = geometry(ctx.attrs());
    a.setInts("x_shape", ctx.in(0)->shape());
    HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::ConvBwdData, {dy, ctx.in(1)}, a));
    ctx.setInputGrad(0, dx);
  }
  if (ctx.needs(1)) {
    AttrMap a = geometry(ctx.attrs());
    a.setInts("w_shape", ctx.in(1)->shape());
    HGP_ASSIGN_OR_RETURN(Value * dw, ctx.emit1(OpKind::ConvBwdFilter, {ctx.in(0), dy}, a));
    ctx.setInputGrad(1, dw);
  }
  if (ctx.node().numInputs() == 3 && ctx.needs(2)) {
    HGP_ASSIGN_OR_RETURN(Value * db, biasGrad(ctx, dy));
    ctx.setInputGrad(2, db);
  }
  return Status::ok();
}

// ConvTranspose(X, W) computes what ConvBwdData(X, W) computes, so its gradients are a Conv of
// dY with the same weights (for X) and a ConvBwdFilter with the roles of X and dY swapped.
Status gradConvTranspose(GradContext& ctx) {
  Value* dy = ctx.outGrad(0);
  if (ctx.needs(0)) {
    HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::Conv, {dy, ctx.in(1)}, geometry(ctx.attrs())));
    ctx.setInputGrad(0, dx);
  }
  if (ctx.needs(1)) {
    AttrMap a = geometry(ctx.attrs());
    a.setInts("w_shape", ctx.in(1)->shape());
    HGP_ASSIGN_OR_RETURN(Value * dw, ctx.emit1(OpKind::ConvBwdFilter, {dy, ctx.in(0)}, a));
    ctx.setInputGrad(1, dw);
  }
  if (ctx.node().numInputs() == 3 && ctx.needs(2)) {
    HGP_ASSIGN_OR_RETURN(Value * db, biasGrad(ctx, dy));
    ctx.setInputGrad(2, db);
  }
  return Status::ok();
}

} // namespace hgp
