//===- MemoryPlan.cpp - place transient tensors by liveness --------------------------------===//
//
// Lifetimes are step intervals over the graph's node order. Greedy-by-size placement (as in
// TFLite's arena planner) keeps the peak close to the true maximum of live bytes on CNNs.
//
// A collective (AllReduce) runs on a stream of its own while later steps compute, and is known
// to be done only where its results are first read. So its operands stay live until then: no
// step in between may reuse their bytes, which would also make it wait for the collective.
//
//===----------------------------------------------------------------------------------------===//
#include "compiler/analysis/MemoryPlan.h"

#include <algorithm>
#include <set>

namespace hgp {

MemoryPlan planMemory(const Graph& g, const std::vector<const Value*>& skip, bool reuse,
                      const ViewPlan* views) {
  struct Interval {
    const Value* v;
    int64_t bytes;
    int first, last;
  };
  std::set<const Value*> skipped(skip.begin(), skip.end());
  std::map<const Node*, int> position;
  int n = int(g.nodes().size());
  for (int i = 0; i < n; ++i) position[g.nodes()[size_t(i)]] = i;
  std::set<const Value*> outputs(g.outputs().begin(), g.outputs().end());
  // Where a collective is joined: the first reader of any of its results.
  auto joinOf = [&](const Node* c) {
    int join = n;
    for (const Value* r : c->outputs())
      for (const Node* u : r->users()) join = std::min(join, position[u]);
    return join;
  };

  // A view's root, and the view's byte offset within it.
  auto rootOf = [&](const Value* v) {
    int64_t offset = 0;
    if (views)
      for (auto it = views->views.find(v); it != views->views.end(); it = views->views.find(v)) {
        offset += it->second.offset;
        v = it->second.parent;
      }
    return std::pair{v, offset};
  };

  // One interval per root, spanning the lifetimes of all its views.
  std::vector<Interval> intervals;
  std::map<const Value*, size_t> intervalOf;
  for (int i = 0; i < n; ++i) {
    for (const Value* v : g.nodes()[size_t(i)]->outputs()) {
      if (skipped.count(v)) continue;
      int last = i;
      for (const Node* u : v->users())
        last = std::max(last, u->op() == OpKind::AllReduce ? joinOf(u) : position[u]);
      if (outputs.count(v)) last = n;
      const Value* root = rootOf(v).first;
      auto [it, fresh] = intervalOf.try_emplace(root, intervals.size());
      if (fresh) intervals.push_back({root, alignUp(root->type().bytes()), i, last});
      Interval& iv = intervals[it->second];
      iv.first = std::min(iv.first, i);
      iv.last = std::max(iv.last, last);
    }
  }
  std::stable_sort(intervals.begin(), intervals.end(),
                   [](const Interval& a, const Interval& b) { return a.bytes > b.bytes; });

  MemoryPlan plan;
  struct Placed {
    int64_t offset, bytes;
    int first, last;
  };
  std::vector<Placed> placed;
  for (const Interval& iv : intervals) {
    // Collect the placed blocks whose lifetimes overlap, by offset, and take the first gap.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Placed& p : placed)
      if (!reuse || (p.first <= iv.last && iv.first <= p.last))
        busy.push_back({p.offset, p.offset + p.bytes});
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [b, e] : busy) {
      if (offset + iv.bytes <= b) break;
      offset = std::max(offset, e);
    }
    placed.push_back({offset, iv.bytes, iv.first, iv.last});
    plan.offsets[iv.v] = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + iv.bytes);
    plan.totalBytes += iv.bytes;
  }
  if (views)
    for (const auto& [v, view] : views->views) {
      auto [root, offset] = rootOf(v);
      plan.offsets[v] = plan.offsets.at(root) + offset;
    }
  return plan;
}

} // namespace hgp
