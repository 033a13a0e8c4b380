#include "compiler/analysis/CostModel.h"

#include "compiler/analysis/StepWork.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace hgp {

double allReduceSeconds(const Target& t, double bytes, int64_t ranks, const CostCalibration& cal) {
  if (ranks <= 1) return 0;
  double hops = 2.0 * double(ranks - 1);
  double bandwidth = std::max(1.0, t.linkBandwidth * cal.linkEfficiency);
  return hops * cal.hopSeconds + hops / double(ranks) * bytes / bandwidth;
}

StepCost stepCost(const Target& t, const Plan& plan, const PlanStep& step,
                  Precision precision, const CostCalibration& cal) {
  StepWork w = stepWork(plan, step);
  StepCost c;
  c.launch = estimateLaunch(t, plan, step);
  if (step.op == OpKind::AllReduce) {
    double bytes = 0;
    for (int in : step.inputs) bytes += double(plan.tensors[size_t(in)].bytes());
    c.bytes = bytes;
    c.seconds = t.launchSeconds + allReduceSeconds(t, bytes, step.attrs.getInt("ranks", 1), cal);
    return c;
  }
  c.blocksPerSm = blocksPerSm(t, c.launch);
  c.waves = waves(t, c.launch);
  // Only convolutions and matrix products run on tensor cores; the rest is FP32 arithmetic.
  double peak = w.gemm ? t.peak(precision) : t.fp32;
  bool tf32 = w.gemm && precision == Precision::TF32 && t.tf32 > 0;
  double efficiency = tf32 ? cal.tf32ComputeEfficiency : cal.computeEfficiency;
  // Tensor-core kernels compute whole tiles, also where the GEMM only partly fills them.
  double work = w.flops;
  if (w.gemm) {
    auto up = [](int64_t v) { int64_t t = gemmTile(v); return double((v + t - 1) / t * t); };
    work = 2.0 * up(w.m) * up(w.n) * double(w.k) * double(w.groups);
  }
  double bandwidth = t.memBandwidth * cal.memoryEfficiency;
  double compute = work / (peak * efficiency);
  double memory = w.bytes / bandwidth;
  double quantization = 1;
  if (std::isfinite(c.waves) && c.waves > 0 && c.waves < 8) quantization = std::ceil(c.waves) / c.waves;
  c.flops = w.flops;
  c.bytes = w.bytes;
  double roofline = std::max(compute * quantization, memory);
  c.launchSeconds = t.launchSeconds;
  c.seconds = t.launchSeconds + cal.kernelSeconds + (w.gemm ? cal.gemmFixedSeconds : 0) + roofline;
  if (c.launch.splitK > 1) {
    // Split-K: each block writes its partial tile in f32 and a second kernel adds them up.
    double partials = 2.0 * double(c.launch.splitK) * double(w.m) * double(w.n) *
                      double(w.groups) * 4.0 / bandwidth;
    memory += partials;
    roofline += partials;
    c.seconds += t.launchSeconds + cal.kernelSeconds + partials;
    c.launchSeconds += t.launchSeconds;
  }
  c.bandwidthShare = roofline > 0 ? std::min(1.0, memory / roofline) : 0;
  return c;
}

double busySeconds(const StepCost& c) { return std::max(0.0, c.seconds - c.launchSeconds); }

double gpuUse(const Target& t, const StepCost& c) {
  return std::max(gpuShare(t, c.launch), c.bandwidthShare);
}

ProgramCost programCost(const Target& t, const Plan& plan, const PlanProgram& program,
                        Precision precision, const CostCalibration& cal,
                        const ProgramMeasurement* measured) {
  if (measured && (!measured->present || measured->steps.size() != program.steps.size()))
    measured = nullptr;
  double gap = measured && measured->gapSamples > 0 ? measured->gapSeconds : t.launchSeconds;
  ProgramCost pc;
  pc.sharingMeasured = measured && measured->streams > 1;
  size_t n = program.steps.size();
  pc.steps.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const PlanStep& s = program.steps[i];
    pc.steps.push_back(stepCost(t, plan, s, precision, cal));
    // Consecutive optimizer updates are one multi-tensor launch on the GPU: one launch cost.
    bool optimizer = opHas(s.op, OpFlag::Optimizer);
    if (optimizer && i > 0 && program.steps[i - 1].op == s.op) {
      StepCost& c = pc.steps.back();
      c.seconds = std::max(0.0, c.seconds - t.launchSeconds - cal.kernelSeconds);
      c.launchSeconds = 0;
    }
    if (measured) {
      const StepMeasurement& m = measured->steps[i];
      StepCost& c = pc.steps.back();
      c.measured = true;
      c.kernels = m.kernels;
      c.seconds = m.busySeconds + m.launches * gap;
      c.launchSeconds = std::min(c.seconds, m.launches * gap);
      if (m.blocks > 0) {
        c.launch = LaunchShape{m.blocks, m.threads, m.regs, m.smem};
        c.blocksPerSm = blocksPerSm(t, c.launch);
        c.waves = waves(t, c.launch);
      }
    }
    pc.serialSeconds += pc.steps.back().seconds;
  }
  // Longest path: a step starts after the last writer of each tensor it reads, and after the
  // readers of a tensor it overwrites in place are done (plan order already respects both).
  std::vector<double> finish(n, 0);
  std::vector<int> from(n, -1);
  std::map<int, int> lastWriter;
  for (size_t i = 0; i < n; ++i) {
    const PlanStep& s = program.steps[i];
    double start = 0;
    for (int in : s.inputs) {
      auto it = lastWriter.find(in);
      if (it != lastWriter.end() && finish[size_t(it->second)] > start) {
        start = finish[size_t(it->second)];
        from[i] = it->second;
      }
    }
    finish[i] = start + pc.steps[i].seconds;
    for (int out : s.outputs) lastWriter[out] = int(i);
  }
  if (n == 0) return pc;
  int end = int(std::max_element(finish.begin(), finish.end()) - finish.begin());
  pc.criticalPathSeconds = finish[size_t(end)];
  for (int i = end; i >= 0; i = from[size_t(i)]) pc.criticalPath.push_back(i);
  std::reverse(pc.criticalPath.begin(), pc.criticalPath.end());
  for (int i : pc.criticalPath) pc.steps[size_t(i)].onCriticalPath = true;
  return pc;
}

} // namespace hgp
