// Shape rules for the normalization family: BatchNorm in both modes, its gradient and running
// statistics update, and LRN.
#include "ir/OpInfo.h"
#include "runtime/plan/BatchNormOperands.h"

namespace hgp {

namespace {

/// X must be [N,C,...] of a float dtype (f32, or bf16/f16 under mixed precision) and inputs
/// [first, first+count) must be f32[C]: scale, bias and statistics stay f32 in every precision.
Status checkChannelVectors(const InferContext& ctx, size_t x, size_t first, size_t count) {
  HGP_TRY(requireFloat(ctx, x, "input"));
  if (ctx.in(x).rank() < 2) return ctx.fail("input must have at least 2 dims (N, C)");
  int64_t c = ctx.in(x).shape[1];
  for (size_t i = first; i < first + count; ++i) {
    HGP_TRY(requireF32(ctx, i, "per-channel operand"));
    if (ctx.in(i).shape != Shape{c})
      return ctx.fail("operand " + std::to_string(i) + " has shape " +
                      shapeToString(ctx.in(i).shape) + ", expected [" + std::to_string(c) + "]");
  }
  return Status::ok();
}

Status checkEpsilon(const InferContext& ctx) {
  if (!(ctx.attrs.getFloat("epsilon", -1) >= 0)) return ctx.fail("epsilon must be >= 0");
  return Status::ok();
}

/// The fused activation (fuse-batch-norm): absent or "none", "relu", "silu" or "hardswish".
Status checkActivation(const InferContext& ctx) {
  BnActivation act;
  if (Status st = bnActivation(ctx.attrs, act); !st) return ctx.fail(st.message());
  return Status::ok();
}

} // namespace

Status inferBatchNorm(InferContext& ctx) {
  HGP_TRY(checkChannelVectors(ctx, 0, 1, 4));
  HGP_TRY(checkEpsilon(ctx));
  HGP_TRY(checkActivation(ctx));
  ctx.outputs = {ctx.in(0)};
  return Status::ok();
}

Status inferBatchNormTrain(InferContext& ctx) {
  HGP_TRY(checkChannelVectors(ctx, 0, 1, 2));
  HGP_TRY(checkEpsilon(ctx));
  HGP_TRY(checkActivation(ctx));
  auto ops = bnTrainOperands(ctx.attrs, ctx.numInputs());
  if (!ops) return ctx.fail(ops.status().message());
  if (ops->residual >= 0 && ctx.in(size_t(ops->residual)) != ctx.in(0))
    return ctx.fail("the residual must have X's type");
  if (ops->givenStats()) HGP_TRY(checkChannelVectors(ctx, 0, size_t(ops->sum), 2));
  TensorType stat{DType::F32, {ctx.in(0).shape[1]}};
  ctx.outputs = {ctx.in(0), stat, stat};
  return Status::ok();
}

Status inferBatchNormBwd(InferContext& ctx) {
  HGP_TRY(checkChannelVectors(ctx, 1, 2, 3));
  if (ctx.in(0) != ctx.in(1)) return ctx.fail("dY and X must have the same type");
  HGP_TRY(checkEpsilon(ctx));
  auto ops = bnBwdOperands(ctx.attrs, ctx.numInputs());
  if (!ops) return ctx.fail(ops.status().message());
  if (ops->relu() && ctx.in(size_t(ops->z)) != ctx.in(1)) return ctx.fail("Z must have X's type");
  if (ops->recomputes()) HGP_TRY(checkChannelVectors(ctx, 1, size_t(ops->bias), 1));
  if (ops->split() && ctx.in(size_t(ops->dy2)) != ctx.in(0))
    return ctx.fail("dY2 must have dY's type");
  TensorType stat{DType::F32, {ctx.in(1).shape[1]}};
  ctx.outputs = {ctx.in(1), stat, stat};
  if (ctx.numOutputs == 4) {
    if (!ops->fused())
      return ctx.fail("the result G (dY through the activation's gradient) needs an activation");
    ctx.outputs.push_back(ctx.in(0));
  }
  return Status::ok();
}

Status inferBnRunningUpdate(InferContext& ctx) {
  for (size_t i = 0; i < 4; ++i) {
    HGP_TRY(requireF32(ctx, i, "statistic"));
    if (ctx.in(i).rank() != 1 || ctx.in(i) != ctx.in(0))
      return ctx.fail("running and batch statistics must all be the same f32[C]");
  }
  if (ctx.numInputs() == 5 && ctx.in(4) != TensorType{DType::F32, {}})
    return ctx.fail("ok must be an f32 scalar");
  if (ctx.attrs.getInt("unbiased", 0) && ctx.attrs.getInt("count", 0) < 2)
    return ctx.fail("an unbiased update needs count >= 2");
  ctx.outputs = {ctx.in(0), ctx.in(1)};
  return Status::ok();
}

Status inferBnStatsGrad(InferContext& ctx) {
  for (size_t i = 0; i < 4; ++i) {
    HGP_TRY(requireF32(ctx, i, "per-channel operand"));
    if (ctx.in(i).rank() != 1 || ctx.in(i) != ctx.in(0))
      return ctx.fail("dscale, dbias, scale and var must all be the same f32[C]");
  }
  ctx.outputs = {ctx.in(0), ctx.in(0)};
  return Status::ok();
}

namespace {

/// LayerNorm's axis and the shapes it implies: scale's X.shape[axis:] and the statistics'
/// X.shape[:axis] + ones.
Status layerNormShapes(const InferContext& ctx, const TensorType& x, Shape& inner, Shape& stats) {
  int64_t axis = ctx.attrs.getInt("axis", -1);
  if (axis < 0 || axis >= x.rank())
    return ctx.fail("LayerNorm axis " + std::to_string(axis) + " is not in [0, " +
                    std::to_string(x.rank()) + ")");
  if (!(ctx.attrs.getFloat("epsilon", 1e-5) > 0)) return ctx.fail("epsilon must be positive");
  inner.assign(x.shape.begin() + axis, x.shape.end());
  stats.assign(x.shape.begin(), x.shape.begin() + axis);
  stats.resize(x.shape.size(), 1);
  return Status::ok();
}

} // namespace

Status inferLayerNorm(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "X"));
  Shape inner, stats;
  HGP_TRY(layerNormShapes(ctx, ctx.in(0), inner, stats));
  for (size_t i = 1; i < ctx.numInputs(); ++i)
    if (ctx.in(i) != TensorType{DType::F32, inner})
      return ctx.fail(std::string(i == 1 ? "scale" : "bias") + " " + typeToString(ctx.in(i)) +
                      " must be f32 " + shapeToString(inner) + ", X's normalized dims");
  ctx.outputs = {ctx.in(0), {DType::F32, stats}, {DType::F32, stats}};
  return Status::ok();
}

