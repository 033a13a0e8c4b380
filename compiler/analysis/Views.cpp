//===- Views.cpp - Reshape, Slice, Split and Concat as views ---------------------------------===//
//
// Nodes are taken in graph order; a value keeps the first parent it is given. A Concat is made
// in place only when every operand can be a part (all or nothing: a Concat that still runs
// must read every operand from bytes of its own), and a Split only when every result can be a
// view.
//
//===----------------------------------------------------------------------------------------===//
#include "compiler/analysis/Views.h"

#include "compiler/analysis/MemoryPlan.h"

#include <optional>

namespace hgp {

namespace {

class ViewFinder {
public:
  ViewFinder(const std::set<const Value*>& unplaced) : unplaced_(unplaced) {}

  ViewPlan run(const Graph& g) {
    for (const Node* n : g.nodes()) {
      switch (n->op()) {
      case OpKind::Reshape: reshape(n); break;
      case OpKind::Slice: slice(n); break;
      case OpKind::Split: split(n); break;
      case OpKind::Concat: concat(n); break;
      default: break;
      }
    }
    return std::move(plan_);
  }

private:
  /// A transient node result that may share bytes.
  bool placeable(const Value* v) const { return !v->isGraphLevel() && !unplaced_.count(v); }

  /// Whether `child` may be placed inside `parent`: it has no parent yet, and it does not
  /// already contain `parent` (which would make the placement circular).
  bool free(const Value* child, const Value* parent) const {
    if (plan_.views.count(child) || !placeable(child) || !placeable(parent)) return false;
    for (const Value* a = parent; a; ) {
      if (a == child) return false;
      auto it = plan_.views.find(a);
      a = it == plan_.views.end() ? nullptr : it->second.parent;
    }
    return true;
  }

  /// The byte offset of the box [starts, starts + extents) of a row-major tensor of `type`, when
  /// the box is one contiguous, 64-byte aligned range of it.
  static std::optional<int64_t> contiguousOffset(const TensorType& type,
                                                 const std::vector<int64_t>& starts,
                                                 const Shape& extents) {
    const Shape& full = type.shape;
    if (starts.size() != full.size() || extents.size() != full.size()) return std::nullopt;
    int last = -1; // the last dim that is not taken whole
    for (size_t d = 0; d < full.size(); ++d)
      if (starts[d] != 0 || extents[d] != full[d]) last = int(d);
    for (int d = 0; d < last; ++d)
      if (extents[size_t(d)] != 1) return std::nullopt;
    int64_t offset = 0, stride = dtypeSize(type.dtype);
    for (size_t d = full.size(); d-- > 0;) {
      offset += starts[d] * stride;
      stride *= full[d];
    }
    if (offset % kTensorAlignment != 0) return std::nullopt;
    return offset;
  }

  void add(const Value* child, const Value* parent, int64_t offset, AliasKind kind) {
    plan_.views[child] = {parent, offset, kind};
  }

  void reshape(const Node* n) {
    if (!free(n->output(0), n->input(0))) return;
    add(n->output(0), n->input(0), 0, AliasKind::View);
    plan_.elided.insert(n);
  }

  void slice(const Node* n) {
    const Value *x = n->input(0), *y = n->output(0);
    std::vector<int64_t> starts = n->attrs().getInts("starts"), steps = n->attrs().getInts("steps");
    for (int64_t s : steps)
      if (s != 1) return;
    std::optional<int64_t> offset = contiguousOffset(x->type(), starts, y->shape());
    if (!offset || !free(y, x)) return;
    add(y, x, *offset, AliasKind::View);
    plan_.elided.insert(n);
  }

  /// The offsets of parts stacked along `axis` of `whole`, when each is a contiguous range.
  static std::optional<std::vector<int64_t>> partOffsets(const TensorType& whole, int64_t axis,
                                                         const std::vector<const Value*>& parts) {
    std::vector<int64_t> offsets;
    int64_t at = 0;
    for (const Value* p : parts) {
      if (axis < 0 || axis >= p->rank()) return std::nullopt;
      std::vector<int64_t> starts(whole.shape.size(), 0);
      starts[size_t(axis)] = at;
      std::optional<int64_t> o = contiguousOffset(whole, starts, p->shape());
      if (!o) return std::nullopt;
      offsets.push_back(*o);
      at += p->shape()[size_t(axis)];
    }
    return offsets;
  }

  void split(const Node* n) {
    const Value* x = n->input(0);
    std::vector<const Value*> parts(n->outputs().begin(), n->outputs().end());
    std::optional<std::vector<int64_t>> offsets =
        partOffsets(x->type(), n->attrs().getInt("axis"), parts);
    if (!offsets) return;
    for (const Value* y : parts)
      if (!free(y, x)) return;
    for (size_t i = 0; i < parts.size(); ++i) add(parts[i], x, (*offsets)[i], AliasKind::View);
    plan_.elided.insert(n);
  }

  void concat(const Node* n) {
    const Value* y = n->output(0);
    std::vector<const Value*> parts(n->inputs().begin(), n->inputs().end());
    std::optional<std::vector<int64_t>> offsets =
        partOffsets(y->type(), n->attrs().getInt("axis"), parts);
    if (!offsets) return;
    std::set<const Value*> distinct(parts.begin(), parts.end());
    if (distinct.size() != parts.size()) return;
    for (const Value* x : parts)
      if (!free(x, y)) return;
    for (size_t i = 0; i < parts.size(); ++i) add(parts[i], y, (*offsets)[i], AliasKind::Part);
    plan_.elided.insert(n);
  }

  const std::set<const Value*>& unplaced_;
  ViewPlan plan_;
};

} // namespace

ViewPlan findViews(const Graph& g, const std::set<const Value*>& unplaced) {
  return ViewFinder(unplaced).run(g);
}

} // namespace hgp
