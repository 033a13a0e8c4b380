//===- EvalMode.cpp - a training-mode forward graph in inference mode ------------------------===//
//
// BatchNormTrain whose batch statistics feed a BnRunningUpdate becomes BatchNorm over the
// running statistics (PyTorch's model.eval()); the update goes. Dropout becomes the identity.
// Nothing is carried: evaluation leaves every state as it was.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"

namespace hgp {

Status runEvalMode(Graph& g, PassContext& ctx) {
  g.mutableCarries().clear();
  for (Node* n : std::vector<Node*>(g.nodes())) {
    if (n->op() == OpKind::Dropout) {
      g.replaceAllUsesWith(n->output(0), n->input(0));
      continue;
    }
    if (n->op() != OpKind::BatchNormTrain) continue;
    Node* update = nullptr;
    for (Node* u : n->output(1)->users())
      if (u->op() == OpKind::BnRunningUpdate && u->input(2) == n->output(1)) update = u;
    if (!update) continue; // No running statistics: PyTorch also normalizes with the batch's.
    AttrMap a;
    a.setFloat("epsilon", n->attrs().getFloat("epsilon"));
    g.setInsertionPoint(n);
    HGP_ASSIGN_OR_RETURN(Node * bn, g.addNode(OpKind::BatchNorm,
                                              {n->input(0), n->input(1), n->input(2),
                                               update->input(0), update->input(1)},
                                              a, n->name()));
    g.setInsertionPoint(nullptr);
    g.replaceAllUsesWith(n->output(0), bn->output(0));
    // Readers of the running update's results (rare: a model that returns them) read the
    // unchanged running statistics instead.
    g.replaceAllUsesWith(update->output(0), update->input(0));
    g.replaceAllUsesWith(update->output(1), update->input(1));
    ++ctx.stats["eval-mode.batchnorms"];
  }
  return runCanonicalize(g, ctx);
}

} // namespace hgp
