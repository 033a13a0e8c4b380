// Gradient rules for reductions: broadcast dY back over the reduced axes.
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

} // namespace hgp
