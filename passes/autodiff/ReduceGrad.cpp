// Gradient rules for reductions: broadcast dY back over the reduced axes; ReduceMax's goes to the
// elements equal to the maximum, split evenly among them (torch.amax's rule).
#include "passes/autodiff/GradContext.h"

namespace hgp {

namespace {
Status reduceGrad(GradContext& ctx, bool mean) {
  const Shape& x = ctx.in(0)->shape();
  std::vector<int64_t> axes = ctx.attrs().getInts("axes");
  Shape kept = x;
  int64_t count = 1;
  for (int64_t a : axes) {
    count *= x[size_t(a)];
    kept[size_t(a)] = 1;
  }
  HGP_ASSIGN_OR_RETURN(Value * g, ctx.reshape(ctx.outGrad(0), kept));
  if (kept != x) {
    AttrMap a;
    a.setInts("shape", x);
    HGP_ASSIGN_OR_RETURN(g, ctx.emit1(OpKind::Expand, {g}, a));
  }
  if (mean) {
    HGP_ASSIGN_OR_RETURN(g, ctx.scale(g, 1.0 / double(count)));
  }
  ctx.setInputGrad(0, g);
  return Status::ok();
}
} // namespace

Status gradReduceMean(GradContext& ctx) { return reduceGrad(ctx, true); }
Status gradReduceSum(GradContext& ctx) { return reduceGrad(ctx, false); }

// dX = Equal(X, Y) / count * dY, with Y and dY in the kept shape (reduced dims 1) broadcasting
// over X, and count = ReduceSum(Equal(X, Y)) over the reduced axes, kept: the number of elements
// that tie for the maximum (1 when it is unique; at a NaN maximum, 0 of X's elements equal it and
// the gradient is 0/0, NaN, where torch gives the NaN element dY).
Status gradReduceMax(GradContext& ctx) {
  const Shape& x = ctx.in(0)->shape();
  std::vector<int64_t> axes = ctx.attrs().getInts("axes");
  Shape kept = x;
  for (int64_t a : axes) kept[size_t(a)] = 1;
  HGP_ASSIGN_OR_RETURN(Value * y, ctx.reshape(ctx.out(0), kept));
  HGP_ASSIGN_OR_RETURN(Value * dy, ctx.reshape(ctx.outGrad(0), kept));
  HGP_ASSIGN_OR_RETURN(Value * mask, ctx.emit1(OpKind::Equal, {ctx.in(0), y}));
  AttrMap sum;
  sum.setInts("axes", axes);
  sum.setInt("keepdims", 1);
  HGP_ASSIGN_OR_RETURN(Value * count, ctx.emit1(OpKind::ReduceSum, {mask}, sum));
  HGP_ASSIGN_OR_RETURN(Value * share, ctx.emit1(OpKind::Div, {dy, count}));
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::Mul, {mask, share}));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

} // namespace hgp
