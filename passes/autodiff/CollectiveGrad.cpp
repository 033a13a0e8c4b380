// Gradient rules for collectives.
//
// Rank r's backward pass computes its part of the gradient of the global loss, which the end of
// the step averages over the ranks. For y = mean over ranks of x_r, the global loss's gradient
// reaching x_r is (1/R) times the mean over ranks of each rank's dL/dy; the final average divides
// by R again, so each rank hands x_r the mean of the ranks' dL/dy: the same all-reduce of the
// results' gradients. The same holds for sums. (docs/distributed.md, --sync-bn.)
#include "passes/autodiff/GradContext.h"

namespace hgp {

Status gradAllReduce(GradContext& ctx) {
  std::vector<Value*> grads;
  std::vector<size_t> which;
  for (size_t i = 0; i < ctx.node().numOutputs(); ++i)
    if (ctx.outGrad(i) && ctx.needs(i)) {
      grads.push_back(ctx.outGrad(i));
      which.push_back(i);
    }
  if (grads.empty()) return Status::ok();
  AttrMap a;
  a.setString("reduce", ctx.attrs().getString("reduce", "avg"));
  a.setInt("ranks", ctx.attrs().getInt("ranks", 1));
  HGP_ASSIGN_OR_RETURN(auto reduced, ctx.emit(OpKind::AllReduce, grads, a, int(grads.size())));
  for (size_t k = 0; k < which.size(); ++k) ctx.setInputGrad(which[k], reduced[k]);
  return Status::ok();
}

} // namespace hgp
