// PlanTestUtil.h - hand-built plans and a fake target for the analysis tests.
#pragma once

#include "compiler/target/Target.h"
#include "runtime/plan/Plan.h"

#include <vector>

namespace hgp::test {

/// A plan of transient f32 tensors of the given shapes and no programs. Each tensor gets its own
/// bytes (1 GiB apart) unless `offsets` places it.
inline Plan planOf(const std::vector<Shape>& shapes, const std::vector<int64_t>& offsets = {}) {
  Plan p;
  for (size_t i = 0; i < shapes.size(); ++i) {
    PlanTensor t;
    t.name = "t" + std::to_string(i);
    t.type.shape = shapes[i];
    t.offset = i < offsets.size() ? offsets[i] : int64_t(i) << 30;
    p.tensors.push_back(t);
  }
  return p;
}

/// 10 SMs of 64 K registers, 100 KiB shared memory, 2048 threads and 32 blocks; 1 TB/s; 10 and
/// 100 TFLOP/s for FP32 and TF32; 1 us per launch: round numbers for worked-out answers.
inline Target fakeTarget() {
  Target t;
  t.name = "fake";
  t.sms = 10;
  t.regsPerSm = 65536;
  t.smemPerSm = 100 << 10;
  t.maxThreadsPerSm = 2048;
  t.maxBlocksPerSm = 32;
  t.memBandwidth = 1e12;
  t.fp32 = 10e12;
  t.tf32 = 100e12;
  t.launchSeconds = 1e-6;
  return t;
}

inline PlanStep step(OpKind op, std::vector<int> in, std::vector<int> out) {
  PlanStep s;
  s.op = op;
  s.inputs = std::move(in);
  s.outputs = std::move(out);
  return s;
}

} // namespace hgp::test
