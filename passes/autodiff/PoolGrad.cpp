// Gradient rules for pooling.
#include "passes/autodiff/GradContext.h"

namespace hgp {

Status gradMaxPool(GradContext& ctx) {
  HGP_ASSIGN_OR_RETURN(Value * dx,
                       ctx.emit1(OpKind::MaxPoolBwd, {ctx.outGrad(0), ctx.in(0)}, ctx.attrs()));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

Status gradAveragePool(GradContext& ctx) {
  AttrMap a = ctx.attrs();
  a.setInts("x_shape", ctx.in(0)->shape());
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::AveragePoolBwd, {ctx.outGrad(0)}, a));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

Status gradGlobalAveragePool(GradContext& ctx) {
  AttrMap a;
  a.setInts("x_shape", ctx.in(0)->shape());
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::GlobalAveragePoolBwd, {ctx.outGrad(0)}, a));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

} // namespace hgp
