// Shape rules for losses and metrics.
#include "ir/OpInfo.h"

namespace hgp {

namespace {
const TensorType kScalar{DType::F32, {}};

Status logitsAndLabels(const InferContext& ctx) {
  HGP_TRY(requireF32(ctx, 0, "logits"));
  const Shape& l = ctx.in(0).shape;
  if (l.size() != 2) return ctx.fail("logits must be [N, C], got " + shapeToString(l));
  if (ctx.in(1) != TensorType{DType::I64, {l[0]}})
    return ctx.fail("labels must be i64[" + std::to_string(l[0]) + "], got " +
                    typeToString(ctx.in(1)));
  double ls = ctx.attrs.getFloat("label_smoothing", 0);
  if (!(ls >= 0 && ls <= 1)) return ctx.fail("label_smoothing must be in [0, 1]");
  return Status::ok();
}

Status predAndTarget(const InferContext& ctx) {
  HGP_TRY(requireF32(ctx, 0, "prediction"));
  if (ctx.in(1) != ctx.in(0))
    return ctx.fail("target " + typeToString(ctx.in(1)) + " must match the prediction " +
                    typeToString(ctx.in(0)));
  return Status::ok();
}
} // namespace

Status inferSoftmaxCrossEntropy(InferContext& ctx) {
  HGP_TRY(logitsAndLabels(ctx));
  ctx.outputs = {kScalar};
  return Status::ok();
}

Status inferSoftmaxCrossEntropyBwd(InferContext& ctx) {
  HGP_TRY(logitsAndLabels(ctx));
  if (ctx.in(2) != kScalar) return ctx.fail("dloss must be an f32 scalar");
  ctx.outputs = {ctx.in(0)};
  return Status::ok();
}

Status inferMseLoss(InferContext& ctx) {
  HGP_TRY(predAndTarget(ctx));
  ctx.outputs = {kScalar};
  return Status::ok();
}

Status inferMseLossBwd(InferContext& ctx) {
  HGP_TRY(predAndTarget(ctx));
  if (ctx.in(2) != kScalar) return ctx.fail("dloss must be an f32 scalar");
  ctx.outputs = {ctx.in(0)};
  return Status::ok();
}

Status inferOneHot(InferContext& ctx) {
  if (ctx.in(0).dtype != DType::I64 || ctx.in(0).rank() != 1)
    return ctx.fail("labels must be i64[N]");
  int64_t depth = ctx.attrs.getInt("depth", 0);
  if (depth < 1) return ctx.fail("depth must be positive");
  ctx.outputs = {{DType::F32, {ctx.in(0).shape[0], depth}}};
  return Status::ok();
}

Status inferCountCorrect(InferContext& ctx) {
  HGP_TRY(logitsAndLabels(ctx));
  ctx.outputs = {kScalar};
  return Status::ok();
}

} // namespace hgp
