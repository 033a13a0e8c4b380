// Gradient rules for the losses.
#include "passes/autodiff/GradContext.h"

namespace hgp {

Status gradSoftmaxCrossEntropy(GradContext& ctx) {
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::SoftmaxCrossEntropyBwd,
                                             {ctx.in(0), ctx.in(1), ctx.outGrad(0)}, ctx.attrs()));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

Status gradMseLoss(GradContext& ctx) {
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::MseLossBwd,
                                             {ctx.in(0), ctx.in(1), ctx.outGrad(0)}, ctx.attrs()));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

} // namespace hgp
