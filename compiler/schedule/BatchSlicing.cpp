#include "compiler/schedule/BatchSlicing.h"

#include "compiler/schedule/ByteRanges.h"
#include "compiler/schedule/SplitWidth.h"
#include "compiler/schedule/StreamSchedule.h"

#include <algorithm>
#include <queue>
#include <tuple>

namespace hgp {

namespace {

/// Ops whose every operand is per sample.
bool allPerSample(OpKind op) {
  switch (op) {
  case OpKind::Relu:
  case OpKind::LeakyRelu:
  case OpKind::Clip:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
  case OpKind::HardSigmoid:
  case OpKind::HardSwish:
  case OpKind::Neg:
  case OpKind::Scale:
  case OpKind::ReluBwd:
  case OpKind::LeakyReluBwd:
  case OpKind::ClipBwd:
  case OpKind::SigmoidBwd:
  case OpKind::TanhBwd:
  case OpKind::HardSigmoidBwd:
  case OpKind::HardSwishBwd:
  case OpKind::MaxPool:
  case OpKind::MaxPoolBwd:
  case OpKind::AveragePool:
  case OpKind::AveragePoolBwd:
  case OpKind::GlobalAveragePool:
  case OpKind::GlobalAveragePoolBwd:
  case OpKind::LRN:
  case OpKind::LRNBwd:
  case OpKind::Reshape:
  case OpKind::Cast:
  case OpKind::FusedElementwise: // same-shape operands, unless it has a dropout (batchOperands)
    return true;
  default:
    return false;
  }
}

bool rowsOf(const PlanTensor& t, int64_t batch) {
  return !t.type.shape.empty() && t.type.shape[0] == batch && t.storage == StorageClass::Transient;
}

/// A step in the layer-by-layer order, with the bytes it touches.
struct Node {
  PlanStep step;
  StepSlicing info;
  int member = 0;
  std::vector<ByteRange> inputs, reads, writes; ///< reads: inputs plus an accumulated result
};

/// A stretch of the program: steps the transformation leaves alone (`sliced` empty), or one run
/// of splittable steps with the barriers it moved after itself, as they were and as sliced.
struct Segment {
  std::vector<PlanStep> plain, sliced;
  std::vector<StepSlicing> info; ///< For `sliced`.
  int split = 0, pipelined = 0;
};

class ProgramSlicer {
public:
  ProgramSlicer(Plan& plan, const SliceOptions& o, SliceResult& r)
      : plan_(plan), o_(o), r_(r), batch_(plan.meta.getInt("batch")) {}

  void run(PlanProgram& prog) {
    std::vector<PlanStep> steps = std::move(prog.steps);
    prog.steps.clear();
    ops_.assign(steps.size(), std::nullopt);
    analyzed_.assign(steps.size(), 1);
    for (size_t i = 0; i < steps.size(); ++i) {
      ops_[i] = batchOperands(plan_, steps[i], batch_);
      if (ops_[i] && !eligible(steps[i], *ops_[i], 2)) ops_[i].reset();
      if (ops_[i] && o_.target &&
          (steps[i].op == OpKind::Conv || steps[i].op == OpKind::ConvBwdData))
        analyzed_[i] = analyzerWidth(steps[i]);
    }
    steps_ = &steps;
    for (size_t i = 0; i < steps.size(); ++i) {
      if (!ops_[i]) {
        if (group_.empty())
          segments_.push_back({{steps[i]}, {}, {}, 0, 0});
        else
          deferred_.push_back(int(i));
        continue;
      }
      bool blocked = false;
      for (int d : deferred_) blocked = blocked || conflict(steps[i], steps[size_t(d)]);
      if (blocked) flush();
      group_.push_back(int(i));
    }
    flush();
    choose(prog);
  }

private:
  Plan& plan_;
  const SliceOptions& o_;
  SliceResult& r_;
  int64_t batch_;
  const std::vector<PlanStep>* steps_ = nullptr;
  std::vector<Segment> segments_;
  std::vector<std::optional<BatchOperands>> ops_;
  std::vector<int> analyzed_;
  std::vector<int> group_, deferred_;
  std::map<std::tuple<int, int, int>, int> slices_;

