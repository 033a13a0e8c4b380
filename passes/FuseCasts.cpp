//===- FuseCasts.cpp - the parameter casts of mixed precision, one launch per group ---------===//
//
// Mixed precision (passes/MixedPrecision.cpp) casts every float32 master weight to 16 bits
// before its first use, and autodiff casts each weight gradient back to float32 for the
// optimizer. That is two launches per parameter and step, most of them on tensors of a few
// kilobytes: ResNet-50 in bf16 spent about 1 ms per step in 113 Cast launches on an H200, while
// the optimizer updates all 161 parameters in one. This pass gathers them (docs/fusion.md):
//
//   parameter casts  every Cast of a parameter (a graph-level value of role param) into one
//                    CastGroup at the place of the first of them; parameters are defined before
//                    any node, and each former reader still comes after that place;
//   gradient casts   every Cast whose readers are all optimizer updates or the finiteness check
//                    (the weight gradients in float32) into one CastGroup right before the first
//                    of those readers, when every cast's operand is defined before it. A cast an
//                    all-reduce reads (data parallelism) stays where it is, so the buckets still
//                    start while the backward pass runs.
//
// Casts are grouped by (source dtype, `to`); a group of one stays a Cast. The values keep their
// names, so plans, checkpoints and bindings read the same. Casting is exact per element, so the
// grouped plan computes bit for bit what the ungrouped one does. Runs last in the train and eval
// pipelines; --no-fuse leaves it out with the other fuse-* passes.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace hgp {

namespace {

bool readByUpdatesOnly(const Value* v) {
  if (v->users().empty()) return false;
  for (const Node* u : v->users())
    if (u->op() != OpKind::SgdUpdate && u->op() != OpKind::AdamUpdate &&
        u->op() != OpKind::CheckFinite)
      return false;
  return true;
}

class CastFuser {
public:
  CastFuser(Graph& g, PassContext& ctx) : g_(g), ctx_(ctx) {}

  Status run() {
    using Key = std::pair<DType, std::string>;
    std::map<Key, std::vector<Node*>> params, grads;
    for (Node* n : g_.nodes()) {
      if (n->op() != OpKind::Cast || escapesGraph(g_, n->output(0))) continue;
      Key key{n->input(0)->dtype(), n->attrs().getString("to")};
      if (n->input(0)->isGraphLevel() && n->input(0)->role() == TensorRole::Param)
        params[key].push_back(n);
      else if (readByUpdatesOnly(n->output(0)))
        grads[key].push_back(n);
    }
    for (auto& [key, casts] : params)
      if (casts.size() > 1) HGP_TRY(group(casts, casts.front(), key.second, "cast-group/params"));
    for (auto& [key, casts] : grads) {
      std::unordered_map<const Node*, size_t> at;
      for (size_t i = 0; i < g_.nodes().size(); ++i) at[g_.nodes()[i]] = i;
      Node* first = nullptr;
      for (Node* c : casts)
        for (Node* u : c->output(0)->users())
          if (!first || at[u] < at[first]) first = u;
      // Every grouped cast's operand must exist before the group's place.
      std::erase_if(casts, [&](Node* c) {
        const Value* x = c->input(0);
        return !x->isGraphLevel() && at[x->producer()] >= at[first];
      });
      if (casts.size() > 1) HGP_TRY(group(casts, first, key.second, "cast-group/grads"));
    }
    return Status::ok();
  }

private:
  /// Replaces `casts` by one CastGroup inserted before `before`.
  Status group(const std::vector<Node*>& casts, Node* before, const std::string& to,
               const std::string& name) {
    std::vector<Value*> inputs;
    for (Node* c : casts) inputs.push_back(c->input(0));
    AttrMap attrs;
    attrs.setString("to", to);
    g_.setInsertionPoint(before);
    auto grouped = g_.addNode(OpKind::CastGroup, inputs, attrs, name, int(casts.size()));
    g_.setInsertionPoint(nullptr);
    HGP_TRY(grouped.status());
    std::vector<std::pair<Value*, Value*>> take;
    for (size_t k = 0; k < casts.size(); ++k) take.push_back({casts[k]->output(0), (*grouped)->output(k)});
    HGP_TRY(takeOverValues(g_, ctx_, take, casts));
    return Status::ok();
  }

  Graph& g_;
  PassContext& ctx_;
};

} // namespace

Status runFuseCasts(Graph& g, PassContext& ctx) {
  return CastFuser(g, ctx).run();
}

} // namespace hgp
