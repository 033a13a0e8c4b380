//===- Views.cpp - Reshape, Slice, Split and Concat as views ---------------------------------===//
//
// Nodes are taken in graph order; a value keeps the first parent it is given. A Concat is made
// in place only when every operand can be a part (all or nothing: a Concat that still runs
// must read every operand from bytes of its own), and a Split only when every result can be a
// view. With strided views, a second walk takes the Concats that stayed copies in reverse
// order, so that a dense block's last (largest) Concat claims the features first and the
// block's earlier Concats, runs of its parts, become views of it.
//
//===----------------------------------------------------------------------------------------===//
#include "compiler/analysis/Views.h"

#include "compiler/analysis/MemoryPlan.h"

#include <optional>

namespace hgp {

namespace {

class ViewFinder {
public:
  ViewFinder(const Graph& g, const std::set<const Value*>& unplaced, bool strided)
      : unplaced_(unplaced), strided_(strided) {
    outputs_.insert(g.outputs().begin(), g.outputs().end());
  }

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
    if (strided_) {
      for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it)
        if ((*it)->op() == OpKind::Concat && !plan_.elided.count(*it)) pitchedConcat(*it);
      for (const Node* n : g.nodes())
        if ((n->op() == OpKind::Concat || n->op() == OpKind::Split || n->op() == OpKind::Slice) &&
            !plan_.elided.count(n) && !plan_.copies.count(n))
          plan_.copies[n] = "not a view";
    }
    return std::move(plan_);
  }

private:
  /// A transient node result that may share bytes.
  bool placeable(const Value* v) const { return !v->isGraphLevel() && !unplaced_.count(v); }

  /// A pitched box: a byte offset, and rows of `row` elements `pitch` apart.
  struct Box {
    int64_t offset = 0, row = 0, pitch = 0;
  };

  /// The box [starts, starts + extents) of a row-major tensor of `type` as a pitched range,
  /// when exactly one dim is cut, every dim before it is whole, and the offset, row and pitch
  /// are multiples of 16 bytes (a vector: the CUDA kernels load 16 bytes at a time).
  static std::optional<Box> pitchedBox(const TensorType& type, const std::vector<int64_t>& starts,
                                       const Shape& extents) {
    const Shape& full = type.shape;
    if (starts.size() != full.size() || extents.size() != full.size()) return std::nullopt;
    int cut = -1;
    for (size_t d = 0; d < full.size(); ++d)
      if (starts[d] != 0 || extents[d] != full[d]) {
        if (cut >= 0) return std::nullopt;
        cut = int(d);
      }
    if (cut <= 0) return std::nullopt; // whole, or a batch range (contiguous)
    int64_t inner = 1, esize = dtypeSize(type.dtype);
    for (size_t d = size_t(cut) + 1; d < full.size(); ++d) inner *= full[d];
    Box b{starts[size_t(cut)] * inner * esize, extents[size_t(cut)] * inner,
          full[size_t(cut)] * inner};
    if (b.offset % 16 || (b.row * esize) % 16 || (b.pitch * esize) % 16)
      return std::nullopt;
    return b;
  }

  /// Whether `v` may be pitched: a placeable result, no graph output, no view's parent.
  bool mayPitch(const Value* v) const {
    if (!placeable(v) || outputs_.count(v) || plan_.views.count(v)) return false;
    for (const auto& [child, view] : plan_.views)
      if (view.parent == v) return false;
    return true;
  }

  /// Why `v` cannot be read pitched by its users (those in `skip` aside), or "".
  std::string readBlocker(const Value* v, const std::set<const Node*>& skip) const {
    for (const Node* u : v->users()) {
      if (skip.count(u)) continue;
      for (size_t i = 0; i < u->numInputs(); ++i)
        if (u->input(i) == v &&
            !acceptsPitched(u->op(), u->attrs(), int(u->numInputs()), false, int(i)))
          return std::string(opName(u->op())) + " " + u->name() + " cannot read %" + v->name() +
                 " pitched";
    }
    return "";
  }

  /// Why the producer of `v` cannot write it pitched, or "".
  static std::string writeBlocker(const Value* v) {
    const Node* p = v->producer();
    if (acceptsPitched(p->op(), p->attrs(), int(p->numInputs()), true, v->resultIndex())) return "";
    return std::string(opName(p->op())) + " " + p->name() + " cannot write %" + v->name() +
           " pitched";
  }

  void addPitched(const Value* child, const Value* parent, const Box& b, AliasKind kind) {
    plan_.views[child] = {parent, b.offset, kind, b.row, b.pitch};
  }

