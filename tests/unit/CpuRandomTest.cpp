// Tests of the CPU random executors, Dropout, Bernoulli and RandomNormal. Dropout: the mask is a pure function of (seed, key, iter, index),
// forward and backward agree, the keep fraction is 1 - ratio, kept values are scaled by
// 1/(1-ratio), and without an iteration counter or with ratio 0 dropout is the identity.
#include "CpuTestUtil.h"

namespace hgp::cpu::test {
namespace {

AttrMap dropoutAttrs(double ratio, int64_t seed = 1234, int64_t key = 7) {
  AttrMap a;
  a.setFloat("ratio", ratio);
  a.setInt("seed", seed);
  a.setInt("key", key);
  return a;
}

TEST(CpuRandomTest, DropoutKeepsOneMinusRatioAndScales) {
  const int64_t n = 200000;
  HostTensor x = tensor({n}, std::vector<float>(size_t(n), 2.f));
  HostTensor iter = scalarI64(5);
  for (double ratio : {0.1, 0.5, 0.8}) {
    SCOPED_TRACE(ratio);
    HostTensor y = run1(OpKind::Dropout, dropoutAttrs(ratio), {&x, &iter}, {n});
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (y[i] == 0.f) continue;
      ++kept;
      ASSERT_EQ(y[i], 2.f * float(1.0 / (1.0 - ratio))) << i;
    }
    double frac = double(kept) / double(n), want = 1 - ratio;
    // Binomial standard deviation is below 0.0012 here; allow 5 sigma.
    EXPECT_NEAR(frac, want, 0.006);
    // The mask is exactly dropoutUniform's.
    for (int64_t i = 0; i < 1000; ++i)
      ASSERT_EQ(y[i] != 0.f, dropoutUniform(1234, 7, 5, uint64_t(i)) >= float(ratio)) << i;
  }
}

TEST(CpuRandomTest, DrawEqualToRatioIsKept) {
  // keep iff u >= ratio: with ratio equal to element 0's draw, element 0 survives.
  float u0 = dropoutUniform(99, 5, 17, 0);
  ASSERT_GT(u0, 0.f);
  HostTensor x = tensor({4}, {1, 1, 1, 1}), iter = scalarI64(17);
  HostTensor y = run1(OpKind::Dropout, dropoutAttrs(u0, 99, 5), {&x, &iter}, {4});
  EXPECT_NE(y[0], 0.f);
}

TEST(CpuRandomTest, BackwardAppliesTheForwardMask) {
  std::mt19937 rng(81);
  HostTensor x = randomTensor({3, 1000}, rng, 0.5f, 1.5f),
             dy = randomTensor({3, 1000}, rng, 0.5f, 1.5f);
  HostTensor iter = scalarI64(42);
  AttrMap a = dropoutAttrs(0.3);
  HostTensor y = run1(OpKind::Dropout, a, {&x, &iter}, x.shape);
  HostTensor dx = run1(OpKind::DropoutBwd, a, {&dy, &iter}, x.shape);
  float scale = float(1.0 / 0.7);
  for (int64_t i = 0; i < x.numel(); ++i) {
    bool kept = y[i] != 0.f;
    ASSERT_EQ(dx[i] != 0.f, kept) << i;
    if (kept) {
      ASSERT_EQ(y[i], x[i] * scale);
      ASSERT_EQ(dx[i], dy[i] * scale);
    }
  }
}

TEST(CpuRandomTest, MaskChangesWithIterationSeedAndKey) {
  HostTensor x = tensor({4096}, std::vector<float>(4096, 1.f));
  auto mask = [&](int64_t it, int64_t seed, int64_t key) {
    HostTensor iter = scalarI64(it);
    HostTensor y = run1(OpKind::Dropout, dropoutAttrs(0.5, seed, key), {&x, &iter}, {4096});
    std::vector<bool> m;
    for (float v : y.values()) m.push_back(v != 0.f);
    return m;
  };
  auto base = mask(1, 10, 3);
  EXPECT_EQ(base, mask(1, 10, 3)) << "same inputs, same mask";
  for (auto other : {mask(2, 10, 3), mask(1, 11, 3), mask(1, 10, 4)}) {
    int64_t differ = 0;
    for (size_t i = 0; i < base.size(); ++i) differ += base[i] != other[i];
    EXPECT_GT(differ, 1500) << "masks should be nearly independent";
  }
}

TEST(CpuRandomTest, IdentityWithoutIterOrWithRatioZero) {
  std::mt19937 rng(82);
  HostTensor x = randomTensor({100}, rng), iter = scalarI64(3);
  EXPECT_EQ(run1(OpKind::Dropout, dropoutAttrs(0.5), {&x}, {100}).values(), x.values());
  EXPECT_EQ(run1(OpKind::Dropout, dropoutAttrs(0.0), {&x, &iter}, {100}).values(), x.values());
  EXPECT_EQ(run1(OpKind::DropoutBwd, dropoutAttrs(0.0), {&x, &iter}, {100}).values(), x.values());
}

AttrMap bernoulliAttrs(double p, int64_t key = 3) {
  AttrMap a;
  a.setFloat("p", p);
  a.setInt("seed", 1234);
  a.setInt("key", key);
  return a;
}

// Stochastic depth, mode "row" (torchvision.ops.StochasticDepth): one draw per sample, kept rows
// scaled by 1 / (1 - drop). Over many steps the dropped fraction is the drop probability, each
// step draws a new mask, and the mask is dropoutUniform's.
TEST(CpuRandomTest, BernoulliRowMaskDropsRowsAtTheRateAndRedrawsEachStep) {
  const int64_t rows = 64, steps = 400;
  const double survival = 0.8;
  HostTensor like = tensor({rows, 1, 1, 1}, std::vector<float>(size_t(rows), 0.f));
  int64_t dropped = 0, changed = 0;
  std::vector<float> previous;
  for (int64_t step = 0; step < steps; ++step) {
    HostTensor iter = scalarI64(step);
    HostTensor m = run1(OpKind::Bernoulli, bernoulliAttrs(survival), {&like, &iter}, like.shape);
    std::vector<float> mask(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) {
      ASSERT_TRUE(m[i] == 0.f || m[i] == 1.f);
      ASSERT_EQ(m[i] == 1.f, dropoutUniform(1234, 3, uint64_t(step), uint64_t(i)) < float(survival));
      dropped += m[i] == 0.f;
      mask[size_t(i)] = m[i];
    }
    changed += !previous.empty() && previous != mask;
    previous = mask;
  }
  double frac = double(dropped) / double(rows * steps);
  // 25600 draws: the binomial standard deviation is 0.0025; allow 5 sigma.
  EXPECT_NEAR(frac, 1 - survival, 0.0125);
  EXPECT_GT(changed, steps * 9 / 10);
  // Scaled by 1 / survival, the mask has mean 1: the block's expectation is kept.
  EXPECT_NEAR((1 - frac) / survival, 1.0, 0.016);
}

TEST(CpuRandomTest, BernoulliWithoutCounterIsItsExpectation) {
  HostTensor like = tensor({3, 2}, std::vector<float>(6, 5.f));
  HostTensor m = run1(OpKind::Bernoulli, bernoulliAttrs(0.8), {&like}, like.shape);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(m[i], 0.8f);
}

// RandomNormal: mean and scale over many draws, a standard normal's tails, new draws each step
// and per key, and the expectation without a counter.
AttrMap normalAttrs(double mean, double scale, int64_t key = 11) {
  AttrMap a;
  a.setFloat("mean", mean);
  a.setFloat("scale", scale);
  a.setInt("seed", 1234);
  a.setInt("key", key);
  return a;
}

TEST(CpuRandomTest, RandomNormalHasItsMeanAndScaleAndRedrawsEachStep) {
  const int64_t n = 200000;
  HostTensor like = tensor({n}, std::vector<float>(size_t(n), 0.f));
  HostTensor it3 = scalarI64(3), it4 = scalarI64(4);
  HostTensor y = run1(OpKind::RandomNormal, normalAttrs(1.5, 2.0), {&like, &it3}, {n});
  double sum = 0, sq = 0;
  int64_t beyond2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    double z = (double(y[i]) - 1.5) / 2.0;
    sum += z;
    sq += z * z;
    beyond2 += std::fabs(z) > 2.0;
  }
  double mean = sum / double(n), var = sq / double(n) - mean * mean;
  // Standard errors: 0.0022 for the mean, 0.0032 for the variance; allow 5 of them.
  EXPECT_NEAR(mean, 0.0, 0.011);
  EXPECT_NEAR(var, 1.0, 0.016);
  // P(|z| > 2) = 0.0455 for a normal (0.00047 standard error).
  EXPECT_NEAR(double(beyond2) / double(n), 0.0455, 0.0025);
  HostTensor again = run1(OpKind::RandomNormal, normalAttrs(1.5, 2.0), {&like, &it3}, {n});
  HostTensor next = run1(OpKind::RandomNormal, normalAttrs(1.5, 2.0), {&like, &it4}, {n});
  HostTensor other = run1(OpKind::RandomNormal, normalAttrs(1.5, 2.0, 12), {&like, &it3}, {n});
  int64_t same = 0, sameNext = 0, sameKey = 0;
  for (int64_t i = 0; i < n; ++i) {
    same += again[i] == y[i];
    sameNext += next[i] == y[i];
    sameKey += other[i] == y[i];
  }
  EXPECT_EQ(same, n);
  EXPECT_LT(sameNext, n / 1000);
  EXPECT_LT(sameKey, n / 1000);
}

TEST(CpuRandomTest, RandomNormalWithoutCounterIsItsMean) {
  HostTensor like = tensor({3, 2}, std::vector<float>(6, 5.f));
  HostTensor m = run1(OpKind::RandomNormal, normalAttrs(-0.25, 3.0), {&like}, like.shape);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(m[i], -0.25f);
}

} // namespace
} // namespace hgp::cpu::test
