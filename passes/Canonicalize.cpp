//===- Canonicalize.cpp - dead nodes and no-op reshapes --------------------------------------===//
//
// Removes nodes none of whose results is read, returned or carried (walking backwards so that
// chains die together), and forwards Reshapes whose result shape equals their input's and
// pooling windows of one element (AlexNet's adaptive 6x6 average pool on a 6x6 map exports as an
// AveragePool of kernel 1), which return their input unchanged. Unused
// constants go too; inputs, parameters and states stay, since they are part of the model's
// interface and checkpoints.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"

#include <algorithm>
#include <set>

namespace hgp {

namespace {

/// A MaxPool or AveragePool whose every window holds exactly its own input element.
bool isIdentityWindow(const Node* n) {
  if (n->op() != OpKind::MaxPool && n->op() != OpKind::AveragePool) return false;
  if (n->outputs().size() != 1 || n->input(0)->shape() != n->output(0)->shape()) return false;
  auto ones = [](const std::vector<int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 1; });
  };
  auto zeros = [](const std::vector<int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 0; });
  };
  const AttrMap& a = n->attrs();
  return !a.getInts("kernel_shape").empty() && ones(a.getInts("kernel_shape")) &&
         ones(a.getInts("strides")) &&
         zeros(a.getInts("pads")) && ones(a.getInts("dilations"));
}

} // namespace

Status runCanonicalize(Graph& g, PassContext& ctx) {
  for (Node* n : std::vector<Node*>(g.nodes())) {
    if (n->op() == OpKind::Reshape && n->input(0)->shape() == n->output(0)->shape()) {
      g.replaceAllUsesWith(n->output(0), n->input(0));
      ++ctx.stats["canonicalize.reshapes-removed"];
    } else if (isIdentityWindow(n)) {
      g.replaceAllUsesWith(n->output(0), n->input(0));
      ++ctx.stats["canonicalize.identity-windows-removed"];
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
