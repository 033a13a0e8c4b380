//===- AddStepCounter.cpp - the iteration counter and dropout's RNG keys --------------------===//
//
// Adds the i64 state `iter`, the number of training iterations run so far. It lives on the
// device so that a replayed CUDA graph sees a new value every step without the host. Every
// Dropout (and every Bernoulli, stochastic depth's mask, and RandomNormal) takes it as its second
// input: its draw is Philox keyed by (seed, site key) with the counter (iter, element),
// reproducible and recomputable by its backward.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"
#include "passes/TrainGraphNames.h"

namespace hgp {

Status runAddStepCounter(Graph& g, PassContext& ctx) {
  Value* iter = g.findValue(names::kIter);
  if (!iter) {
    HGP_ASSIGN_OR_RETURN(iter, g.addGraphValue(names::kIter, TensorRole::State, {DType::I64, {}}));
  }
  for (Node* n : std::vector<Node*>(g.nodes())) {
    bool random = n->op() == OpKind::Dropout || n->op() == OpKind::Bernoulli ||
                  n->op() == OpKind::RandomNormal;
    if (!random || n->numInputs() == 2) continue;
    AttrMap a = n->attrs();
    a.setInt("seed", int64_t(ctx.train.seed));
    g.setInsertionPoint(n);
    HGP_ASSIGN_OR_RETURN(Node * d, g.addNode(n->op(), {n->input(0), iter}, a, n->name()));
    g.setInsertionPoint(nullptr);
    g.replaceAllUsesWith(n->output(0), d->output(0));
    HGP_TRY(g.eraseNode(n));
    ++ctx.stats["add-step-counter.dropouts"];
  }
  return Status::ok();
}

} // namespace hgp
