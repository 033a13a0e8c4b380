// Shape rules for Dropout and its gradient, Bernoulli and RandomNormal.
#include "ir/OpInfo.h"

#include <cmath>

namespace hgp {

namespace {
Status checkRatio(const InferContext& ctx) {
  double r = ctx.attrs.getFloat("ratio", 0.5);
  if (!(r >= 0 && r < 1)) return ctx.fail("dropout ratio must be in [0, 1)");
  return Status::ok();
}
Status checkIter(const InferContext& ctx, size_t i) {
  if (ctx.in(i) != TensorType{DType::I64, {}})
    return ctx.fail("the iteration counter must be an i64 scalar");
  return Status::ok();
}
} // namespace

Status inferDropout(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "input"));
  HGP_TRY(checkRatio(ctx));
  if (ctx.numInputs() == 2) HGP_TRY(checkIter(ctx, 1));
  ctx.outputs = {ctx.in(0)};
  return Status::ok();
}

Status inferDropoutBwd(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "dY"));
  HGP_TRY(checkRatio(ctx));
  HGP_TRY(checkIter(ctx, 1));
  ctx.outputs = {ctx.in(0)};
  return Status::ok();
}

Status inferBernoulli(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "X"));
  double p = ctx.attrs.getFloat("p", -1);
  if (!(p >= 0 && p <= 1)) return ctx.fail("Bernoulli p must be in [0, 1]");
  if (ctx.numInputs() == 2) HGP_TRY(checkIter(ctx, 1));
  ctx.outputs = {ctx.in(0)};
  return Status::ok();
}

Status inferRandomNormal(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "X"));
  double scale = ctx.attrs.getFloat("scale", 1.0), mean = ctx.attrs.getFloat("mean", 0.0);
  if (!std::isfinite(scale) || !std::isfinite(mean))
    return ctx.fail("RandomNormal mean and scale must be finite");
  if (ctx.numInputs() == 2) HGP_TRY(checkIter(ctx, 1));
  ctx.outputs = {ctx.in(0)};
  return Status::ok();
}

} // namespace hgp