  /// Concat in place with pitched parts, and the earlier Concats that are runs of its parts
  /// as views of its result.
  void pitchedConcat(const Node* n) {
    const Value* y = n->output(0);
    int64_t axis = n->attrs().getInt("axis");
    std::vector<const Value*> parts(n->inputs().begin(), n->inputs().end());
    auto refuse = [&](const std::string& why) { plan_.copies[n] = why; };
    if (std::set<const Value*>(parts.begin(), parts.end()).size() != parts.size())
      return refuse("an operand appears twice");
    if (!placeable(y) || plan_.views.count(y)) return refuse("its result is placed elsewhere");
    std::vector<Box> boxes;
    std::map<const Value*, size_t> position; // operand -> index
    int64_t at = 0;
    for (const Value* x : parts) {
      if (axis < 1 || axis >= x->rank()) return refuse("not a channel concatenation");
      std::vector<int64_t> starts(y->shape().size(), 0);
      starts[size_t(axis)] = at;
      std::optional<Box> b = pitchedBox(y->type(), starts, x->shape());
      if (!b) return refuse("a part is not aligned for a pitched view");
      position[x] = boxes.size();
      boxes.push_back(*b);
      at += x->shape()[size_t(axis)];
    }
    // The other Concats reading these parts must be runs of them, to become views of y.
    std::set<const Node*> absorbed{n};
    std::vector<std::pair<const Node*, Box>> runs;
    for (const Value* x : parts)
      for (const Node* u : x->users()) {
        if (u->op() != OpKind::Concat || absorbed.count(u)) continue;
        if (plan_.elided.count(u) || u->attrs().getInt("axis") != axis) continue;
        auto first = position.find(u->input(0));
        bool run = first != position.end() && first->second + u->numInputs() <= parts.size();
        for (size_t i = 0; run && i < u->numInputs(); ++i)
          run = parts[first->second + i] == u->input(i);
        const Value* uy = u->output(0);
        if (!run || !mayPitch(uy) || !readBlocker(uy, {}).empty()) continue;
        std::vector<int64_t> starts(y->shape().size(), 0);
        starts[size_t(axis)] = 0;
        for (size_t i = 0; i < first->second; ++i) starts[size_t(axis)] += parts[i]->shape()[size_t(axis)];
        std::optional<Box> b = pitchedBox(y->type(), starts, uy->shape());
        if (!b) continue;
        absorbed.insert(u);
        runs.push_back({u, *b});
      }
    for (const Value* x : parts) {
      if (!mayPitch(x) || !free(x, y)) return refuse("operand %" + x->name() + " is placed elsewhere");
      std::string why = writeBlocker(x);
      if (why.empty()) why = readBlocker(x, absorbed);
      if (!why.empty()) return refuse(why);
    }
    for (size_t i = 0; i < parts.size(); ++i) addPitched(parts[i], y, boxes[i], AliasKind::Part);
    plan_.elided.insert(n);
    for (const auto& [u, b] : runs) {
      addPitched(u->output(0), y, b, AliasKind::View);
      plan_.elided.insert(u);
      plan_.copies.erase(u);
    }
  }

  /// Split or Slice results as pitched views of the input, when every reader takes them.
  bool pitchedResults(const Node* n, const std::vector<const Value*>& results,
                      const std::vector<std::vector<int64_t>>& starts) {
    const Value* x = n->input(0);
    std::vector<Box> boxes;
    for (size_t i = 0; i < results.size(); ++i) {
      std::optional<Box> b = pitchedBox(x->type(), starts[i], results[i]->shape());
      if (!b) return plan_.copies[n] = "a result is not aligned for a pitched view", false;
      boxes.push_back(*b);
    }
    if (plan_.views.count(x) && plan_.views.at(x).pitch)
      return plan_.copies[n] = "its input is itself pitched", false;
    for (const Value* r : results) {
      if (!mayPitch(r) || !free(r, x))
        return plan_.copies[n] = "result %" + r->name() + " is placed elsewhere", false;
      std::string why = readBlocker(r, {});
      if (!why.empty()) return plan_.copies[n] = why, false;
    }
    for (size_t i = 0; i < results.size(); ++i) addPitched(results[i], x, boxes[i], AliasKind::View);
    plan_.elided.insert(n);
    return true;
  }

  /// Whether `child` may be placed inside `parent`: it has no parent yet, and it does not
  /// already contain `parent` (which would make the placement circular).
  bool free(const Value* child, const Value* parent) const {
    if (plan_.views.count(child) || !placeable(child) || !placeable(parent)) return false;
    auto pv = plan_.views.find(parent);
    if (pv != plan_.views.end() && pv->second.pitch) return false; // pitched views do not nest
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
    if (!offset && strided_) {
      pitchedResults(n, {y}, {starts});
      return;
    }
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
    if (!offsets && strided_) {
      int64_t axis = n->attrs().getInt("axis"), at = 0;
      if (axis < 1 || axis >= x->rank()) return;
      std::vector<std::vector<int64_t>> starts;
      for (const Value* y : parts) {
        starts.push_back(std::vector<int64_t>(x->shape().size(), 0));
        starts.back()[size_t(axis)] = at;
        at += y->shape()[size_t(axis)];
      }
      pitchedResults(n, parts, starts);
      return;
    }
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
  bool strided_;
  std::set<const Value*> outputs_;
  ViewPlan plan_;
};

} // namespace

ViewPlan findViews(const Graph& g, const std::set<const Value*>& unplaced, bool strided) {
  return ViewFinder(g, unplaced, strided).run(g);
}

} // namespace hgp
