//===- AllReduceGradients.cpp - data parallelism: average what the ranks computed -----------===//
//
// With --ranks N > 1 every rank runs the same step on its own shard of the global batch, so
// before the update each parameter's gradient must become the mean over the ranks (the gradient
// of the loss over the global batch, since each rank's loss is a mean over its shard). The loss
// and the accuracy count are averaged too: the metrics then describe the global batch, and the
// finiteness check sees the same values on every rank, so all ranks skip or apply a step alike.
//
// The values are grouped into buckets, as PyTorch's DDP does: in the order they become final in
// the backward pass (the position of their producer), each bucket filled up to the byte cap
// (--bucket-mb; a larger gradient is a bucket of its own). Each bucket is one AllReduce node,
// inserted right after the node that finalizes its last member, so its communication can run
// while the rest of the backward pass computes. The reduced values take over the original
// names (the originals become NAME.local), so bindings and later passes see the mean.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"
#include "passes/TrainGraphNames.h"

#include <algorithm>
#include <map>

namespace hgp {

namespace {

struct Item {
  Value* value;
  long ready;      ///< Position of the producer in the node order; -1 for graph-level values.
  long paramIndex; ///< Into PassContext::paramGrads, or -1 for the loss and the count.
};

} // namespace

Status runAllReduceGradients(Graph& g, PassContext& ctx) {
  const TrainOptions& o = ctx.train;
  if (o.ranks <= 1) return Status::ok();
  std::map<const Node*, long> pos;
  for (size_t i = 0; i < g.nodes().size(); ++i) pos[g.nodes()[i]] = long(i);
  auto readyOf = [&](const Value* v) { return v->producer() ? pos.at(v->producer()) : -1L; };

  std::vector<Item> items;
  for (const char* name : {names::kLoss, names::kCorrect})
    if (Value* v = g.findValue(name)) items.push_back({v, readyOf(v), -1});
  for (size_t k = 0; k < ctx.paramGrads.size(); ++k)
    items.push_back({ctx.paramGrads[k].second, readyOf(ctx.paramGrads[k].second), long(k)});
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.ready < b.ready; });

  std::vector<std::vector<Item>> buckets;
  int64_t filled = 0;
  for (const Item& it : items) {
    int64_t bytes = it.value->type().bytes();
    if (buckets.empty() || (filled > 0 && filled + bytes > o.bucketBytes)) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(it);
    filled += bytes;
  }

  // Anchor each bucket before the node that follows its last member's producer; compute all
  // anchors first, since inserting moves positions.
  std::vector<Node*> anchors;
  std::vector<long> readyAt;
  for (const auto& b : buckets) {
    long ready = -1;
    for (const Item& it : b) ready = std::max(ready, it.ready);
    size_t next = size_t(ready + 1);
    anchors.push_back(next < g.nodes().size() ? g.nodes()[next] : nullptr);
    readyAt.push_back(ready);
  }

  for (size_t b = 0; b < buckets.size(); ++b) {
    std::vector<Value*> ins;
    std::vector<std::string> outNames;
    int64_t bytes = 0;
    for (const Item& it : buckets[b]) {
      Value* v = it.value;
      std::string name = v->name();
      HGP_TRY(g.renameValue(v, g.uniqueName(name + ".local")));
      ins.push_back(v);
      outNames.push_back(name);
      bytes += v->type().bytes();
    }
    AttrMap a;
    a.setString("reduce", "avg");
    a.setInt("ranks", o.ranks);
    a.setInt("bucket", int64_t(b));
    a.setInt("bytes", bytes);
    g.setInsertionPoint(anchors[b]);
    auto node = g.addNode(OpKind::AllReduce, ins, a, "allreduce/bucket" + std::to_string(b),
                          int(ins.size()), TensorRole::Gradient, outNames);
    g.setInsertionPoint(nullptr);
    if (!node) return node.status();
    Node* n = *node;
    for (size_t i = 0; i < ins.size(); ++i) {
      Value* reduced = n->output(i);
      reduced->setRole(ins[i]->role());
      // Readers after the bucket now read the mean. Readers before it (the --sync-bn
      // statistics' gradients use a BN scale's and bias's local sums) keep the local value.
      for (Node* u : std::vector<Node*>(ins[i]->users())) {
        auto at = pos.find(u);
        if (u == n || at == pos.end() || at->second <= readyAt[b]) continue;
        for (size_t k = 0; k < u->numInputs(); ++k)
          if (u->input(k) == ins[i]) u->setInput(k, reduced);
      }
      for (Value*& out : g.mutableOutputs())
        if (out == ins[i]) out = reduced;
      for (Carry& c : g.mutableCarries())
        if (c.next == ins[i]) c.next = reduced;
      const Item& it = buckets[b][i];
      if (it.paramIndex >= 0) ctx.paramGrads[size_t(it.paramIndex)].second = reduced;
    }
    ctx.stats["all-reduce-gradients.bytes"] += bytes;
  }
  ctx.stats["all-reduce-gradients.buckets"] += int64_t(buckets.size());
  return Status::ok();
}

} // namespace hgp
