// Gradient rule for dropout: the same Philox mask, recomputed from the iteration counter.
#include "passes/autodiff/GradContext.h"

namespace hgp {

Status gradDropout(GradContext& ctx) {
  if (ctx.node().numInputs() < 2 || ctx.attrs().getFloat("ratio", 0.5) == 0) {
    ctx.setInputGrad(0, ctx.outGrad(0)); // The identity.
    return Status::ok();
  }
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::DropoutBwd, {ctx.outGrad(0), ctx.in(1)},
                                             ctx.attrs()));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

} // namespace hgp
