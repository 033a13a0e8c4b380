// Shape rules for reductions: ReduceMean, ReduceSum and ReduceMax.
#include "ir/OpInfo.h"

namespace hgp {

namespace {
Status reduce(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "input"));
  const Shape& x = ctx.in(0).shape;
  HGP_ASSIGN_OR_RETURN(auto axes, ctx.attrs.requireInts("axes"));
  bool keep = ctx.attrs.getInt("keepdims", 1) != 0;
  std::vector<bool> reduced(x.size());
  int64_t prev = -1;
  for (int64_t a : axes) {
    if (a <= prev || a >= int64_t(x.size())) return ctx.fail("axes must be sorted, unique and in range");
    reduced[size_t(a)] = true;
    prev = a;
  }
  Shape y;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!reduced[i]) y.push_back(x[i]);
    else if (keep) y.push_back(1);
  }
  ctx.outputs = {{ctx.in(0).dtype, y}};
  return Status::ok();
}
} // namespace

Status inferReduceMean(InferContext& ctx) { return reduce(ctx); }
Status inferReduceSum(InferContext& ctx) { return reduce(ctx); }
Status inferReduceMax(InferContext& ctx) { return reduce(ctx); }

} // namespace hgp
