//===- FoldGemmTransposes.cpp - a transposed matrix operand becomes a Gemm flag ---------------===//
//
// torch.onnx's TorchScript exporter writes nn.Linear on an input of rank 3 or more (ConvNeXt's
// MLP on [N, H, W, C]) as MatMul(x, Transpose(W, perm=[1, 0])) with W the [out, in] parameter.
// Executed as written, the step transposes every weight into a copy each iteration, and autodiff
// adds the copy's gradient Transpose back (ConvNeXt-Tiny: 36 of each). This pass rewrites such a
// MatMul as a Gemm with transB=1 on W itself, the batch dims folded into the rows by Reshapes
// (views in the memory plan):
//
//   MatMul(x[..., M, K], Transpose(W[N, K]))  ->  Reshape(Gemm(Reshape(x, [rows, K]), W,
//                                                              transB=1), [..., M, N])
//
// and, where the first operand is a Transpose of a matrix too, sets transA. Gemm's gradient
// (passes/autodiff/GemmGrad.cpp) is then two Gemms whose weight gradient comes out in W's own
// [N, K] shape, so neither the weight nor its gradient is ever transposed. A Transpose that other
// nodes read stays for them. The values computed are the same products; only the operand order
// in memory that cuBLAS (or the CPU's sgemm) reads changes. It runs in the forward pipeline, so
// the train and eval graphs and forward-only plans all get it.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"

namespace hgp {

namespace {

/// W when `v` is Transpose(W, perm=[1, 0]) of a matrix, else null.
Value* transposedMatrix(const Value* v) {
  const Node* t = v->producer();
  if (!t || t->op() != OpKind::Transpose || t->input(0)->rank() != 2) return nullptr;
  return t->attrs().getInts("perm") == std::vector<int64_t>{1, 0} ? t->input(0) : nullptr;
}

/// A Reshape of `v` to `shape`, before the insertion point.
Expected<Value*> reshaped(Graph& g, Value* v, const Shape& shape, const std::string& name) {
  AttrMap a;
  a.setInts("shape", shape);
  HGP_ASSIGN_OR_RETURN(Node * r, g.addNode(OpKind::Reshape, {v}, a, name));
  return r->output(0);
}

Status fold(Graph& g, PassContext& ctx, Node* n) {
  Value *a = n->input(0), *b = n->input(1);
  Value *wa = a->rank() == 2 ? transposedMatrix(a) : nullptr, *wb = transposedMatrix(b);
  g.setInsertionPoint(n);
  Value* rows = wa ? wa : a;
  if (a->rank() > 2) {
    int64_t k = a->shape().back();
    HGP_ASSIGN_OR_RETURN(rows, reshaped(g, a, Shape{a->type().numElements() / k, k},
                                        n->name() + "/rows"));
  }
  AttrMap attrs;
  attrs.setFloat("alpha", 1.0);
  attrs.setFloat("beta", 1.0);
  attrs.setInt("transA", wa != nullptr);
  attrs.setInt("transB", 1);
  HGP_ASSIGN_OR_RETURN(Node * gemm, g.addNode(OpKind::Gemm, {rows, wb}, attrs, n->name()));
  Value* y = gemm->output(0);
  if (a->rank() > 2) {
    HGP_ASSIGN_OR_RETURN(y, reshaped(g, y, n->output(0)->shape(), n->name() + "/unrows"));
  }
  g.setInsertionPoint(nullptr);
  HGP_TRY(takeOverValues(g, ctx, {{n->output(0), y}}, {n}));
  ++ctx.stats["fold-gemm-transposes.matmuls"];
  // The Transposes nothing else reads go too.
  std::vector<Value*> folded = {b};
  if (wa && a != b) folded.push_back(a);
  for (Value* v : folded)
    if (v->users().empty() && !escapesGraph(g, v)) {
      HGP_TRY(g.eraseNode(v->producer()));
      ++ctx.stats["fold-gemm-transposes.transposes-removed"];
    }
  return Status::ok();
}

} // namespace

Status runFoldGemmTransposes(Graph& g, PassContext& ctx) {
  for (Node* n : std::vector<Node*>(g.nodes()))
    if (n->op() == OpKind::MatMul && n->input(0)->rank() >= 2 && transposedMatrix(n->input(1)))
      HGP_TRY(fold(g, ctx, n));
  return Status::ok();
}

} // namespace hgp
