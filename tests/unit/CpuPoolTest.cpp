// Tests of the CPU pooling executors: hand-computed windows (ties, padding, ceil_mode overhang,
// count_include_pad, asymmetric pads) with PyTorch's semantics, and finite-difference checks of
// the gradients against their forward ops in 1-D, 2-D and 3-D.
#include "CpuTestUtil.h"

#include <limits>

namespace hgp::cpu::test {
namespace {

AttrMap poolAttrs(std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p,
                  int64_t ceil = 0, int64_t countIncludePad = -1) {
  AttrMap a;
  a.setInts("kernel_shape", k);
  a.setInts("strides", s);
  a.setInts("pads", p);
  a.setInt("ceil_mode", ceil);
  if (countIncludePad >= 0) a.setInt("count_include_pad", countIncludePad);
  return a;
}

TEST(CpuPoolTest, MaxPoolTiesGoToTheFirstElement) {
  // One 2x2 window of equal values; the gradient must land on the top-left element only.
  HostTensor x = tensor({1, 1, 2, 4}, {7, 7, 1, 5, 7, 7, 5, 2});
  AttrMap a = poolAttrs({2, 2}, {2, 2}, {0, 0, 0, 0});
  HostTensor y = run1(OpKind::MaxPool, a, {&x}, {1, 1, 1, 2});
  expectClose(y.values(), std::vector<float>{7, 5}, 0, 0);
  HostTensor dy = tensor({1, 1, 1, 2}, {10, 20});
  HostTensor dx = run1(OpKind::MaxPoolBwd, a, {&dy, &x}, {1, 1, 2, 4});
  // Second window [1, 5; 5, 2]: 5 at (0,3) comes before 5 at (1,2) in row-major order.
  expectClose(dx.values(), std::vector<float>{10, 0, 0, 20, 0, 0, 0, 0}, 0, 0);
}

TEST(CpuPoolTest, MaxPoolPaddingNeverWins) {
  HostTensor x = tensor({1, 1, 2, 2}, {-4, -3, -2, -1});
  AttrMap a = poolAttrs({2, 2}, {1, 1}, {1, 1, 1, 1});
  HostTensor y = run1(OpKind::MaxPool, a, {&x}, {1, 1, 3, 3});
  expectClose(y.values(), std::vector<float>{-4, -3, -3, -2, -1, -1, -2, -1, -1}, 0, 0);
  HostTensor dy = tensor({1, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1});
  HostTensor dx = run1(OpKind::MaxPoolBwd, a, {&dy, &x}, {1, 1, 2, 2});
  expectClose(dx.values(), std::vector<float>{1, 2, 2, 4}, 0, 0);
}

TEST(CpuPoolTest, MaxPoolCeilModeAndDilation) {
  // 1-D, in 5, k 2, s 2, ceil: 3 windows, the last holds x[4] only.
  HostTensor x = tensor({1, 1, 5}, {1, 9, 3, 2, 8});
  HostTensor y = run1(OpKind::MaxPool, poolAttrs({2}, {2}, {0, 0}, 1), {&x}, {1, 1, 3});
  expectClose(y.values(), std::vector<float>{9, 3, 8}, 0, 0);
  // PyTorch's rule drops a last window that would start in the trailing padding:
  // in 3, k 2, s 2, pads 1/1, ceil -> 2 outputs, not 3.
  HostTensor x3 = tensor({1, 1, 3}, {4, 5, 6});
  HostTensor y3 = run1(OpKind::MaxPool, poolAttrs({2}, {2}, {1, 1}, 1), {&x3}, {1, 1, 2});
  expectClose(y3.values(), std::vector<float>{4, 6}, 0, 0);
  HostTensor wrong = zeros({1, 1, 3});
  EXPECT_EQ(runOp(OpKind::MaxPool, poolAttrs({2}, {2}, {1, 1}, 1), {&x3}, {&wrong}).code(),
            ErrorCode::Internal);
  // Dilation 2: windows {0, 2} and {1, 3} and {2, 4}.
  AttrMap d = poolAttrs({2}, {1}, {0, 0});
  d.setInts("dilations", {2});
  HostTensor yd = run1(OpKind::MaxPool, d, {&x}, {1, 1, 3});
  expectClose(yd.values(), std::vector<float>{3, 9, 8}, 0, 0);
}

TEST(CpuPoolTest, AveragePoolCountIncludePad) {
  // x = 1..5, k 3, s 2, pads 1/1: windows [-1,2), [1,4), [3,6).
  HostTensor x = tensor({1, 1, 5}, {1, 2, 3, 4, 5});
  HostTensor inc = run1(OpKind::AveragePool, poolAttrs({3}, {2}, {1, 1}, 0, 1), {&x}, {1, 1, 3});
  expectClose(inc.values(), std::vector<float>{1, 3, 3}, 1e-6, 0);
  HostTensor exc = run1(OpKind::AveragePool, poolAttrs({3}, {2}, {1, 1}, 0, 0), {&x}, {1, 1, 3});
  expectClose(exc.values(), std::vector<float>{1.5, 3, 4.5}, 1e-6, 0);
}

TEST(CpuPoolTest, AveragePoolCeilOverhangIsNotCounted) {
  // k 2, s 2, no pads, ceil: the last window [4, 6) is clamped to [4, 5): divisor 1 even with
  // count_include_pad (PyTorch: avg_pool1d(arange(1,6), 2, 2, ceil_mode=True) = [1.5, 3.5, 5]).
  HostTensor x = tensor({1, 1, 5}, {1, 2, 3, 4, 5});
  for (int inc : {0, 1}) {
    HostTensor y = run1(OpKind::AveragePool, poolAttrs({2}, {2}, {0, 0}, 1, inc), {&x}, {1, 1, 3});
    expectClose(y.values(), std::vector<float>{1.5, 3.5, 5}, 1e-6, 0);
  }
  // x = 1..6, k 3, s 2, pads 1/1, ceil: 4 windows; the last is [5, 8) clamped to [5, 7), which
  // holds x[5] = 6 and one padding position: 6/2 with count_include_pad, 6/1 without.
  HostTensor x6 = tensor({1, 1, 6}, {1, 2, 3, 4, 5, 6});
  HostTensor inc = run1(OpKind::AveragePool, poolAttrs({3}, {2}, {1, 1}, 1, 1), {&x6}, {1, 1, 4});
  expectClose(inc.values(), std::vector<float>{1, 3, 5, 3}, 1e-6, 0);
  HostTensor exc = run1(OpKind::AveragePool, poolAttrs({3}, {2}, {1, 1}, 1, 0), {&x6}, {1, 1, 4});
  expectClose(exc.values(), std::vector<float>{1.5, 3, 5, 6}, 1e-6, 0);
}

TEST(CpuPoolTest, AveragePoolAsymmetricPads) {
  // k 3, s 1, pads 0/2 on x = 1..3: windows [0,3), [1,4), [2,5).
  HostTensor x = tensor({1, 1, 3}, {1, 2, 3});
  HostTensor inc = run1(OpKind::AveragePool, poolAttrs({3}, {1}, {0, 2}, 0, 1), {&x}, {1, 1, 3});
  expectClose(inc.values(), std::vector<float>{2, 5.f / 3, 1}, 1e-6, 0);
  HostTensor exc = run1(OpKind::AveragePool, poolAttrs({3}, {1}, {0, 2}, 0, 0), {&x}, {1, 1, 3});
  expectClose(exc.values(), std::vector<float>{2, 2.5, 3}, 1e-6, 0);
}

TEST(CpuPoolTest, AveragePool2dMatchesHandComputation) {
  // 3x3 input, k 2, s 2, pads 1/1 on both dims: four windows, corner ones mostly padding.
  HostTensor x = tensor({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  HostTensor inc =
      run1(OpKind::AveragePool, poolAttrs({2, 2}, {2, 2}, {1, 1, 1, 1}, 0, 1), {&x}, {1, 1, 2, 2});
  expectClose(inc.values(), std::vector<float>{1.f / 4, 5.f / 4, 11.f / 4, 28.f / 4}, 1e-6, 0);
  HostTensor exc =
      run1(OpKind::AveragePool, poolAttrs({2, 2}, {2, 2}, {1, 1, 1, 1}, 0, 0), {&x}, {1, 1, 2, 2});
  expectClose(exc.values(), std::vector<float>{1, 2.5, 5.5, 7}, 1e-6, 0);
}

/// Input values that are pairwise at least 0.1 apart, so a small perturbation never changes
/// which element is a window's maximum.
HostTensor distinctValues(Shape s, std::mt19937& rng) {
  HostTensor t(DType::F32, std::move(s));
  std::vector<int> perm(size_t(t.numel()));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = int(i);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = 0.1f * float(perm[size_t(i)]) - 2.f;
  return t;
}

struct PoolCase {
  const char* name;
  Shape x, y;
  AttrMap attrs;
};

std::vector<PoolCase> gradientCases() {
  AttrMap dil = poolAttrs({2, 2}, {1, 2}, {1, 0, 0, 1}, 0);
  dil.setInts("dilations", {2, 1});
  return {
      {"1-D ceil", {2, 3, 9}, {2, 3, 5}, poolAttrs({3}, {2}, {1, 1}, 1, 1)},
      {"2-D pads", {2, 2, 6, 5}, {2, 2, 3, 3}, poolAttrs({3, 2}, {2, 2}, {1, 0, 1, 1}, 0, 0)},
      {"2-D ceil include pad",
       {1, 2, 5, 5},
       {1, 2, 3, 3},
       poolAttrs({2, 2}, {2, 2}, {0, 0, 0, 0}, 1, 1)},
      {"3-D",
       {1, 2, 4, 5, 3},
       {1, 2, 2, 3, 2},
       poolAttrs({2, 2, 2}, {2, 2, 1}, {0, 1, 0, 0, 0, 0}, 0, 1)},
      {"2-D dilated (max only)", {1, 1, 5, 6}, {1, 1, 4, 3}, dil},
  };
}

TEST(CpuPoolTest, GradientsMatchFiniteDifferences) {
  std::mt19937 rng(11);
  for (const PoolCase& c : gradientCases()) {
    SCOPED_TRACE(c.name);
    HostTensor x = distinctValues(c.x, rng), w = randomTensor(c.y, rng);
    AttrMap bwd = c.attrs;
    bwd.setInts("x_shape", c.x);
    // Max pooling.
    auto maxLoss = [&] { return weightedSum(run1(OpKind::MaxPool, c.attrs, {&x}, c.y), w); };
    HostTensor dxMax = run1(OpKind::MaxPoolBwd, bwd, {&w, &x}, c.x);
    expectClose(dxMax.values(), numericGradient(x, maxLoss, 1e-2), 1e-3, 1e-3, "max");
    if (c.attrs.has("dilations")) continue;
    // Average pooling.
    auto avgLoss = [&] { return weightedSum(run1(OpKind::AveragePool, c.attrs, {&x}, c.y), w); };
    HostTensor dxAvg = run1(OpKind::AveragePoolBwd, bwd, {&w}, c.x);
    expectClose(dxAvg.values(), numericGradient(x, avgLoss, 1e-2), 1e-3, 1e-3, "average");
  }
}

TEST(CpuPoolTest, GlobalAveragePoolAndGradient) {
  std::mt19937 rng(12);
  HostTensor x = randomTensor({2, 3, 4, 5}, rng);
  HostTensor y = run1(OpKind::GlobalAveragePool, {}, {&x}, {2, 3, 1, 1});
  std::vector<double> ref(6, 0.0);
  for (int64_t i = 0; i < x.numel(); ++i) ref[size_t(i / 20)] += x[i] / 20.0;
  expectClose(y.values(), ref, 1e-6, 1e-6);
  HostTensor w = randomTensor({2, 3, 1, 1}, rng);
  AttrMap a;
  a.setInts("x_shape", {2, 3, 4, 5});
  HostTensor dx = run1(OpKind::GlobalAveragePoolBwd, a, {&w}, {2, 3, 4, 5});
  auto loss = [&] {
    return weightedSum(run1(OpKind::GlobalAveragePool, {}, {&x}, {2, 3, 1, 1}), w);
  };
  expectClose(dx.values(), numericGradient(x, loss, 1e-2), 1e-4, 1e-3);
}

TEST(CpuPoolTest, AveragePoolRejectsDilation) {
  AttrMap a = poolAttrs({2}, {1}, {0, 0});
  a.setInts("dilations", {2});
  HostTensor x = zeros({1, 1, 5}), y = zeros({1, 1, 3});
  EXPECT_EQ(runOp(OpKind::AveragePool, a, {&x}, {&y}).code(), ErrorCode::Internal);
}

} // namespace
} // namespace hgp::cpu::test
