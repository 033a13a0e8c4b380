// Gradient rules for broadcasting arithmetic.
#include "passes/autodiff/GradContext.h"

namespace hgp {

Status gradAdd(GradContext& ctx) {
  for (size_t i = 0; i < 2; ++i) {
    if (!ctx.needs(i)) continue;
    HGP_ASSIGN_OR_RETURN(Value * g, ctx.unbroadcast(ctx.outGrad(0), ctx.in(i)->shape()));
    ctx.setInputGrad(i, g);
  }
  return Status::ok();
}

Status gradSub(GradContext& ctx) {
  if (ctx.needs(0)) {
    HGP_ASSIGN_OR_RETURN(Value * g, ctx.unbroadcast(ctx.outGrad(0), ctx.in(0)->shape()));
    ctx.setInputGrad(0, g);
  }
  if (ctx.needs(1)) {
    HGP_ASSIGN_OR_RETURN(Value * g, ctx.unbroadcast(ctx.outGrad(0), ctx.in(1)->shape()));
    HGP_ASSIGN_OR_RETURN(g, ctx.emit1(OpKind::Neg, {g}));
    ctx.setInputGrad(1, g);
  }
  return Status::ok();
}

Status gradMul(GradContext& ctx) {
  for (size_t i = 0; i < 2; ++i) {
    if (!ctx.needs(i)) continue;
    HGP_ASSIGN_OR_RETURN(Value * g, ctx.emit1(OpKind::Mul, {ctx.outGrad(0), ctx.in(1 - i)}));
    HGP_ASSIGN_OR_RETURN(g, ctx.unbroadcast(g, ctx.in(i)->shape()));
    ctx.setInputGrad(i, g);
  }
  return Status::ok();
}

// Y = A / B: dA = dY / B, dB = -dY * Y / B.
Status gradDiv(GradContext& ctx) {
  HGP_ASSIGN_OR_RETURN(Value * q, ctx.emit1(OpKind::Div, {ctx.outGrad(0), ctx.in(1)}));
  if (ctx.needs(0)) {
    HGP_ASSIGN_OR_RETURN(Value * g, ctx.unbroadcast(q, ctx.in(0)->shape()));
    ctx.setInputGrad(0, g);
  }
  if (ctx.needs(1)) {
    HGP_ASSIGN_OR_RETURN(Value * g, ctx.emit1(OpKind::Mul, {q, ctx.out(0)}));
    HGP_ASSIGN_OR_RETURN(g, ctx.unbroadcast(g, ctx.in(1)->shape()));
    HGP_ASSIGN_OR_RETURN(g, ctx.emit1(OpKind::Neg, {g}));
    ctx.setInputGrad(1, g);
  }
  return Status::ok();
}

Status gradSum(GradContext& ctx) {
  for (size_t i = 0; i < ctx.node().numInputs(); ++i) {
    if (!ctx.needs(i)) continue;
    HGP_ASSIGN_OR_RETURN(Value * g, ctx.unbroadcast(ctx.outGrad(0), ctx.in(i)->shape()));
    ctx.setInputGrad(i, g);
  }
  return Status::ok();
}

} // namespace hgp
