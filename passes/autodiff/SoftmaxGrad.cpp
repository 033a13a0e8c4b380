// Gradient rules for softmax and log-softmax: both need only the forward output.
#include "passes/autodiff/GradContext.h"

namespace hgp {

Status gradSoftmax(GradContext& ctx) {
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::SoftmaxBwd, {ctx.outGrad(0), ctx.out(0)},
                                             ctx.attrs()));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

Status gradLogSoftmax(GradContext& ctx) {
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::LogSoftmaxBwd, {ctx.outGrad(0), ctx.out(0)},
                                             ctx.attrs()));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

} // namespace hgp
