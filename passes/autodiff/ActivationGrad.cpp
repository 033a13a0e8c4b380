// Gradient rules for activations: each maps to its Bwd op, fed the forward output where the
// derivative is cheapest from it (Relu, Sigmoid, Tanh) and the input otherwise.
#include "passes/autodiff/GradContext.h"

namespace hgp {

namespace {
Status viaBwdOp(GradContext& ctx, OpKind bwd, bool fromOutput) {
  Value* saved = fromOutput ? ctx.out(0) : ctx.in(0);
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(bwd, {ctx.outGrad(0), saved}, ctx.attrs()));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}
} // namespace

Status gradRelu(GradContext& ctx) { return viaBwdOp(ctx, OpKind::ReluBwd, true); }
Status gradLeakyRelu(GradContext& ctx) { return viaBwdOp(ctx, OpKind::LeakyReluBwd, false); }
Status gradClip(GradContext& ctx) { return viaBwdOp(ctx, OpKind::ClipBwd, false); }
Status gradSigmoid(GradContext& ctx) { return viaBwdOp(ctx, OpKind::SigmoidBwd, true); }
Status gradTanh(GradContext& ctx) { return viaBwdOp(ctx, OpKind::TanhBwd, true); }
Status gradHardSigmoid(GradContext& ctx) { return viaBwdOp(ctx, OpKind::HardSigmoidBwd, false); }
Status gradHardSwish(GradContext& ctx) { return viaBwdOp(ctx, OpKind::HardSwishBwd, false); }
Status gradSilu(GradContext& ctx) { return viaBwdOp(ctx, OpKind::SiluBwd, false); }

Status gradNeg(GradContext& ctx) {
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::Neg, {ctx.outGrad(0)}));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

Status gradScale(GradContext& ctx) {
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.scale(ctx.outGrad(0), ctx.attrs().getFloat("alpha")));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

Status gradGelu(GradContext& ctx) { return viaBwdOp(ctx, OpKind::GeluBwd, false); }

// The elementary functions' gradients from the forward ops: d erf = 2/sqrt(pi) e^(-x^2),
// d exp = y, d log = 1/x, d sqrt = 1/(2y), d (1/x) = -y^2.
Status gradErf(GradContext& ctx) {
  Value* x = ctx.in(0);
  HGP_ASSIGN_OR_RETURN(Value * x2, ctx.emit1(OpKind::Mul, {x, x}));
  HGP_ASSIGN_OR_RETURN(Value * nx2, ctx.emit1(OpKind::Neg, {x2}));
  HGP_ASSIGN_OR_RETURN(Value * e, ctx.emit1(OpKind::Exp, {nx2}));
  HGP_ASSIGN_OR_RETURN(Value * d, ctx.scale(e, 1.1283791670955126)); // 2 / sqrt(pi)
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::Mul, {ctx.outGrad(0), d}));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

Status gradExp(GradContext& ctx) {
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::Mul, {ctx.outGrad(0), ctx.out(0)}));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

Status gradLog(GradContext& ctx) {
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::Div, {ctx.outGrad(0), ctx.in(0)}));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

Status gradSqrt(GradContext& ctx) {
  HGP_ASSIGN_OR_RETURN(Value * half, ctx.scale(ctx.outGrad(0), 0.5));
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::Div, {half, ctx.out(0)}));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

Status gradReciprocal(GradContext& ctx) {
  Value* y = ctx.out(0);
  HGP_ASSIGN_OR_RETURN(Value * y2, ctx.emit1(OpKind::Mul, {y, y}));
  HGP_ASSIGN_OR_RETURN(Value * t, ctx.emit1(OpKind::Mul, {ctx.outGrad(0), y2}));
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::Neg, {t}));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

} // namespace hgp