  /// The program with the segments that `use` marks sliced.
  void assemble(const std::vector<bool>& use, PlanProgram& prog,
                std::vector<StepSlicing>* info) const {
    prog.steps.clear();
    if (info) info->clear();
    for (size_t s = 0; s < segments_.size(); ++s) {
      const Segment& seg = segments_[s];
      const std::vector<PlanStep>& steps = use[s] ? seg.sliced : seg.plain;
      prog.steps.insert(prog.steps.end(), steps.begin(), steps.end());
      if (!info) continue;
      if (use[s])
        info->insert(info->end(), seg.info.begin(), seg.info.end());
      else
        info->resize(info->size() + steps.size());
    }
  }

  /// The scheduled program's predicted time (StreamSchedule.h).
  double predict(const PlanProgram& prog) const {
    ProgramCost cost = programCost(*o_.target, plan_, prog, o_.precision, o_.cal);
    return scheduleStreams(*o_.target, plan_, prog, cost, o_.maxStreams).sharedSeconds;
  }

  /// Forced widths and depths apply everywhere. The analyzer's apply run by run, in program
  /// order, where the scheduled program's predicted time drops with them.
  void choose(PlanProgram& prog) {
    std::vector<bool> use(segments_.size(), false);
    bool forced = o_.width > 0 || o_.depth > 0 || !o_.target;
    double best = 0;
    if (!forced) {
      assemble(use, prog, nullptr);
      best = predict(prog);
    }
    for (size_t s = 0; s < segments_.size(); ++s) {
      if (segments_[s].sliced.empty()) continue;
      use[s] = true;
      if (forced) continue;
      assemble(use, prog, nullptr);
      double t = predict(prog);
      if (t < best * (1 - 1e-9))
        best = t;
      else
        use[s] = false;
    }
    ProgramSlicing& ps = r_.programs[prog.name];
    assemble(use, prog, &ps.steps);
    for (size_t s = 0; s < segments_.size(); ++s)
      if (use[s]) ps.splitSteps += segments_[s].split, ps.pipelines += segments_[s].pipelined;
  }

  /// The analyzer's width for a convolution phase (chooseSplitWidth), among the widths the
  /// stream pool can run at once.
  int analyzerWidth(const PlanStep& s) const {
    const Target& t = *o_.target;
    double whole = splitSeconds(t, plan_, s, 1, o_.precision, o_.cal), best = whole;
    int width = 1;
    for (int k : kSplitWidths) {
      if (k < 2 || k > o_.maxStreams) continue;
      double sec = splitSeconds(t, plan_, s, k, o_.precision, o_.cal);
      if (sec > 0 && sec < best) best = sec, width = k;
    }
    return whole > 0 && best * o_.minGain <= whole ? width : 1;
  }

  /// Whether two whole steps must keep their order: one writes bytes the other reads or writes.
  bool conflict(const PlanStep& a, const PlanStep& b) const {
    std::vector<ByteRange> ra, wa, rb, wb;
    appendByteRanges(plan_, a.inputs, ra);
    appendByteRanges(plan_, a.outputs, wa);
    appendByteRanges(plan_, b.inputs, rb);
    appendByteRanges(plan_, b.outputs, wb);
    return overlap(ra, wb) || overlap(wa, rb) || overlap(wa, wb);
  }

  /// Whether every batched operand splits into `n` slices of whole, 64-byte aligned rows.
  bool eligible(const PlanStep& s, const BatchOperands& b, int n) const {
    if (n < 1 || b.batch % n) return false;
    auto ok = [&](const std::vector<int>& ts, const std::vector<bool>& batched) {
      for (size_t i = 0; i < ts.size(); ++i)
        if (batched[i] && (plan_.tensors[size_t(ts[i])].bytes() / n) % 64) return false;
      return true;
    };
    return ok(s.inputs, b.in) && ok(s.outputs, b.out);
  }

  int sliceTensor(int parent, int j, int n) {
    auto key = std::make_tuple(parent, j, n);
    auto it = slices_.find(key);
    if (it != slices_.end()) return it->second;
    PlanTensor t = plan_.tensors[size_t(parent)];
    int64_t bytes = t.bytes() / n;
    t.name += "#" + std::to_string(j) + "/" + std::to_string(n);
    t.type.shape[0] /= n;
    t.offset += j * bytes;
    t.init = InitKind::None;
    plan_.tensors.push_back(t);
    int id = int(plan_.tensors.size()) - 1;
    slices_[key] = id;
    return id;
  }

