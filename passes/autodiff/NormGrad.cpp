// Gradient rules for normalization.
#include "passes/autodiff/GradContext.h"

namespace hgp {

namespace {
/// Fusion runs after autodiff; a fused BatchNorm has no gradient rule of its own.
Status checkUnfused(GradContext& ctx) {
  if (ctx.attrs().getString("activation", "none") != "none")
    return Status(ErrorCode::Internal, "a fused BatchNorm (activation=" +
                                           ctx.attrs().getString("activation") +
                                           ") cannot be differentiated: run fuse-batch-norm after "
                                           "autodiff");
  return Status::ok();
}

Status batchNormGrad(GradContext& ctx, Value* mean, Value* var, bool batchStats) {
  AttrMap a;
  a.setFloat("epsilon", ctx.attrs().getFloat("epsilon"));
  a.setInt("batch_stats", batchStats ? 1 : 0);
  HGP_ASSIGN_OR_RETURN(auto g, ctx.emit(OpKind::BatchNormBwd,
                                        {ctx.outGrad(0), ctx.in(0), ctx.in(1), mean, var}, a));
  ctx.setInputGrad(0, g[0]);
  ctx.setInputGrad(1, g[1]);
  ctx.setInputGrad(2, g[2]);
  return Status::ok();
}
} // namespace

// Only Y carries a gradient; the batch statistics feed the running-statistics update, which is
// not differentiated (as in PyTorch).
Status gradBatchNormTrain(GradContext& ctx) {
  HGP_TRY(checkUnfused(ctx));
  if (!ctx.outGrad(0)) return Status::ok();
  return batchNormGrad(ctx, ctx.out(1), ctx.out(2), true);
}

// An inference-mode BatchNorm inside a training graph is an affine map. Its mean and var are
// usually frozen running statistics; when they depend on parameters (the statistics --sync-bn
// computes from X), their gradients come from the channel sums of BatchNormBwd.
Status gradBatchNorm(GradContext& ctx) {
  HGP_TRY(checkUnfused(ctx));
  HGP_TRY(batchNormGrad(ctx, ctx.in(3), ctx.in(4), false));
  if (!ctx.needs(3) && !ctx.needs(4)) return Status::ok();
  const std::vector<Value*>& g = ctx.inputGrads();
  Value *dscale = g[1], *dbias = g[2];
  if (!dscale || !dbias) { // the scale or bias needs none: recompute the sums
    AttrMap a;
    a.setFloat("epsilon", ctx.attrs().getFloat("epsilon"));
    a.setInt("batch_stats", 0);
    HGP_ASSIGN_OR_RETURN(auto sums, ctx.emit(OpKind::BatchNormBwd,
                                             {ctx.outGrad(0), ctx.in(0), ctx.in(1), ctx.in(3), ctx.in(4)}, a));
    dscale = sums[1], dbias = sums[2];
  }
  AttrMap a;
  a.setFloat("epsilon", ctx.attrs().getFloat("epsilon"));
  HGP_ASSIGN_OR_RETURN(auto stats, ctx.emit(OpKind::BnStatsGrad, {dscale, dbias, ctx.in(1), ctx.in(4)}, a));
  ctx.setInputGrad(3, stats[0]);
  ctx.setInputGrad(4, stats[1]);
  return Status::ok();
}

Status gradLRN(GradContext& ctx) {
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::LRNBwd, {ctx.outGrad(0), ctx.in(0), ctx.out(0)},
                                             ctx.attrs()));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

// LayerNorm: one LayerNormBwd from the saved row statistics. The gradients of the mean and
// invstd results (which models read only to print) are not supported.
Status gradLayerNorm(GradContext& ctx) {
  if (ctx.outGrad(1) || ctx.outGrad(2))
    return Status(ErrorCode::InvalidModel, "LayerNorm '" + ctx.node().name() +
                                               "': the loss depends on its Mean or InvStdDev "
                                               "output, whose gradient is not supported");
  if (!ctx.outGrad(0)) return Status::ok();
  HGP_ASSIGN_OR_RETURN(auto g, ctx.emit(OpKind::LayerNormBwd,
                                        {ctx.outGrad(0), ctx.in(0), ctx.in(1), ctx.out(1),
                                         ctx.out(2)},
                                        ctx.attrs()));
  ctx.setInputGrad(0, g[0]);
  ctx.setInputGrad(1, g[1]);
  if (ctx.node().numInputs() == 3) ctx.setInputGrad(2, g[2]);
  return Status::ok();
}

} // namespace hgp
