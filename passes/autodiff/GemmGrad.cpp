// Gradient rules for matrix products.
#include "passes/autodiff/GradContext.h"

namespace hgp {

namespace {
AttrMap gemmAttrs(bool ta, bool tb, double alpha) {
  AttrMap a;
  a.setInt("transA", ta);
  a.setInt("transB", tb);
  a.setFloat("alpha", alpha);
  a.setFloat("beta", 0.0);
  return a;
}

Expected<Value*> transposeLastTwo(GradContext& ctx, Value* v) {
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < v->rank(); ++i) perm.push_back(i);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  AttrMap a;
  a.setInts("perm", perm);
  return ctx.emit1(OpKind::Transpose, {v}, a);
}
} // namespace

// Y = alpha * op(A) op(B) + beta * C, with op = transpose where the flag is set.
Status gradGemm(GradContext& ctx) {
  Value* dy = ctx.outGrad(0);
  bool ta = ctx.attrs().getInt("transA", 0), tb = ctx.attrs().getInt("transB", 0);
  double alpha = ctx.attrs().getFloat("alpha", 1.0), beta = ctx.attrs().getFloat("beta", 1.0);
  Value *a = ctx.in(0), *b = ctx.in(1);
  if (ctx.needs(0)) {
    // dop(A) = alpha dY op(B)^T; dA is that, or its transpose when A was transposed.
    HGP_ASSIGN_OR_RETURN(Value * da, ta ? ctx.emit1(OpKind::Gemm, {b, dy}, gemmAttrs(tb, true, alpha))
                                        : ctx.emit1(OpKind::Gemm, {dy, b}, gemmAttrs(false, !tb, alpha)));
    ctx.setInputGrad(0, da);
  }
  if (ctx.needs(1)) {
    // dop(B) = alpha op(A)^T dY.
    HGP_ASSIGN_OR_RETURN(Value * db, tb ? ctx.emit1(OpKind::Gemm, {dy, a}, gemmAttrs(true, ta, alpha))
                                        : ctx.emit1(OpKind::Gemm, {a, dy}, gemmAttrs(!ta, false, alpha)));
    ctx.setInputGrad(1, db);
  }
  if (ctx.node().numInputs() == 3 && ctx.needs(2)) {
    HGP_ASSIGN_OR_RETURN(Value * dc, ctx.unbroadcast(dy, ctx.in(2)->shape()));
    HGP_ASSIGN_OR_RETURN(dc, ctx.scale(dc, beta));
    ctx.setInputGrad(2, dc);
  }
  return Status::ok();
}

// A[..., M, K] times one matrix B[K, N]: a Linear layer applied at every position (ConvNeXt's
// MLP on [N, H, W, C]). The batch dims fold into the rows, so each gradient is one Gemm on the
// [rows, K] and [rows, N] views (reshapes alias their input): dA = dY B^T, dB = A^T dY, with no
// transpose copy and no sum over a batch of per-matrix products.
Status gradRowsTimesMatrix(GradContext& ctx) {
  Shape a = ctx.in(0)->shape(), b = ctx.in(1)->shape();
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < a.size(); ++i) rows *= a[i];
  HGP_ASSIGN_OR_RETURN(Value * dy, ctx.reshape(ctx.outGrad(0), Shape{rows, b[1]}));
  if (ctx.needs(0)) {
    HGP_ASSIGN_OR_RETURN(Value * da, ctx.emit1(OpKind::Gemm, {dy, ctx.in(1)}, gemmAttrs(false, true, 1.0)));
    HGP_ASSIGN_OR_RETURN(da, ctx.reshape(da, a));
    ctx.setInputGrad(0, da);
  }
  if (ctx.needs(1)) {
    HGP_ASSIGN_OR_RETURN(Value * av, ctx.reshape(ctx.in(0), Shape{rows, b[0]}));
    HGP_ASSIGN_OR_RETURN(Value * db, ctx.emit1(OpKind::Gemm, {av, dy}, gemmAttrs(true, false, 1.0)));
    ctx.setInputGrad(1, db);
  }
  return Status::ok();
}

// Numpy matmul: 1-D operands are promoted to matrices, batch dims broadcast. The gradients are
// the products with the other operand transposed, summed back over broadcast batch dims.
Status gradMatMul(GradContext& ctx) {
  Shape a = ctx.in(0)->shape(), b = ctx.in(1)->shape();
  if (a.size() >= 3 && b.size() == 2) return gradRowsTimesMatrix(ctx);
  Shape ap = a.size() == 1 ? Shape{1, a[0]} : a;
  Shape bp = b.size() == 1 ? Shape{b[0], 1} : b;
  Shape yp = ctx.outGrad(0)->shape();
  if (a.size() == 1) yp.insert(yp.end() - (b.size() == 1 ? 0 : 1), 1);
  if (b.size() == 1) yp.push_back(1);
  HGP_ASSIGN_OR_RETURN(Value * dy, ctx.reshape(ctx.outGrad(0), yp));
  if (ctx.needs(0)) {
    HGP_ASSIGN_OR_RETURN(Value * bv, ctx.reshape(ctx.in(1), bp));
    HGP_ASSIGN_OR_RETURN(Value * bt, transposeLastTwo(ctx, bv));
    HGP_ASSIGN_OR_RETURN(Value * da, ctx.emit1(OpKind::MatMul, {dy, bt}));
    HGP_ASSIGN_OR_RETURN(da, ctx.unbroadcast(da, ap));
    HGP_ASSIGN_OR_RETURN(da, ctx.reshape(da, a));
    ctx.setInputGrad(0, da);
  }
  if (ctx.needs(1)) {
    HGP_ASSIGN_OR_RETURN(Value * av, ctx.reshape(ctx.in(0), ap));
    HGP_ASSIGN_OR_RETURN(Value * at, transposeLastTwo(ctx, av));
    HGP_ASSIGN_OR_RETURN(Value * db, ctx.emit1(OpKind::MatMul, {at, dy}));
    HGP_ASSIGN_OR_RETURN(db, ctx.unbroadcast(db, bp));
    HGP_ASSIGN_OR_RETURN(db, ctx.reshape(db, b));
    ctx.setInputGrad(1, db);
  }
  return Status::ok();
}

} // namespace hgp
