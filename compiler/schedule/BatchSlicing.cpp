#include "compiler/schedule/BatchSlicing.h"

#include "compiler/schedule/SliceMechanics.h"
#include "compiler/schedule/SplitWidth.h"
#include "compiler/schedule/StreamSchedule.h"

#include <algorithm>

namespace hgp {

namespace {

bool rowsOf(const PlanTensor& t, int64_t batch) {
  return !t.type.shape.empty() && t.type.shape[0] == batch && t.storage == StorageClass::Transient;
}

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
      : plan_(plan), o_(o), r_(r), batch_(plan.meta.getInt("batch")), cut_(plan) {}

  void run(PlanProgram& prog) {
    std::vector<PlanStep> steps = std::move(prog.steps);
    prog.steps.clear();
    ops_.assign(steps.size(), std::nullopt);
    analyzed_.assign(steps.size(), 1);
    for (size_t i = 0; i < steps.size(); ++i) {
      ops_[i] = batchOperands(plan_, steps[i], batch_);
      if (ops_[i] && !cut_.divides(steps[i], *ops_[i], 2)) ops_[i].reset();
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
      for (int d : deferred_) blocked = blocked || cut_.conflict(steps[i], steps[size_t(d)]);
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
  SliceBuilder cut_;
  const std::vector<PlanStep>* steps_ = nullptr;
  std::vector<Segment> segments_;
  std::vector<std::optional<BatchOperands>> ops_;
  std::vector<int> analyzed_;
  std::vector<int> group_, deferred_;

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

  /// The largest n <= want that `pred(n)` accepts (1 always is).
  template <typename Pred> static int largest(int want, Pred pred) {
    for (int n = std::max(1, want); n > 1; --n)
      if (pred(n)) return n;
    return 1;
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
      return cut_.divides(steps[size_t(i)], *ops_[size_t(i)], n);
    };
    for (size_t p = 0; p < g; ++p) k[p] = largest(k[p], [&](int n) { return fits(p, n); });
    m = largest(m, [&](int n) {
      for (size_t p = 0; p < g; ++p)
        if (!fits(p, n * k[p])) return false;
      return true;
    });

    std::vector<const PlanStep*> members;
    std::vector<const BatchOperands*> operands;
    for (int i : group_) {
      members.push_back(&steps[size_t(i)]);
      operands.push_back(&*ops_[size_t(i)]);
    }
    SlicedRun run = cut_.sliceRun(members, operands, k, m);
    Segment seg;
    seg.split = run.splitMembers;
    seg.pipelined = m > 1 && run.splitMembers >= 2;
    std::vector<int> original = group_;
    original.insert(original.end(), deferred_.begin(), deferred_.end());
    std::sort(original.begin(), original.end());
    for (int i : original) seg.plain.push_back(steps[size_t(i)]);
    seg.sliced = std::move(run.steps);
    seg.info = std::move(run.info);
    for (int d : deferred_) {
      seg.sliced.push_back(steps[size_t(d)]);
      seg.info.push_back({});
    }
    if (run.splitMembers == 0) seg.sliced.clear();
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
  // The op's BatchRule (OpList.def) says which operands may carry the batch.
  switch (opTraits(s.op).batchRule()) {
  case BatchRule::First: // weights whole; BatchNorm: inference mode, constant statistics
    if (s.inputs.empty() || !batched(s.inputs[0]) || !batched(s.outputs[0])) return std::nullopt;
    // A convolution with its result's channel sums (stats=1) sums the whole batch.
    if (s.outputs.size() != 1) return std::nullopt;
    b.in[0] = b.out[0] = true;
    return b;
  case BatchRule::Accumulate:
    // Slices add into dW; a 16-bit dW (mixed precision) would round every partial sum to 8 or
    // 11 bits, which is more than reassociation, so it stays whole.
    if (tensor(s.outputs[0]).type.dtype != DType::F32) return std::nullopt;
    if (!batched(s.inputs[0]) || !batched(s.inputs[1])) return std::nullopt;
    b.in[0] = b.in[1] = true;
    b.accumulates = true;
    return b;
  case BatchRule::Broadcast: {
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
  case BatchRule::Fused: {
    // A dropout inside draws its mask from each element's flat index in the whole tensor, which
    // a slice would renumber; its i64 counter input marks it (runtime/plan/FusedProgram.h).
    for (int t : s.inputs)
      if (tensor(t).type.dtype == DType::I64) return std::nullopt;
    // Every result has the batch; an input has it too, or is a per-channel operand broadcast
    // along it (a lower rank, or a leading 1: FusedOperandMap), which every slice reads whole.
    for (size_t i = 0; i < s.outputs.size(); ++i)
      if (!(b.out[i] = batched(s.outputs[i]))) return std::nullopt;
    size_t rank = tensor(s.outputs[0]).type.shape.size();
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      const Shape& sh = tensor(s.inputs[i]).type.shape;
      if (sh.size() == rank && sh[0] != 1) {
        if (!(b.in[i] = batched(s.inputs[i]))) return std::nullopt;
      } else if (!(sh.size() < rank || sh[0] == 1)) {
        return std::nullopt;
      }
    }
    return b;
  }
  case BatchRule::Axis:
    if (s.attrs.getInt("axis", 0) < 1) return std::nullopt;
    return all();
  case BatchRule::All: return all();
  case BatchRule::None: return std::nullopt;
  }
  return std::nullopt;
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
