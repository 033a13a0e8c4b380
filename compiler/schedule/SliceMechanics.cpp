#include "compiler/schedule/SliceMechanics.h"

#include "compiler/schedule/ByteRanges.h"

#include <queue>

namespace hgp {

namespace {

/// A slice in the layer-by-layer order, with the bytes it touches.
struct Node {
  PlanStep step;
  StepSlicing info;
  int member = 0;
  std::vector<ByteRange> inputs, reads, writes; ///< reads: inputs plus an accumulated result
};

Node node(const Plan& plan, const PlanStep& s, StepSlicing info, int member, bool accumulates) {
  Node n{s, info, member, {}, {}, {}};
  appendByteRanges(plan, s.inputs, n.inputs);
  n.reads = n.inputs;
  appendByteRanges(plan, s.outputs, n.writes);
  if (accumulates && s.attrs.getInt("accumulate", 0)) appendByteRanges(plan, s.outputs, n.reads);
  return n;
}

} // namespace

bool SliceBuilder::divides(const PlanStep& s, const BatchOperands& b, int n) const {
  if (n < 1 || b.batch % n) return false;
  auto ok = [&](const std::vector<int>& ts, const std::vector<bool>& batched) {
    // A pitched view (a channel range of a Concat written in place) is not cut: its rows are
    // not its bytes, and a slice of it would be a pitched tensor that is no view.
    for (size_t i = 0; i < ts.size(); ++i)
      if (batched[i] && ((plan_.tensors[size_t(ts[i])].bytes() / n) % 64 ||
                         plan_.tensors[size_t(ts[i])].pitched()))
        return false;
    return true;
  };
  return ok(s.inputs, b.in) && ok(s.outputs, b.out);
}

bool SliceBuilder::conflict(const PlanStep& a, const PlanStep& b) const {
  std::vector<ByteRange> ra, wa, rb, wb;
  appendByteRanges(plan_, a.inputs, ra);
  appendByteRanges(plan_, a.outputs, wa);
  appendByteRanges(plan_, b.inputs, rb);
  appendByteRanges(plan_, b.outputs, wb);
  return overlap(ra, wb) || overlap(wa, rb) || overlap(wa, wb);
}

int SliceBuilder::sliceTensor(int parent, int j, int n) {
  auto key = std::make_tuple(parent, j, n);
  auto it = slices_.find(key);
  if (it != slices_.end()) return it->second;
  PlanTensor t = plan_.tensors[size_t(parent)];
  int64_t bytes = t.bytes() / n;
  t.name += "#" + std::to_string(j) + "/" + std::to_string(n);
  t.type.shape[0] /= n;
  t.offset += j * bytes;
  t.init = InitKind::None;
  t.alias = AliasKind::None; // a slice shares its parent's bytes without being a view
  t.aliasOf = -1;
  plan_.tensors.push_back(t);
  int id = int(plan_.tensors.size()) - 1;
  slices_[key] = id;
  return id;
}

PlanStep SliceBuilder::sliceStep(const PlanStep& s, const BatchOperands& b, int j, int n) {
  PlanStep p = s;
  for (size_t i = 0; i < p.inputs.size(); ++i)
    if (b.in[i]) p.inputs[i] = sliceTensor(s.inputs[i], j, n);
  for (size_t i = 0; i < p.outputs.size(); ++i)
    if (b.out[i]) p.outputs[i] = sliceTensor(s.outputs[i], j, n);
  for (const char* attr : {"x_shape", "shape"}) {
    if (!p.attrs.has(attr)) continue;
    std::vector<int64_t> v = p.attrs.getInts(attr);
    if (!v.empty() && v[0] == b.batch) v[0] /= n;
    p.attrs.setInts(attr, std::move(v));
  }
  if (b.accumulates && (j > 0 || s.attrs.getInt("accumulate", 0))) p.attrs.setInt("accumulate", 1);
  return p;
}

SlicedRun SliceBuilder::sliceRun(const std::vector<const PlanStep*>& members,
                                 const std::vector<const BatchOperands*>& operands,
                                 const std::vector<int>& width, int m) {
  // The layer-by-layer order: every member's slices in a row.
  SlicedRun run;
  std::vector<Node> nodes;
  for (size_t p = 0; p < members.size(); ++p) {
    const PlanStep& s = *members[p];
    const BatchOperands& b = *operands[p];
    int n = m * width[p];
    size_t first = nodes.size();
    if (n > 1) {
      for (int j = 0; j < n; ++j)
        nodes.push_back(node(plan_, sliceStep(s, b, j, n),
                             {width[p], m, j / width[p], j % width[p]}, int(p), b.accumulates));
      // Slice j must not overwrite what a later slice of the same step reads.
      bool ok = true;
      for (size_t a = first; a < nodes.size() && ok; ++a)
        for (size_t c = a + 1; c < nodes.size() && ok; ++c)
          ok = !overlap(nodes[a].writes, nodes[c].inputs);
      if (ok) {
        ++run.splitMembers;
        continue;
      }
      nodes.resize(first);
    }
    nodes.push_back(node(plan_, s, {}, int(p), b.accumulates));
  }

  // Any topological order of the conflicts among those slices computes the same; take the one
  // that runs micro-batch i of every member before micro-batch i + 1 of any.
  size_t n = nodes.size();
  std::vector<std::vector<int>> succ(n);
  std::vector<int> indeg(n, 0);
  for (size_t b = 0; b < n; ++b)
    for (size_t a = 0; a < b; ++a)
      if (overlap(nodes[b].reads, nodes[a].writes) || overlap(nodes[b].writes, nodes[a].reads) ||
          overlap(nodes[b].writes, nodes[a].writes)) {
        succ[a].push_back(int(b));
        ++indeg[b];
      }
  using Key = std::tuple<int, int, int, int>; // micro, member, part, node
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> ready;
  auto push = [&](size_t x) {
    ready.push({nodes[x].info.micro, nodes[x].member, nodes[x].info.part, int(x)});
  };
  for (size_t x = 0; x < n; ++x)
    if (indeg[x] == 0) push(x);
  while (!ready.empty()) {
    int x = std::get<3>(ready.top());
    ready.pop();
    run.steps.push_back(std::move(nodes[size_t(x)].step));
    run.info.push_back(nodes[size_t(x)].info);
    for (int y : succ[size_t(x)])
      if (--indeg[size_t(y)] == 0) push(size_t(y));
  }
  return run;
}

} // namespace hgp
