// Shape rules for Softmax, LogSoftmax and their gradients.
#include "ir/OpInfo.h"

namespace hgp {

namespace {
Status softmax(InferContext& ctx, size_t operands) {
  for (size_t i = 0; i < operands; ++i) {
    HGP_TRY(requireFloat(ctx, i, "operand"));
    if (ctx.in(i) != ctx.in(0)) return ctx.fail("operands must have the same type");
  }
  HGP_ASSIGN_OR_RETURN(int64_t axis, ctx.attrs.requireInt("axis"));
  if (axis < 0 || axis >= std::max<int64_t>(1, ctx.in(0).rank()))
    return ctx.fail("axis out of range");
  ctx.outputs = {ctx.in(0)};
  return Status::ok();
}
} // namespace

Status inferSoftmax(InferContext& ctx) { return softmax(ctx, 1); }
Status inferLogSoftmax(InferContext& ctx) { return softmax(ctx, 1); }
Status inferSoftmaxBwd(InferContext& ctx) { return softmax(ctx, 2); }
Status inferLogSoftmaxBwd(InferContext& ctx) { return softmax(ctx, 2); }

} // namespace hgp
