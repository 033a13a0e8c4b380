// Gradient rules for broadcasting arithmetic, Max and Min, and Where. Max, Min and Where route the
// gradient with Where (never a product with a mask, so an inf in dY stays where it belongs).
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

namespace {

/// A scalar zero of dtype `t`, the other branch of a routing Where.
Expected<Value*> zeroScalar(GradContext& ctx, DType t) {
  auto data = std::make_shared<TensorData>();
  data->type = TensorType{t, {}};
  data->bytes.assign(size_t(dtypeSize(t)), 0);
  return ctx.graph().addGraphValue(ctx.graph().uniqueName("zero"), TensorRole::Const, data->type,
                                   data);
}

/// Max (max=true) or Min of A and B: dY goes to the operand selected, and dY / 2 to each at a tie
/// (torch.maximum's rule): dA = Where(A > B, dY, Where(A == B, dY / 2, 0)) for Max, with < for
/// Min, and B's the other way round; each summed back over its broadcast dims.
Status gradMaxMin(GradContext& ctx, bool max) {
  Value *a = ctx.in(0), *b = ctx.in(1), *dy = ctx.outGrad(0);
  HGP_ASSIGN_OR_RETURN(Value * zero, zeroScalar(ctx, dy->dtype()));
  HGP_ASSIGN_OR_RETURN(Value * tie, ctx.emit1(OpKind::Equal, {a, b}));
  HGP_ASSIGN_OR_RETURN(Value * half, ctx.scale(dy, 0.5));
  HGP_ASSIGN_OR_RETURN(Value * atTie, ctx.emit1(OpKind::Where, {tie, half, zero}));
  for (size_t i = 0; i < 2; ++i) {
    if (!ctx.needs(i)) continue;
    // Operand i wins where it is greater (Max) or less (Min) than the other.
    OpKind wins = (max == (i == 0)) ? OpKind::Greater : OpKind::Less;
    HGP_ASSIGN_OR_RETURN(Value * m, ctx.emit1(wins, {a, b}));
    HGP_ASSIGN_OR_RETURN(Value * g, ctx.emit1(OpKind::Where, {m, dy, atTie}));
    HGP_ASSIGN_OR_RETURN(g, ctx.unbroadcast(g, ctx.in(i)->shape()));
    ctx.setInputGrad(i, g);
  }
  return Status::ok();
}

} // namespace

Status gradMax(GradContext& ctx) { return gradMaxMin(ctx, /*max=*/true); }
Status gradMin(GradContext& ctx) { return gradMaxMin(ctx, /*max=*/false); }

// Y = Where(C, A, B): dA = Where(C, dY, 0), dB = Where(C, 0, dY); C gets none.
Status gradWhere(GradContext& ctx) {
  Value *c = ctx.in(0), *dy = ctx.outGrad(0);
  HGP_ASSIGN_OR_RETURN(Value * zero, zeroScalar(ctx, dy->dtype()));
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.needs(i)) continue;
    std::vector<Value*> ops = i == 1 ? std::vector<Value*>{c, dy, zero}
                                     : std::vector<Value*>{c, zero, dy};
    HGP_ASSIGN_OR_RETURN(Value * g, ctx.emit1(OpKind::Where, ops));
    HGP_ASSIGN_OR_RETURN(g, ctx.unbroadcast(g, ctx.in(i)->shape()));
    ctx.setInputGrad(i, g);
  }
  return Status::ok();
}

} // namespace hgp
