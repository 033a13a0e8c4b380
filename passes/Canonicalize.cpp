//===- Canonicalize.cpp - dead nodes and no-op reshapes --------------------------------------===//
//
// Removes nodes none of whose results is read, returned or carried (walking backwards so that
// chains die together), and forwards Reshapes whose result shape equals their input's. Unused
// constants go too; inputs, parameters and states stay, since they are part of the model's
// interface and checkpoints.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"

#include <algorithm>
#include <set>

namespace hgp {

Status runCanonicalize(Graph& g, PassContext& ctx) {
  for (Node* n : std::vector<Node*>(g.nodes())) {
    if (n->op() == OpKind::Reshape && n->input(0)->shape() == n->output(0)->shape()) {
      g.replaceAllUsesWith(n->output(0), n->input(0));
      ++ctx.stats["canonicalize.reshapes-removed"];
    }
  }
  std::set<const Value*> live(g.outputs().begin(), g.outputs().end());
  for (const Carry& c : g.carries()) live.insert(c.next);
  std::vector<Node*> order(g.nodes());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* n = *it;
    bool used = std::any_of(n->outputs().begin(), n->outputs().end(), [&](const Value* v) {
      return live.count(v) || !v->users().empty();
    });
    if (used) continue;
    HGP_TRY(g.eraseNode(n));
    ++ctx.stats["canonicalize.nodes-removed"];
  }
  for (Value* v : std::vector<Value*>(g.graphValues()))
    if (v->role() == TensorRole::Const && v->users().empty() && !live.count(v))
      HGP_TRY(g.eraseGraphValue(v));
  return Status::ok();
}

} // namespace hgp
