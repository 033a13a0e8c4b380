//===- RecognizeSilu.cpp - the exporters' x * sigmoid(x) as one Silu -------------------------===//
//
// ONNX has no SiLU before opset 24, so torch.onnx writes nn.SiLU() (EfficientNet's activation, and
// the gate of its squeeze-excitation's first half) as Mul(x, Sigmoid(x)). The pair costs two
// instructions and two roundings where PyTorch computes silu(x) in float and rounds once, and its
// gradient is three ops (Mul, SigmoidBwd and a Sum). This pass replaces every Mul whose operands
// are x and Sigmoid(x), the Sigmoid read by nothing else, by one Silu, whose forward and backward
// are one instruction each; fuse-batch-norm then folds a Silu after a BatchNorm into it. A
// Sigmoid with other readers (a gate that is also used alone) stays as it is.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"

#include <set>

namespace hgp {

Status runRecognizeSilu(Graph& g, PassContext& ctx) {
  std::set<const Value*> escaping(g.outputs().begin(), g.outputs().end());
  for (const Carry& c : g.carries()) escaping.insert(c.next);
  for (Node* n : std::vector<Node*>(g.nodes())) {
    if (n->op() != OpKind::Mul || n->numInputs() != 2) continue;
    Value* x = nullptr;
    for (size_t i = 0; i < 2 && !x; ++i) {
      Value* s = n->input(i);
      Node* sig = s->producer();
      if (sig && sig->op() == OpKind::Sigmoid && sig->input(0) == n->input(1 - i) &&
          s->users().size() == 1 && !escaping.count(s))
        x = n->input(1 - i);
    }
    if (!x || x->type() != n->output(0)->type()) continue;
    g.setInsertionPoint(n);
    HGP_ASSIGN_OR_RETURN(Node * silu, g.addNode(OpKind::Silu, {x}, AttrMap{}, n->name()));
    g.setInsertionPoint(nullptr);
    g.replaceAllUsesWith(n->output(0), silu->output(0));
    ++ctx.stats["recognize-silu.silus"];
  }
  return runCanonicalize(g, ctx); // the Sigmoids and Muls are dead now
}

} // namespace hgp
