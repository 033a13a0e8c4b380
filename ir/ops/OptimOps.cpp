// Shape rules for the optimizer updates.
#include "ir/OpInfo.h"

namespace hgp {

namespace {
Status common(const InferContext& ctx) {
  HGP_TRY(requireF32(ctx, 0, "parameter"));
  if (ctx.in(1) != ctx.in(0)) return ctx.fail("the gradient must match the parameter");
  if (ctx.in(2) != TensorType{DType::F32, {}}) return ctx.fail("lr must be an f32 scalar");
  if (ctx.in(3) != TensorType{DType::F32, {}}) return ctx.fail("ok must be an f32 scalar");
  if (ctx.in(4) != TensorType{DType::I64, {}}) return ctx.fail("step must be an i64 scalar");
  if (ctx.attrs.getInt("grad_scale", 0) &&
      ctx.in(ctx.numInputs() - 1) != TensorType{DType::F32, {}})
    return ctx.fail("with grad_scale=1 the last input must be the f32 scalar loss scale");
  return Status::ok();
}

/// Inputs other than the loss scale.
size_t updateInputs(const InferContext& ctx) {
  return ctx.numInputs() - (ctx.attrs.getInt("grad_scale", 0) ? 1 : 0);
}
} // namespace

Status inferSgdUpdate(InferContext& ctx) {
  HGP_TRY(common(ctx));
  size_t n = updateInputs(ctx);
  if (n < 5 || n > 6) return ctx.fail("SGD takes 5 inputs, 6 with a momentum buffer");
  bool hasBuf = n == 6;
  if (hasBuf != (ctx.attrs.getFloat("momentum", 0) != 0))
    return ctx.fail("SGD takes a momentum buffer exactly when momentum is nonzero");
  if (ctx.attrs.getInt("nesterov", 0) &&
      (ctx.attrs.getFloat("momentum", 0) <= 0 || ctx.attrs.getFloat("dampening", 0) != 0))
    return ctx.fail("Nesterov momentum requires a momentum and zero dampening");
  if (hasBuf && ctx.in(5) != ctx.in(0)) return ctx.fail("the momentum buffer must match");
  ctx.outputs = {ctx.in(0)};
  if (hasBuf) ctx.outputs.push_back(ctx.in(0));
  return Status::ok();
}

Status inferAdamUpdate(InferContext& ctx) {
  HGP_TRY(common(ctx));
  if (updateInputs(ctx) != 7) return ctx.fail("Adam takes 7 inputs (8 with grad_scale=1)");
  if (ctx.in(5) != ctx.in(0) || ctx.in(6) != ctx.in(0))
    return ctx.fail("the moment buffers must match the parameter");
  double b1 = ctx.attrs.getFloat("beta1", 0.9), b2 = ctx.attrs.getFloat("beta2", 0.999);
  if (!(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1)) return ctx.fail("betas must be in [0, 1)");
  ctx.outputs = {ctx.in(0), ctx.in(0), ctx.in(0)};
  return Status::ok();
}

} // namespace hgp
