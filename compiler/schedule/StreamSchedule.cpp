#include "compiler/schedule/StreamSchedule.h"

#include "compiler/schedule/ByteRanges.h"

#include <algorithm>
#include <cstdint>

namespace hgp {

namespace {

/// A set of step indices.
struct Bits {
  std::vector<uint64_t> w;
  explicit Bits(size_t n = 0) : w((n + 63) / 64, 0) {}
  bool test(int i) const { return (w[size_t(i) >> 6] >> (i & 63)) & 1; }
  void set(int i) { w[size_t(i) >> 6] |= uint64_t(1) << (i & 63); }
  void merge(const Bits& o) {
    for (size_t k = 0; k < w.size(); ++k) w[k] |= o.w[k];
  }
};

/// Whether `b` continues the multi-tensor optimizer launch of `a` (the CUDA backend groups
/// consecutive updates with the same op, attributes and scalar operands on one stream).
bool sameUpdateLaunch(const PlanStep& a, const PlanStep& b) {
  bool update = opHas(a.op, OpFlag::Optimizer);
  return update && a.op == b.op && a.attrs == b.attrs && a.inputs.size() == b.inputs.size() &&
         a.inputs.size() >= 5 && a.inputs[2] == b.inputs[2] && a.inputs[3] == b.inputs[3] &&
         a.inputs[4] == b.inputs[4];
}

} // namespace

std::vector<std::vector<int>> reducedDependencies(const Plan& plan, const PlanProgram& program,
                                                  size_t* allEdges) {
  size_t n = program.steps.size();
  std::vector<std::vector<ByteRange>> reads(n), writes(n);
  for (size_t i = 0; i < n; ++i) {
    reads[i] = byteRanges(plan, program.steps[i].inputs);
    writes[i] = byteRanges(plan, program.steps[i].outputs);
  }
  std::vector<std::vector<int>> reduced(n);
  std::vector<Bits> reach(n, Bits(n));
  size_t edges = 0;
  for (size_t i = 0; i < n; ++i) {
    // Latest first: a later predecessor's ancestors cover the earlier ones it depends on.
    for (size_t j = i; j-- > 0;) {
      bool dep = overlap(reads[i], writes[j]) || overlap(writes[i], reads[j]) ||
                 overlap(writes[i], writes[j]);
      if (!dep) continue;
      ++edges;
      if (reach[i].test(int(j))) continue;
      reduced[i].push_back(int(j));
      reach[i].merge(reach[j]);
      reach[i].set(int(j));
    }
  }
  if (allEdges) *allEdges = edges;
  return reduced;
}

StreamSchedule scheduleStreams(const Target& t, const Plan& plan, const PlanProgram& program,
                               const ProgramCost& cost, int maxStreams) {
  StreamSchedule s;
  size_t n = program.steps.size();
  s.dependencies = reducedDependencies(plan, program, &s.dependencyEdges);
  const std::vector<std::vector<int>>& deps = s.dependencies;
  for (const auto& d : deps) s.reducedEdges += d.size();
  maxStreams = std::max(1, maxStreams);
  s.stream.assign(n, 0);
  s.streams = 0;
  std::vector<int> tail;             // last step per stream
  std::vector<double> finish(n, 0);  // ideal finish times
  std::vector<Bits> reach(n, Bits(n));
  double area = 0;
  int commStream = -1, computeStreams = 0;
  for (size_t i = 0; i < n; ++i) {
    double seconds = cost.steps[i].seconds;
    bool collective = program.steps[i].op == OpKind::AllReduce;
    // A collective occupies the links and a few SMs, not the GPU's arithmetic.
    if (!collective)
      area += cost.steps[i].launchSeconds + busySeconds(cost.steps[i]) * gpuUse(t, cost.steps[i]);
    int chosen = -1, via = -1;
    if (collective) {
      if (commStream < 0) {
        commStream = s.streams++;
        tail.push_back(-1);
      }
      chosen = commStream;
    } else if (i > 0 && sameUpdateLaunch(program.steps[i - 1], program.steps[i])) {
      // The updates all wait for the finite check over every gradient, so spreading them would
      // gain nothing and would split their one launch.
      chosen = s.stream[i - 1];
    } else {
      for (int j : deps[i])
        if (s.stream[size_t(j)] != commStream && tail[size_t(s.stream[size_t(j)])] == j &&
            (via < 0 || finish[size_t(j)] > finish[size_t(via)]))
          via = j, chosen = s.stream[size_t(j)];
    }
    if (chosen < 0) {
      if (computeStreams < maxStreams) {
        chosen = s.streams++;
        ++computeStreams;
        tail.push_back(-1);
      } else {
        for (int k = 0; k < s.streams; ++k)
          if (k != commStream &&
              (chosen < 0 || finish[size_t(tail[size_t(k)])] < finish[size_t(tail[size_t(chosen)])]))
            chosen = k;
      }
    }
    s.stream[i] = chosen;
    int prev = tail[size_t(chosen)];
    double start = 0;
    if (prev >= 0) {
      reach[i].merge(reach[size_t(prev)]);
      reach[i].set(prev);
      start = finish[size_t(prev)];
    }
    for (int j : deps[i]) {  // latest first
      start = std::max(start, finish[size_t(j)]);
      if (s.stream[size_t(j)] == chosen || reach[i].test(j)) continue;
      s.events.push_back({j, int(i)});
      reach[i].merge(reach[size_t(j)]);
      reach[i].set(j);
    }
    finish[i] = start + seconds;
    tail[size_t(chosen)] = int(i);
  }
  s.streams = std::max(1, s.streams);
  s.commStream = commStream;
  for (double f : finish) s.idealSeconds = std::max(s.idealSeconds, f);
  s.sharedSeconds = cost.sharingMeasured ? s.idealSeconds : std::max(s.idealSeconds, area);
  return s;
}

} // namespace hgp
