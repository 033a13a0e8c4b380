// Shape rules for training control: finiteness checks, counters, the LR schedule and metrics.
#include "ir/OpInfo.h"

namespace hgp {

namespace {
const TensorType kScalarF32{DType::F32, {}};
const TensorType kScalarI64{DType::I64, {}};
} // namespace

Status inferCheckFinite(InferContext& ctx) {
  for (size_t i = 0; i < ctx.numInputs(); ++i) HGP_TRY(requireF32(ctx, i, "operand"));
  ctx.outputs = {kScalarF32};
  return Status::ok();
}

Status inferCounterIncrement(InferContext& ctx) {
  if (ctx.in(0) != kScalarI64) return ctx.fail("the counter must be an i64 scalar");
  if (ctx.numInputs() == 2 && ctx.in(1) != kScalarF32) return ctx.fail("ok must be an f32 scalar");
  ctx.outputs = {kScalarI64};
  return Status::ok();
}

Status inferLrSchedule(InferContext& ctx) {
  if (ctx.in(0) != kScalarI64) return ctx.fail("the iteration counter must be an i64 scalar");
  std::string kind = ctx.attrs.getString("kind", "constant");
  if (kind != "constant" && kind != "step" && kind != "multistep" && kind != "cosine")
    return ctx.fail("unknown schedule '" + kind + "'");
  if (kind == "step" && ctx.attrs.getInt("step_size", 0) < 1)
    return ctx.fail("the step schedule needs step_size >= 1");
  if (kind == "cosine" && ctx.attrs.getInt("t_max", 0) < 1)
    return ctx.fail("the cosine schedule needs t_max >= 1");
  if (ctx.attrs.getInt("warmup_steps", 0) < 0) return ctx.fail("warmup_steps must be >= 0");
  ctx.outputs = {kScalarF32};
  return Status::ok();
}

Status inferMetricsLog(InferContext& ctx) {
  const TensorType& ring = ctx.in(0);
  if (ring.dtype != DType::F32 || ring.rank() != 2 || ring.shape[1] != 4)
    return ctx.fail("the metrics ring must be f32[K,4]");
  if (ctx.in(1) != kScalarI64) return ctx.fail("the iteration counter must be an i64 scalar");
  for (size_t i = 2; i < 6; ++i)
    if (ctx.in(i) != kScalarF32) return ctx.fail("metrics must be f32 scalars");
  ctx.outputs = {ring};
  return Status::ok();
}

Status inferLossScaleUpdate(InferContext& ctx) {
  if (ctx.in(0) != kScalarF32) return ctx.fail("the loss scale must be an f32 scalar");
  if (ctx.in(1) != TensorType{DType::I64, {}}) return ctx.fail("good must be an i64 scalar");
  if (ctx.in(2) != kScalarF32) return ctx.fail("ok must be an f32 scalar");
  if (!(ctx.attrs.getFloat("growth_factor", 2.0) > 1) ||
      !(ctx.attrs.getFloat("backoff_factor", 0.5) > 0 && ctx.attrs.getFloat("backoff_factor", 0.5) < 1) ||
      ctx.attrs.getInt("growth_interval", 2000) < 1)
    return ctx.fail("loss scaling needs growth_factor > 1, backoff_factor in (0, 1) and "
                    "growth_interval >= 1");
  ctx.outputs = {ctx.in(0), ctx.in(1)};
  return Status::ok();
}

} // namespace hgp
