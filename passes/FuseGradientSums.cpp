//===- FuseGradientSums.cpp - a BatchNormBwd reads the two addends of its gradient Sum --------===//
//
// At a residual block's input the gradient of the previous block's output Z is
// Sum(ConvBwdData of the block's first convolution, the shortcut's gradient), and its only reader
// is that block end's BatchNormBwd (fused with its ReluBwd by fuse-batch-norm). The pass folds
// such a Sum into the BatchNormBwd (docs/fusion.md, "Gradient Sums"):
//
//   D = Sum(A, B); (dX, ...) = BatchNormBwd(D, ...)   (plain or fused with ReluBwd)
//     => (dX, ...) = BatchNormBwd{dy_parts=2}(A, ..., B)
//
// Legality: a Sum of exactly two operands of its own type whose result has no other reader,
// is read once, and does not escape. The BatchNormBwd reads both addends where it read dY (sums
// pass and dX pass; a dX pass that reads G needs neither) and adds them in float, rounding once
// to dY's dtype, as the Sum stored them: bit-identical to the unfused ops. Per element, in
// activations moved: at a block end (G written) the Sum's 3 and the fused op's 7 become 8 (A,
// B, Z, X read and G written; G, X read and dX written); without G, 3 + 7 become 9; a plain
// BatchNormBwd's 3 + 5 become 7. One launch less each time.
//
// Whether that pays depends on the kernels: the sums pass then keeps one more stream of loads
// in flight. It is a pass of its own so that `hgpc compile --disable-pass fuse-gradient-sums`
// can measure it (docs/benchmarks.md). Runs after fuse-batch-norm, which leaves dY = dZ.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"

namespace hgp {

namespace {

/// Folds a gradient Sum into the BatchNormBwd that is its only reader, as its dY: the op then
/// takes both addends (dy_parts=2, dY2 last) and adds them as the Sum did. The BatchNormBwd
/// keeps its place; the Sum, and therefore both addends, came before it.
Status foldSum(Graph& g, PassContext& ctx, Node* bwd) {
  if (bwd->attrs().getInt("dy_parts", 1) != 1) return Status::ok();
  Value* dy = bwd->input(0);
  Node* sum = dy->producer();
  if (!sum || sum->op() != OpKind::Sum || sum->numInputs() != 2 || sum->numOutputs() != 1)
    return Status::ok();
  if (soleReader(g, dy) != bwd) return Status::ok(); // read once: only as dY
  Value *a = sum->input(0), *b = sum->input(1);
  if (a->type() != dy->type() || b->type() != dy->type()) return Status::ok();
  std::vector<Value*> inputs = bwd->inputs();
  inputs[0] = a;
  inputs.push_back(b);
  AttrMap attrs = bwd->attrs();
  attrs.setInt("dy_parts", 2);
  g.setInsertionPoint(bwd);
  auto fused = g.addNode(OpKind::BatchNormBwd, inputs, attrs, bwd->name(), bwd->numOutputs());
  g.setInsertionPoint(nullptr);
  if (!fused) return fused.status();
  std::vector<std::pair<Value*, Value*>> take;
  for (size_t i = 0; i < bwd->numOutputs(); ++i) take.push_back({bwd->output(i), (*fused)->output(i)});
  HGP_TRY(takeOverValues(g, ctx, take, {bwd}));
  HGP_TRY(g.eraseNode(sum));
  ++ctx.stats["fuse-gradient-sums.bwd-sum"];
  return Status::ok();
}

} // namespace

Status runFuseGradientSums(Graph& g, PassContext& ctx) {
  // Only the BatchNormBwd being folded (and its Sum, never in this list) is erased.
  std::vector<Node*> bwds;
  for (Node* n : g.nodes())
    if (n->op() == OpKind::BatchNormBwd) bwds.push_back(n);
  for (Node* n : bwds) HGP_TRY(foldSum(g, ctx, n));
  return Status::ok();
}

} // namespace hgp
