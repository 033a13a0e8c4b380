// OpCheck.h - the GPU op tests' one way to check an op: build a small graph over parameters,
// differentiate it (so the gradient ops run too), emit a plan, and compare every output and
// gradient on the CUDA backend with the CPU reference, eager and captured (GpuTestUtil.h's
// runAndCompare). The op suite (CudaOpSuiteTest.cpp, CudaTrainingOpsTest.cpp) and the modern
// families' tests (CudaModernOpsTest.cpp) share it, with the small builders they all use.
#pragma once

#include "tests/gpu/GpuTestUtil.h"

#include <map>

namespace hgp::gputest {

using Builder = std::function<std::vector<Value*>(Graph&, const std::vector<Value*>&)>;

/// Parameters p0, p1, ... of the given types, `build` over them, autodiff, compare.
/// Only the first `lossTerms` outputs feed the loss; the others are compared but not
/// differentiated.
inline void checkOp(const std::string& what, std::vector<TensorType> params, const Builder& build,
             RunSpec spec = {}, const std::string& precision = "fp32",
             size_t lossTerms = SIZE_MAX) {
  SCOPED_TRACE(what);
  Graph g(what);
  std::vector<Value*> ps;
  for (size_t i = 0; i < params.size(); ++i)
    ps.push_back(addValue(g, "p" + std::to_string(i), TensorRole::Param, params[i]));
  std::vector<Value*> outs = build(g, ps);
  for (Value* v : outs) ASSERT_NE(v, nullptr);
  auto e = emit(g, differentiate(g, outs, lossTerms), precision);
  ASSERT_TRUE(e.has_value());
  runAndCompare(*e, spec);
}

/// A feeder that gives tensors named in `ranges` uniform values in [lo, hi); others the default.
inline Feeder rangeFeed(std::map<std::string, std::pair<double, double>> ranges) {
  return [ranges](const PlanTensor& t, int run) {
    auto it = ranges.find(t.name);
    if (it == ranges.end() || t.type.dtype != DType::F32) return defaultFeed(t, run);
    return uniformBytes(t.type, hashName(t.name, uint64_t(run) + 17), it->second.first,
                        it->second.second);
  };
}

inline AttrMap attrs(std::initializer_list<std::pair<const char*, AttrValue>> kv) {
  AttrMap a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

using I = std::vector<int64_t>;
inline TensorType f32(Shape s) {
  return {DType::F32, std::move(s)};
}

/// The one-range form: the tensor `name` gets uniform values in [lo, hi).
inline Feeder rangeFeed(const std::string& name, double lo, double hi) {
  return rangeFeed(std::map<std::string, std::pair<double, double>>{{name, {lo, hi}}});
}

} // namespace hgp::gputest
