// Tests of the CPU reductions and softmax executors: ReduceSum/ReduceMean over axis sets with
// and without keepdims, Softmax/LogSoftmax along inner and outer axes against double formulas
// (including large logits), and their gradients against finite differences.
#include "CpuTestUtil.h"

namespace hgp::cpu::test {
namespace {

AttrMap reduceAttrs(std::vector<int64_t> axes, int64_t keep) {
  AttrMap a;
  a.setInts("axes", axes);
  a.setInt("keepdims", keep);
  return a;
}

TEST(CpuReduceSoftmaxTest, ReduceOverAxisSets) {
  std::mt19937 rng(71);
  Shape xs = {2, 3, 4, 5};
  HostTensor x = randomTensor(xs, rng);
  for (std::vector<int64_t> axes :
       {std::vector<int64_t>{0}, {1}, {3}, {0, 2}, {2, 3}, {0, 1, 2, 3}, {0, 2, 3}})
    for (int64_t keep : {0, 1}) {
      SCOPED_TRACE(::testing::PrintToString(axes) + " keep " + std::to_string(keep));
      Shape kept = xs, y;
      for (int64_t a : axes) kept[size_t(a)] = 1;
      for (size_t d = 0; d < xs.size(); ++d) {
        bool reduced = std::find(axes.begin(), axes.end(), int64_t(d)) != axes.end();
        if (!reduced)
          y.push_back(xs[d]);
        else if (keep)
          y.push_back(1);
      }
      std::vector<double> sum(size_t(numElements(kept)), 0.0);
      int64_t count = x.numel() / numElements(kept);
      for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t rem = i, out = 0, stride = 1;
        for (int64_t d = 3; d >= 0; --d) {
          int64_t idx = rem % xs[size_t(d)];
          rem /= xs[size_t(d)];
          if (kept[size_t(d)] != 1) out += idx * stride;
          stride *= kept[size_t(d)];
        }
        sum[size_t(out)] += x[i];
      }
      HostTensor s = run1(OpKind::ReduceSum, reduceAttrs(axes, keep), {&x}, y);
      expectClose(s.values(), sum, 1e-5, 1e-5, "sum");
      for (double& v : sum) v /= double(count);
      HostTensor m = run1(OpKind::ReduceMean, reduceAttrs(axes, keep), {&x}, y);
      expectClose(m.values(), sum, 1e-6, 1e-5, "mean");
    }
  HostTensor same = run1(OpKind::ReduceSum, reduceAttrs({}, 1), {&x}, xs);
  EXPECT_EQ(same.storage, x.storage) << "empty axes copy X";
}

/// Softmax of x along `axis`, in double.
std::vector<double> refSoftmax(const HostTensor& x, int64_t axis, bool log) {
  int64_t outer = 1, n = x.shape[size_t(axis)], inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  std::vector<double> y(size_t(x.numel()));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < n; ++j) mx = std::max(mx, double(x[(o * n + j) * inner + i]));
      for (int64_t j = 0; j < n; ++j) sum += std::exp(x[(o * n + j) * inner + i] - mx);
      for (int64_t j = 0; j < n; ++j) {
        double v = x[(o * n + j) * inner + i] - mx;
        y[size_t((o * n + j) * inner + i)] = log ? v - std::log(sum) : std::exp(v) / sum;
      }
    }
  return y;
}

TEST(CpuReduceSoftmaxTest, SoftmaxAlongAnyAxis) {
  std::mt19937 rng(72);
  HostTensor x = randomTensor({3, 4, 5}, rng, -3.f, 3.f);
  for (int64_t axis : {0, 1, 2}) {
    SCOPED_TRACE(axis);
    AttrMap a;
    a.setInt("axis", axis);
    expectClose(run1(OpKind::Softmax, a, {&x}, x.shape).values(), refSoftmax(x, axis, false), 1e-7,
                1e-6);
    expectClose(run1(OpKind::LogSoftmax, a, {&x}, x.shape).values(), refSoftmax(x, axis, true),
                1e-6, 1e-6);
  }
  // Large logits: max subtraction keeps it finite.
  HostTensor big = tensor({1, 3}, {1000, 1001, 1002});
  AttrMap a;
  a.setInt("axis", 1);
  expectClose(run1(OpKind::Softmax, a, {&big}, {1, 3}).values(), refSoftmax(big, 1, false), 1e-7,
              1e-6);
  expectClose(run1(OpKind::LogSoftmax, a, {&big}, {1, 3}).values(), refSoftmax(big, 1, true), 1e-6,
              1e-6);
}

TEST(CpuReduceSoftmaxTest, SoftmaxGradientsMatchFiniteDifferences) {
  std::mt19937 rng(73);
  for (int64_t axis : {0, 1, 2})
    for (bool log : {false, true}) {
      SCOPED_TRACE(std::to_string(axis) + (log ? " log" : ""));
      OpKind fwd = log ? OpKind::LogSoftmax : OpKind::Softmax;
      OpKind bwd = log ? OpKind::LogSoftmaxBwd : OpKind::SoftmaxBwd;
      AttrMap a;
      a.setInt("axis", axis);
      HostTensor x = randomTensor({2, 3, 4}, rng, -2.f, 2.f), w = randomTensor({2, 3, 4}, rng);
      HostTensor y = run1(fwd, a, {&x}, x.shape);
      HostTensor dx = run1(bwd, a, {&w, &y}, x.shape);
      auto loss = [&] { return weightedSum(run1(fwd, a, {&x}, x.shape), w); };
      expectClose(dx.values(), numericGradient(x, loss, 1e-2), 1e-3, 2e-3);
    }
}

} // namespace
} // namespace hgp::cpu::test
