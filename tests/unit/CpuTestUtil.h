// CpuTestUtil.h - runs one CPU executor on host buffers, for the Cpu*Test.cpp unit tests.
//
// A HostTensor owns a dtype, a shape and its bytes. runOp builds a PlanStep with the given
// attributes, wraps the tensors in TensorViews and calls the op's cpu::exec<Name>; passing the
// same HostTensor as an input and an output makes them share storage, as an in-place plan step
// does. The finite-difference helper checks a gradient executor against its forward op.
#pragma once

#include "runtime/cpu/CpuKernel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

/// Asserts that a Status is Ok, printing its message otherwise.
#define ASSERT_OK(expr)                                                                            \
  do {                                                                                             \
    ::hgp::Status _status = (expr);                                                                \
    ASSERT_TRUE(_status.isOk()) << _status.toString();                                             \
  } while (0)

namespace hgp::cpu::test {

struct HostTensor {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint64_t> storage; // 8-byte aligned bytes

  HostTensor() = default;
  HostTensor(DType t, Shape s)
      : dtype(t), shape(std::move(s)),
        storage(static_cast<size_t>((numElements(shape) * dtypeSize(t) + 7) / 8 + 1), 0) {}

  int64_t numel() const { return numElements(shape); }
  void* data() { return storage.data(); }
  float* f32() { return reinterpret_cast<float*>(storage.data()); }
  const float* f32() const { return reinterpret_cast<const float*>(storage.data()); }
  int64_t* i64() { return reinterpret_cast<int64_t*>(storage.data()); }
  float& operator[](int64_t i) { return f32()[i]; }
  float operator[](int64_t i) const { return f32()[i]; }
  std::vector<float> values() const { return std::vector<float>(f32(), f32() + numel()); }
  std::vector<double> doubles() const { return std::vector<double>(f32(), f32() + numel()); }
  TensorView view() { return {dtype, &shape, data()}; }
};

inline HostTensor tensor(Shape s, std::vector<float> v) {
  HostTensor t(DType::F32, std::move(s));
  EXPECT_EQ(int64_t(v.size()), t.numel()) << "tensor() got the wrong number of values";
  std::memcpy(t.data(), v.data(), std::min(v.size(), size_t(t.numel())) * sizeof(float));
  return t;
}
inline HostTensor zeros(Shape s) {
  return HostTensor(DType::F32, std::move(s));
}
inline HostTensor scalar(float v) {
  return tensor({}, {v});
}
inline HostTensor scalarI64(int64_t v) {
  HostTensor t(DType::I64, {});
  t.i64()[0] = v;
  return t;
}
inline HostTensor labels(std::vector<int64_t> v) {
  HostTensor t(DType::I64, {int64_t(v.size())});
  std::memcpy(t.data(), v.data(), v.size() * sizeof(int64_t));
  return t;
}
/// Uniform values in [lo, hi).
inline HostTensor randomTensor(Shape s, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  HostTensor t(DType::F32, std::move(s));
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = u(rng);
  return t;
}

/// Runs the executor of `op`. The same HostTensor in `in` and `out` means shared storage.
inline Status runOp(OpKind op, const AttrMap& attrs, std::vector<HostTensor*> in,
                    std::vector<HostTensor*> out) {
  using ExecFn = Status (*)(KernelArgs&);
  static constexpr ExecFn kExec[] = {
#define HGP_OP(Name, ...) &exec##Name,
#include "runtime/plan/OpList.def"
  };
  PlanStep step;
  step.op = op;
  step.attrs = attrs;
  step.loc = "test";
  KernelArgs a{step, {}, {}};
  for (HostTensor* t : in) a.in.push_back(t->view());
  for (HostTensor* t : out) a.out.push_back(t->view());
  return kExec[int(op)](a);
}

/// Runs an op with one f32 result of shape `outShape` and returns it; a failure fails the test.
inline HostTensor run1(OpKind op, const AttrMap& attrs, std::vector<HostTensor*> in,
                       Shape outShape) {
  HostTensor y(DType::F32, std::move(outShape));
  Status s = runOp(op, attrs, std::move(in), {&y});
  EXPECT_TRUE(s.isOk()) << s.toString();
  return y;
}

/// Expects |actual[i] - expected[i]| <= atol + rtol * |expected[i]| everywhere; reports the
/// first few mismatches.
inline void expectClose(const std::vector<float>& actual, const std::vector<double>& expected,
                        double atol, double rtol, const std::string& what = "") {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    double tol = atol + rtol * std::fabs(expected[i]);
    bool ok = std::fabs(double(actual[i]) - expected[i]) <= tol;
    if (!ok && reported++ < 5)
      ADD_FAILURE() << what << " element " << i << ": got " << actual[i] << ", expected "
                    << expected[i] << " (tol " << tol << ")";
  }
}
inline void expectClose(const std::vector<float>& actual, const std::vector<float>& expected,
                        double atol, double rtol, const std::string& what = "") {
  expectClose(actual, std::vector<double>(expected.begin(), expected.end()), atol, rtol, what);
}

/// sum_i w[i] * y[i] in double: the scalar a gradient check differentiates.
inline double weightedSum(const HostTensor& y, const HostTensor& w) {
  double s = 0;
  for (int64_t i = 0; i < y.numel(); ++i) s += double(w[i]) * double(y[i]);
  return s;
}

/// Central differences of loss() w.r.t. every element of x (which loss() reads), step h.
inline std::vector<double> numericGradient(HostTensor& x, const std::function<double()>& loss,
                                           double h) {
  std::vector<double> g(size_t(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    float saved = x[i];
    x[i] = float(double(saved) + h);
    double up = loss();
    x[i] = float(double(saved) - h);
    double down = loss();
    x[i] = saved;
    g[size_t(i)] = (up - down) / (2 * h);
  }
  return g;
}

/// Attribute helpers.
inline AttrMap attrs() {
  return AttrMap();
}

} // namespace hgp::cpu::test
