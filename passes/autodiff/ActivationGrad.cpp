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

} // namespace hgp
