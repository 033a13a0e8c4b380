// Shape rules for broadcasting binary ops and the n-ary Sum.
#include "ir/OpInfo.h"

namespace hgp {

namespace {
Status binary(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "A"));
  HGP_TRY(requireSameFloat(ctx, 1, 0, "B"));
  HGP_ASSIGN_OR_RETURN(Shape y, broadcastShapes(ctx.in(0).shape, ctx.in(1).shape));
  ctx.outputs = {{ctx.in(0).dtype, y}};
  return Status::ok();
}
} // namespace

Status inferAdd(InferContext& ctx) { return binary(ctx); }
Status inferSub(InferContext& ctx) { return binary(ctx); }
Status inferMul(InferContext& ctx) { return binary(ctx); }
Status inferDiv(InferContext& ctx) { return binary(ctx); }

Status inferSum(InferContext& ctx) {
  Shape y;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    HGP_TRY(requireSameFloat(ctx, i, 0, "operand"));
    HGP_ASSIGN_OR_RETURN(y, broadcastShapes(y, ctx.in(i).shape));
  }
  ctx.outputs = {{ctx.in(0).dtype, y}};
  return Status::ok();
}

} // namespace hgp
