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
// Under layout-nhwc (passes/LayoutNhwc.cpp) a filter's cast is read by a Transpose to
// channels-last, and a weight gradient's cast reads a Transpose back to [K, C, R, S]: the group
// does those permutations too (CastGroup's `layouts`), which saves two launches per convolution.
// In fp32 and tf32, where there is no cast, those Transposes are grouped by themselves, into
// CastGroups to their own dtype.
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

/// The Transpose that is the only reader of `v`, if it permutes by `perm`.
Node* onlyTransposeOf(Graph& g, Value* v, const std::vector<int64_t>& perm) {
  Node* t = soleReader(g, v);
  return t && t->op() == OpKind::Transpose && t->attrs().getInts("perm") == perm ? t : nullptr;
}

const std::vector<int64_t> kToLast = {0, 2, 3, 1}, kToFirst = {0, 3, 1, 2};

class CastFuser {
public:
  CastFuser(Graph& g, PassContext& ctx) : g_(g), ctx_(ctx) {}

  Status run() {
    using Key = std::pair<DType, std::string>;
    std::map<Key, std::vector<Entry>> params, grads;
    for (Node* n : g_.nodes()) {
      // Without a cast (fp32, tf32), the filters' Transposes to channels-last and the weight
      // gradients' Transposes back group the same way, as CastGroups to their own dtype.
      if (n->op() == OpKind::Transpose && !escapesGraph(g_, n->output(0))) {
        Key key{n->input(0)->dtype(), dtypeName(n->input(0)->dtype())};
        std::vector<int64_t> perm = n->attrs().getInts("perm");
        Value* x = n->input(0);
        if (perm == kToLast && x->isGraphLevel() && x->role() == TensorRole::Param)
          params[key].push_back({n, x, n->output(0), 1, nullptr});
        else if (perm == kToFirst && readByUpdatesOnly(n->output(0)))
          grads[key].push_back({n, x, n->output(0), 2, nullptr});
        continue;
      }
      if (n->op() != OpKind::Cast || escapesGraph(g_, n->output(0))) continue;
      Key key{n->input(0)->dtype(), n->attrs().getString("to")};
      Entry e{n, n->input(0), n->output(0), 0, nullptr};
      if (n->input(0)->isGraphLevel() && n->input(0)->role() == TensorRole::Param) {
        // A filter cast to 16 bits and then made channels-last (layout-nhwc): both at once.
        if (Node* t = onlyTransposeOf(g_, n->output(0), kToLast))
          e.result = t->output(0), e.layout = 1, e.transpose = t;
        params[key].push_back(e);
      } else if (readByUpdatesOnly(n->output(0))) {
        // A channels-last weight gradient made [K, C, R, S] for the cast alone: both at once.
        Value* x = n->input(0);
        Node* t = x->producer();
        if (t && t->op() == OpKind::Transpose && t->attrs().getInts("perm") == kToFirst &&
            soleReader(g_, x))
          e.input = t->input(0), e.layout = 2, e.transpose = t;
        grads[key].push_back(e);
      }
    }
    for (auto& [key, casts] : params)
      if (casts.size() > 1) HGP_TRY(group(casts, casts.front().cast, key.second, "cast-group/params"));
    for (auto& [key, casts] : grads) {
      std::unordered_map<const Node*, size_t> at;
      for (size_t i = 0; i < g_.nodes().size(); ++i) at[g_.nodes()[i]] = i;
      Node* first = nullptr;
      for (const Entry& e : casts)
        for (Node* u : e.result->users())
          if (!first || at[u] < at[first]) first = u;
      // Every grouped cast's operand must exist before the group's place.
      std::erase_if(casts, [&](const Entry& e) {
        return !e.input->isGraphLevel() && at[e.input->producer()] >= at[first];
      });
      if (casts.size() > 1) HGP_TRY(group(casts, first, key.second, "cast-group/grads"));
    }
    return Status::ok();
  }

private:
  /// One cast of a group: from `input` to the value `result` stands for, with the layout change
  /// of the Transpose folded into it (1: to channels-last, 2: to channels-first; 0: none).
  struct Entry {
    Node* cast;
    Value* input;
    Value* result;
    int64_t layout;
    Node* transpose;
  };

  /// Replaces the entries' casts (and folded Transposes) by one CastGroup inserted before
  /// `before`.
  Status group(const std::vector<Entry>& casts, Node* before, const std::string& to,
               const std::string& name) {
    std::vector<Value*> inputs;
    std::vector<int64_t> layouts;
    for (const Entry& e : casts) inputs.push_back(e.input), layouts.push_back(e.layout);
    AttrMap attrs;
    attrs.setString("to", to);
    if (std::any_of(layouts.begin(), layouts.end(), [](int64_t l) { return l != 0; }))
      attrs.setInts("layouts", layouts);
    g_.setInsertionPoint(before);
    auto grouped = g_.addNode(OpKind::CastGroup, inputs, attrs, name, int(casts.size()));
    g_.setInsertionPoint(nullptr);
    HGP_TRY(grouped.status());
    std::vector<std::pair<Value*, Value*>> take;
    std::vector<Node*> dead;
    for (size_t k = 0; k < casts.size(); ++k) {
      take.push_back({casts[k].result, (*grouped)->output(k)});
      // Readers first: a folded parameter Transpose reads the cast, a folded gradient
      // Transpose is read by it.
      if (casts[k].transpose && casts[k].layout == 1) dead.push_back(casts[k].transpose);
      dead.push_back(casts[k].cast);
      if (casts[k].transpose && casts[k].layout == 2) dead.push_back(casts[k].transpose);
    }
    HGP_TRY(takeOverValues(g_, ctx_, take, dead));
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