  PlanStep sliceStep(const PlanStep& s, const BatchOperands& b, int j, int n) {
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
    if (b.accumulates && (j > 0 || s.attrs.getInt("accumulate", 0)))
      p.attrs.setInt("accumulate", 1);
    return p;
  }

  /// The largest n <= want that `pred(n)` accepts (1 always is).
  template <typename Pred> static int largest(int want, Pred pred) {
    for (int n = std::max(1, want); n > 1; --n)
      if (pred(n)) return n;
    return 1;
  }

  Node node(const PlanStep& s, StepSlicing info, int member, bool accumulates) const {
    Node n{s, info, member, {}, {}, {}};
    appendByteRanges(plan_, s.inputs, n.inputs);
    n.reads = n.inputs;
    appendByteRanges(plan_, s.outputs, n.writes);
    if (accumulates && s.attrs.getInt("accumulate", 0)) appendByteRanges(plan_, s.outputs, n.reads);
    return n;
  }

  void flush() {
    const std::vector<PlanStep>& steps = *steps_;
    if (group_.empty()) return;
    size_t g = group_.size();
    std::vector<int> k(g, 1);
    int analyzedDepth = 1;
    for (size_t p = 0; p < g; ++p) {
      int i = group_[p];
      analyzedDepth = std::max(analyzedDepth, analyzed_[size_t(i)]);
      k[p] = !o_.split                      ? 1
             : o_.width > 0                 ? o_.width
             : ops_[size_t(i)]->accumulates ? 1
                                            : analyzed_[size_t(i)];
    }
    int m = 1;
    if (o_.pipeline && g >= 2) {
      m = o_.depth > 0 ? o_.depth : analyzedDepth;
      // The analyzer's sub-batch becomes the pipeline's stage: its members run whole per stage.
      if (o_.depth == 0 && o_.width == 0 && m > 1) std::fill(k.begin(), k.end(), 1);
    }
    auto fits = [&](size_t p, int n) {
      int i = group_[p];
      return eligible(steps[size_t(i)], *ops_[size_t(i)], n);
    };
    for (size_t p = 0; p < g; ++p) k[p] = largest(k[p], [&](int n) { return fits(p, n); });
    m = largest(m, [&](int n) {
      for (size_t p = 0; p < g; ++p)
        if (!fits(p, n * k[p])) return false;
      return true;
    });

    // The layer-by-layer order: every member's slices in a row.
    std::vector<Node> nodes;
    int splitMembers = 0;
    for (size_t p = 0; p < g; ++p) {
      const PlanStep& s = steps[size_t(group_[p])];
      const BatchOperands& b = *ops_[size_t(group_[p])];
      int n = m * k[p];
      size_t first = nodes.size();
      if (n > 1) {
        for (int j = 0; j < n; ++j)
          nodes.push_back(
              node(sliceStep(s, b, j, n), {k[p], m, j / k[p], j % k[p]}, int(p), b.accumulates));
        // Slice j must not overwrite what a later slice of the same step reads.
        bool ok = true;
        for (size_t a = first; a < nodes.size() && ok; ++a)
          for (size_t c = a + 1; c < nodes.size() && ok; ++c)
            ok = !overlap(nodes[a].writes, nodes[c].inputs);
        if (ok) {
          ++splitMembers;
          continue;
        }
        nodes.resize(first);
      }
      nodes.push_back(node(s, {}, int(p), b.accumulates));
    }
    Segment seg;
    seg.split = splitMembers;
    seg.pipelined = m > 1 && splitMembers >= 2;
    std::vector<int> original = group_;
    original.insert(original.end(), deferred_.begin(), deferred_.end());
    std::sort(original.begin(), original.end());
    for (int i : original) seg.plain.push_back(steps[size_t(i)]);

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
      seg.sliced.push_back(std::move(nodes[size_t(x)].step));
      seg.info.push_back(nodes[size_t(x)].info);
      for (int y : succ[size_t(x)])
        if (--indeg[size_t(y)] == 0) push(size_t(y));
    }
    for (int d : deferred_) {
      seg.sliced.push_back(steps[size_t(d)]);
      seg.info.push_back({});
    }
    if (splitMembers == 0) seg.sliced.clear();
    segments_.push_back(std::move(seg));
    group_.clear();
    deferred_.clear();
  }
};

} // namespace

