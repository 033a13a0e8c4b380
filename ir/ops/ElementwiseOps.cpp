// Shape rules for broadcasting binary ops (arithmetic, Max/Min, comparisons), the n-ary Sum and
// Where. Comparisons give a 0/1 mask of the operands' dtype (OpList.def, "Comparisons").
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
Status inferMax(InferContext& ctx) { return binary(ctx); }
Status inferMin(InferContext& ctx) { return binary(ctx); }
Status inferLess(InferContext& ctx) { return binary(ctx); }
Status inferGreater(InferContext& ctx) { return binary(ctx); }
Status inferEqual(InferContext& ctx) { return binary(ctx); }

Status inferWhere(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "the condition mask"));
  HGP_TRY(requireSameFloat(ctx, 1, 0, "A"));
  HGP_TRY(requireSameFloat(ctx, 2, 0, "B"));
  HGP_ASSIGN_OR_RETURN(Shape y, broadcastShapes(ctx.in(0).shape, ctx.in(1).shape));
  HGP_ASSIGN_OR_RETURN(y, broadcastShapes(y, ctx.in(2).shape));
  ctx.outputs = {{ctx.in(1).dtype, y}};
  return Status::ok();
}

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
