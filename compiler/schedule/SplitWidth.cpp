#include "compiler/schedule/SplitWidth.h"

namespace hgp {

double splitSeconds(const Target& t, const Plan& plan, const PlanStep& step, int k,
                    Precision precision, const CostCalibration& cal) {
  bool conv = step.op == OpKind::Conv || step.op == OpKind::ConvBwdData ||
              step.op == OpKind::ConvBwdFilter;
  if (!conv || k < 1) return 0;
  // A copy of the step's operands with the batch dim divided by k. The filter (Conv's inputs
  // after the first, ConvBwdData's second input, ConvBwdFilter's result) keeps its shape.
  Plan part;
  PlanStep s = step;
  s.inputs.clear();
  s.outputs.clear();
  auto add = [&](int tensor, bool batched, std::vector<int>& into) {
    PlanTensor pt = plan.tensors[size_t(tensor)];
    if (batched) {
      if (pt.type.shape.empty() || pt.type.shape[0] % k) return false;
      pt.type.shape[0] /= k;
    }
    into.push_back(int(part.tensors.size()));
    part.tensors.push_back(pt);
    return true;
  };
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    bool batched = step.op == OpKind::ConvBwdFilter || i == 0;
    if (!add(step.inputs[i], batched, s.inputs)) return 0;
  }
  for (int o : step.outputs)
    if (!add(o, step.op != OpKind::ConvBwdFilter, s.outputs)) return 0;
  StepCost one = stepCost(t, part, s, precision, cal);
  if (k == 1) return one.seconds;
  auto each = [&](double v) { return std::vector<double>(size_t(k), v); };
  return concurrentSeconds(t, std::vector<LaunchShape>(size_t(k), one.launch), each(one.seconds),
                           each(one.bandwidthShare), each(one.launchSeconds));
}

int chooseSplitWidth(const Target& t, const Plan& plan, const PlanStep& step,
                     Precision precision, double minGain, const CostCalibration& cal) {
  double whole = splitSeconds(t, plan, step, 1, precision, cal);
  int best = 1;
  double bestSeconds = whole;
  for (int k : kSplitWidths) {
    double s = k > 1 ? splitSeconds(t, plan, step, k, precision, cal) : 0;
    if (s > 0 && s < bestSeconds) best = k, bestSeconds = s;
  }
  return whole > 0 && bestSeconds * minGain <= whole ? best : 1;
}

} // namespace hgp