std::optional<BatchOperands> batchOperands(const Plan& plan, const PlanStep& s, int64_t batch) {
  if (batch < 2) return std::nullopt;
  BatchOperands b;
  b.batch = batch;
  b.in.assign(s.inputs.size(), false);
  b.out.assign(s.outputs.size(), false);
  auto tensor = [&](int t) -> const PlanTensor& { return plan.tensors[size_t(t)]; };
  auto batched = [&](int t) { return rowsOf(tensor(t), batch); };
  auto all = [&]() -> std::optional<BatchOperands> {
    for (size_t i = 0; i < s.inputs.size(); ++i)
      if (!(b.in[i] = batched(s.inputs[i]))) return std::nullopt;
    for (size_t i = 0; i < s.outputs.size(); ++i)
      if (!(b.out[i] = batched(s.outputs[i]))) return std::nullopt;
    return b;
  };
  switch (s.op) {
  case OpKind::Conv:
  case OpKind::ConvTranspose:
  case OpKind::ConvBwdData:
  case OpKind::BatchNorm: // inference mode: per sample with constant statistics
    if (s.inputs.empty() || !batched(s.inputs[0]) || !batched(s.outputs[0])) return std::nullopt;
    b.in[0] = b.out[0] = true;
    return b;
  case OpKind::ConvBwdFilter:
    // Slices add into dW; a 16-bit dW (mixed precision) would round every partial sum to 8 or
    // 11 bits, which is more than reassociation, so it stays whole.
    if (tensor(s.outputs[0]).type.dtype != DType::F32) return std::nullopt;
    if (!batched(s.inputs[0]) || !batched(s.inputs[1])) return std::nullopt;
    b.in[0] = b.in[1] = true;
    b.accumulates = true;
    return b;
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Sum: {
    if (!batched(s.outputs[0])) return std::nullopt;
    b.out[0] = true;
    size_t rank = tensor(s.outputs[0]).type.shape.size();
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      const Shape& sh = tensor(s.inputs[i]).type.shape;
      if (sh.size() == rank && sh[0] == batch) {
        if (!(b.in[i] = batched(s.inputs[i]))) return std::nullopt;
      } else if (!(sh.size() < rank || sh[0] == 1)) {
        return std::nullopt;
      }
    }
    return b;
  }
  case OpKind::FusedElementwise:
    // A dropout inside draws its mask from each element's flat index in the whole tensor, which
    // a slice would renumber; its i64 counter input marks it (runtime/plan/FusedProgram.h).
    for (int t : s.inputs)
      if (tensor(t).type.dtype == DType::I64) return std::nullopt;
    return all();
  case OpKind::Softmax:
  case OpKind::LogSoftmax:
  case OpKind::SoftmaxBwd:
  case OpKind::LogSoftmaxBwd:
  case OpKind::Concat:
  case OpKind::Split:
    if (s.attrs.getInt("axis", 0) < 1) return std::nullopt;
    return all();
  default:
    return allPerSample(s.op) ? all() : std::nullopt;
  }
}

SliceResult sliceBatches(Plan& plan, const SliceOptions& options) {
  SliceResult r;
  size_t base = plan.tensors.size();
  for (PlanProgram& p : plan.programs) ProgramSlicer(plan, options, r).run(p);
  // Drop the slices of runs the analysis left whole.
  std::vector<bool> used(plan.tensors.size() - base, false);
  for (const PlanProgram& p : plan.programs)
    for (const PlanStep& s : p.steps)
      for (const std::vector<int>* v : {&s.inputs, &s.outputs})
        for (int t : *v)
          if (size_t(t) >= base) used[size_t(t) - base] = true;
  std::vector<int> remap(used.size(), -1);
  std::vector<PlanTensor> kept(plan.tensors.begin(), plan.tensors.begin() + long(base));
  for (size_t i = 0; i < used.size(); ++i)
    if (used[i]) {
      remap[i] = int(kept.size());
      kept.push_back(std::move(plan.tensors[base + i]));
    }
  plan.tensors = std::move(kept);
  for (PlanProgram& p : plan.programs)
    for (PlanStep& s : p.steps)
      for (std::vector<int>* v : {&s.inputs, &s.outputs})
        for (int& t : *v)
          if (size_t(t) >= base) t = remap[size_t(t) - base];
  return r;
}

} // namespace hgp
