//===- FoldSliceGradients.cpp - the gradients of Slices that tile a tensor are one Concat ------===//
//
// Exporters lower `x.chunk(k, dim)` and `torch.split` to Slices (ShuffleNet-v2's channel split,
// inception branches, GLU halves). Autodiff gives each Slice a SliceBwd, which writes a full
// tensor of x's shape, zero outside its range, and adds them with one Sum:
//
//   dX = Sum(SliceBwd(dA, [0, a)), SliceBwd(dB, [a, n)), ...)      along one axis
//     => dX = Concat(dA, dB, ...)                                   when the ranges tile [0, n)
//
// In tensors of x's size, k SliceBwds and their Sum move 2k + 2 (each SliceBwd reads its part and
// writes all of x; the Sum reads k and writes one), the Concat 2: for k = 2, 6 against 2, and 3
// launches against 1. The Concat is also a candidate for the memory
// plan's in-place Concat (compiler/analysis/Views.h), where it costs nothing.
//
// Legality: every folded SliceBwd has steps of 1, is full along every dim but one common axis,
// shares x_shape and dtype with the others, and is read only by the Sum. Operands of the Sum
// that are not such SliceBwds (x read by another op too) stay addends of a smaller Sum. The
// result is bit-identical: each element of dX was one dY element plus zeros.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"

#include <algorithm>

namespace hgp {

namespace {

/// A SliceBwd operand of a Sum that may fold: its dY, the sliced axis and its range.
struct Part {
  Node* bwd = nullptr;
  int64_t axis = -1, start = 0, end = 0;
};

/// The part `v` is, when its producer is a SliceBwd of step 1 along exactly one axis that the
/// Sum alone reads. An unsliced SliceBwd (a copy) has axis -1 and does not fold.
bool asPart(const Graph& g, const Node* sum, Value* v, Part& p) {
  Node* n = v->producer();
  if (!n || n->op() != OpKind::SliceBwd || soleReader(g, v) != sum) return false;
  const AttrMap& a = n->attrs();
  std::vector<int64_t> st = a.getInts("starts"), en = a.getInts("ends"), sp = a.getInts("steps");
  std::vector<int64_t> x = a.getInts("x_shape");
  if (st.size() != x.size() || en.size() != x.size() || sp.size() != x.size()) return false;
  p = {n, -1, 0, 0};
  for (size_t i = 0; i < x.size(); ++i) {
    if (sp[i] != 1) return false;
    if (st[i] == 0 && en[i] == x[i]) continue;
    if (p.axis >= 0) return false; // sliced along two axes
    p = {n, int64_t(i), st[i], en[i]};
  }
  return p.axis >= 0;
}

/// Folds the SliceBwd operands of `sum` that tile one axis into a Concat of their dYs.
Status foldSum(Graph& g, PassContext& ctx, Node* sum) {
  std::vector<Part> parts;
  std::vector<Value*> rest;
  for (Value* v : sum->inputs()) {
    Part p;
    if (asPart(g, sum, v, p)) parts.push_back(p);
    else rest.push_back(v);
  }
  if (parts.size() < 2) return Status::ok();
  const Node* first = parts[0].bwd;
  for (const Part& p : parts)
    if (p.axis != parts[0].axis || p.bwd->attrs().getInts("x_shape") != first->attrs().getInts("x_shape") ||
        p.bwd->input(0)->dtype() != first->input(0)->dtype())
      return Status::ok();
  std::sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return a.start < b.start; });
  int64_t at = 0, n = first->attrs().getInts("x_shape")[size_t(parts[0].axis)];
  for (const Part& p : parts) {
    if (p.start != at) return Status::ok(); // a gap or an overlap
    at = p.end;
  }
  if (at != n) return Status::ok();

  std::vector<Value*> dys;
  for (const Part& p : parts) dys.push_back(p.bwd->input(0));
  AttrMap a;
  a.setInt("axis", parts[0].axis);
  g.setInsertionPoint(sum);
  // Named after the first slice's gradient: "/stage2/stage2.1/Slice/bwd/concat".
  auto cat = g.addNode(OpKind::Concat, dys, a, parts[0].bwd->name() + "/concat", 1,
                       TensorRole::Gradient);
  Expected<Node*> summed = cat;
  if (cat && !rest.empty()) {
    rest.push_back((*cat)->output(0));
    summed = g.addNode(OpKind::Sum, rest, {}, sum->name(), 1, TensorRole::Gradient);
  }
  g.setInsertionPoint(nullptr);
  if (!summed) return summed.status();
  HGP_TRY(takeOverValues(g, ctx, {{sum->output(0), (*summed)->output(0)}}, {sum}));
  for (const Part& p : parts) HGP_TRY(g.eraseNode(p.bwd));
  ++ctx.stats["fold-slice-gradients.concats"];
  return Status::ok();
}

} // namespace

Status runFoldSliceGradients(Graph& g, PassContext& ctx) {
  std::vector<Node*> sums;
  for (Node* n : g.nodes())
    if (n->op() == OpKind::Sum && n->numOutputs() == 1) sums.push_back(n);
  for (Node* n : sums) HGP_TRY(foldSum(g, ctx, n));
  return Status::ok();
}

} // namespace hgp