Status inferLayerNormBwd(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "dY"));
  if (ctx.in(1) != ctx.in(0)) return ctx.fail("dY and X must have the same type");
  Shape inner, stats;
  HGP_TRY(layerNormShapes(ctx, ctx.in(1), inner, stats));
  if (ctx.in(2) != TensorType{DType::F32, inner}) return ctx.fail("scale must have X's normalized dims");
  for (size_t i = 3; i < 5; ++i)
    if (ctx.in(i) != TensorType{DType::F32, stats})
      return ctx.fail("mean and invstd must be f32 " + shapeToString(stats));
  ctx.outputs = {ctx.in(1), ctx.in(2), ctx.in(2)};
  return Status::ok();
}

Status inferLRN(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "input"));
  if (ctx.in(0).rank() < 3) return ctx.fail("LRN needs an input of rank 3 or more");
  if (ctx.attrs.getInt("size", 0) < 1) return ctx.fail("LRN size must be positive");
  ctx.outputs = {ctx.in(0)};
  return Status::ok();
}

Status inferLRNBwd(InferContext& ctx) {
  for (size_t i = 0; i < 3; ++i)
    if (ctx.in(i) != ctx.in(0)) return ctx.fail("dY, X and Y must have the same type");
  HGP_TRY(requireFloat(ctx, 0, "dY"));
  ctx.outputs = {ctx.in(0)};
  return Status::ok();
}

} // namespace hgp
