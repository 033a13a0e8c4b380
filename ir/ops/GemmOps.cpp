// Shape rules for matrix products: Gemm and MatMul.
#include "ir/OpInfo.h"

namespace hgp {

Status inferGemm(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "A"));
  HGP_TRY(requireSameFloat(ctx, 1, 0, "B"));
  const Shape &a = ctx.in(0).shape, &b = ctx.in(1).shape;
  if (a.size() != 2 || b.size() != 2) return ctx.fail("Gemm needs 2-D A and B");
  bool ta = ctx.attrs.getInt("transA", 0), tb = ctx.attrs.getInt("transB", 0);
  int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1];
  int64_t kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (k != kb)
    return ctx.fail("inner dims differ: A " + shapeToString(a) + (ta ? "^T" : "") + " and B " +
                    shapeToString(b) + (tb ? "^T" : ""));
  if (ctx.numInputs() == 3) {
    HGP_TRY(requireSameFloat(ctx, 2, 0, "C"));
    HGP_ASSIGN_OR_RETURN(Shape bc, broadcastShapes(ctx.in(2).shape, {m, n}));
    if (bc != Shape{m, n}) return ctx.fail("C does not broadcast to [M, N]");
  }
  ctx.outputs = {{ctx.in(0).dtype, {m, n}}};
  return Status::ok();
}

Status inferMatMul(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "A"));
  HGP_TRY(requireSameFloat(ctx, 1, 0, "B"));
  Shape a = ctx.in(0).shape, b = ctx.in(1).shape;
  if (a.empty() || b.empty()) return ctx.fail("MatMul operands must have rank 1 or more");
  bool va = a.size() == 1, vb = b.size() == 1;
  if (va) a.insert(a.begin(), 1);
  if (vb) b.push_back(1);
  if (a.back() != b[b.size() - 2])
    return ctx.fail("inner dims differ: " + shapeToString(ctx.in(0).shape) + " x " +
                    shapeToString(ctx.in(1).shape));
  Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  HGP_ASSIGN_OR_RETURN(Shape batch, broadcastShapes(ba, bb));
  Shape y = batch;
  if (!va) y.push_back(a[a.size() - 2]);
  if (!vb) y.push_back(b.back());
  ctx.outputs = {{ctx.in(0).dtype, y}};
  return Status::ok();
}

} // namespace hgp
