// PlanTestUtil.h - hand-built plans for the analysis tests.
#pragma once

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

inline PlanStep step(OpKind op, std::vector<int> in, std::vector<int> out) {
  PlanStep s;
  s.op = op;
  s.inputs = std::move(in);
  s.outputs = std::move(out);
  return s;
}

} // namespace hgp::test
