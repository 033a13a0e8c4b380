// Tests of the CPU normalization executors: BatchNorm in inference and training mode against
// formulas in double, BatchNormBwd in both modes against finite differences of the matching
// forward, the running-statistics update (unbiased variance, skipped steps, in-place storage),
// and LRN with its gradient against ONNX's definition.
#include "CpuTestUtil.h"

namespace hgp::cpu::test {
namespace {

constexpr double kEps = 1e-5;

AttrMap epsAttrs() {
  AttrMap a;
  a.setFloat("epsilon", kEps);
  return a;
}

struct Stats {
  std::vector<double> mean, var; // biased variance
};

Stats channelStats(const HostTensor& x) {
  int64_t n = x.shape[0], c = x.shape[1], plane = x.numel() / (n * c);
  Stats s{std::vector<double>(size_t(c), 0.0), std::vector<double>(size_t(c), 0.0)};
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < plane; ++j) sum += x[(i * c + ch) * plane + j];
    double mean = sum / double(n * plane);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < plane; ++j) {
        double d = x[(i * c + ch) * plane + j] - mean;
        sq += d * d;
      }
    s.mean[size_t(ch)] = mean;
    s.var[size_t(ch)] = sq / double(n * plane);
  }
  return s;
}

std::vector<double> normalize(const HostTensor& x, const std::vector<double>& mean,
                              const std::vector<double>& var, const HostTensor& scale,
                              const HostTensor& bias) {
  int64_t c = x.shape[1], plane = x.numel() / (x.shape[0] * c);
  std::vector<double> y(size_t(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t ch = i / plane % c;
    y[size_t(i)] =
        (x[i] - mean[size_t(ch)]) / std::sqrt(var[size_t(ch)] + kEps) * scale[ch] + bias[ch];
  }
  return y;
}

TEST(CpuNormTest, BatchNormInferenceMatchesFormula) {
  std::mt19937 rng(21);
  HostTensor x = randomTensor({2, 3, 4, 5}, rng), scale = randomTensor({3}, rng);
  HostTensor bias = randomTensor({3}, rng), mean = randomTensor({3}, rng);
  HostTensor var = randomTensor({3}, rng, 0.1f, 2.f);
  HostTensor y = run1(OpKind::BatchNorm, epsAttrs(), {&x, &scale, &bias, &mean, &var}, x.shape);
  std::vector<double> m(mean.f32(), mean.f32() + 3), v(var.f32(), var.f32() + 3);
  expectClose(y.values(), normalize(x, m, v, scale, bias), 1e-5, 1e-5);
}

TEST(CpuNormTest, BatchNormTrainUsesBiasedBatchStatistics) {
  std::mt19937 rng(22);
  for (Shape shape : {Shape{4, 3}, Shape{2, 3, 7}, Shape{3, 2, 4, 5}, Shape{2, 2, 2, 3, 2}}) {
    HostTensor x = randomTensor(shape, rng, -2.f, 3.f);
    int64_t c = shape[1];
    HostTensor scale = randomTensor({c}, rng), bias = randomTensor({c}, rng);
    HostTensor y(DType::F32, shape), mean = zeros({c}), var = zeros({c});
    ASSERT_OK(runOp(OpKind::BatchNormTrain, epsAttrs(), {&x, &scale, &bias}, {&y, &mean, &var}));
    Stats s = channelStats(x);
    expectClose(mean.values(), s.mean, 1e-6, 1e-6, "mean");
    expectClose(var.values(), s.var, 1e-6, 1e-6, "var");
    expectClose(y.values(), normalize(x, s.mean, s.var, scale, bias), 1e-5, 1e-5, "y");
  }
}

TEST(CpuNormTest, BatchNormBwdTrainingMatchesFiniteDifferences) {
  std::mt19937 rng(23);
  HostTensor x = randomTensor({3, 2, 2, 3}, rng, -2.f, 2.f);
  HostTensor scale = randomTensor({2}, rng, 0.5f, 1.5f), bias = randomTensor({2}, rng);
  HostTensor w = randomTensor(x.shape, rng);
  auto forward = [&](HostTensor& mean, HostTensor& var) {
    HostTensor y(DType::F32, x.shape);
    EXPECT_TRUE(runOp(OpKind::BatchNormTrain, epsAttrs(), {&x, &scale, &bias}, {&y, &mean, &var}));
    return y;
  };
  auto loss = [&] {
    HostTensor m = zeros({2}), v = zeros({2});
    return weightedSum(forward(m, v), w);
  };
  HostTensor mean = zeros({2}), var = zeros({2});
  forward(mean, var);
  AttrMap a = epsAttrs();
  a.setInt("batch_stats", 1);
  HostTensor dx(DType::F32, x.shape), dscale = zeros({2}), dbias = zeros({2});
  ASSERT_OK(runOp(OpKind::BatchNormBwd, a, {&w, &x, &scale, &mean, &var}, {&dx, &dscale, &dbias}));
  expectClose(dx.values(), numericGradient(x, loss, 1e-2), 2e-3, 2e-3, "dX");
  expectClose(dscale.values(), numericGradient(scale, loss, 1e-2), 2e-3, 2e-3, "dscale");
  expectClose(dbias.values(), numericGradient(bias, loss, 1e-2), 2e-3, 2e-3, "dbias");
}

TEST(CpuNormTest, BatchNormBwdFrozenMatchesFiniteDifferences) {
  std::mt19937 rng(24);
  HostTensor x = randomTensor({3, 2, 2, 3}, rng, -2.f, 2.f);
  HostTensor scale = randomTensor({2}, rng, 0.5f, 1.5f), bias = randomTensor({2}, rng);
  HostTensor mean = randomTensor({2}, rng), var = randomTensor({2}, rng, 0.5f, 2.f);
  HostTensor w = randomTensor(x.shape, rng);
  auto loss = [&] {
    return weightedSum(
        run1(OpKind::BatchNorm, epsAttrs(), {&x, &scale, &bias, &mean, &var}, x.shape), w);
  };
  AttrMap a = epsAttrs();
  a.setInt("batch_stats", 0);
  HostTensor dx(DType::F32, x.shape), dscale = zeros({2}), dbias = zeros({2});
  ASSERT_OK(runOp(OpKind::BatchNormBwd, a, {&w, &x, &scale, &mean, &var}, {&dx, &dscale, &dbias}));
  expectClose(dx.values(), numericGradient(x, loss, 1e-2), 1e-3, 1e-3, "dX");
  expectClose(dscale.values(), numericGradient(scale, loss, 1e-2), 1e-3, 1e-3, "dscale");
  expectClose(dbias.values(), numericGradient(bias, loss, 1e-2), 1e-3, 1e-3, "dbias");
}

TEST(CpuNormTest, BnRunningUpdateFollowsOnnxMomentum) {
  HostTensor rm = tensor({2}, {1, 2}), rv = tensor({2}, {3, 4});
  HostTensor bm = tensor({2}, {5, 6}), bv = tensor({2}, {0.5, 9});
  AttrMap a;
  a.setFloat("momentum", 0.9);
  HostTensor m = zeros({2}), v = zeros({2});
  ASSERT_OK(runOp(OpKind::BnRunningUpdate, a, {&rm, &rv, &bm, &bv}, {&m, &v}));
  expectClose(m.values(), std::vector<double>{1 * 0.9 + 5 * 0.1, 2 * 0.9 + 6 * 0.1}, 1e-6, 0);
  expectClose(v.values(), std::vector<double>{3 * 0.9 + 0.05, 4 * 0.9 + 0.9}, 1e-6, 0);
  // Unbiased: the variance term is batch_var * count / (count - 1).
  a.setInt("unbiased", 1);
  a.setInt("count", 10);
  ASSERT_OK(runOp(OpKind::BnRunningUpdate, a, {&rm, &rv, &bm, &bv}, {&m, &v}));
  expectClose(v.values(),
              std::vector<double>{3 * 0.9 + 0.5 * 10 / 9.0 * 0.1, 4 * 0.9 + 9 * 10 / 9.0 * 0.1},
              1e-6, 0);
}

TEST(CpuNormTest, BnRunningUpdateInPlaceAndSkipped) {
  AttrMap a;
  a.setFloat("momentum", 0.75);
  HostTensor rm = tensor({3}, {1, 2, 3}), rv = tensor({3}, {4, 5, 6});
  HostTensor bm = tensor({3}, {9, 9, 9}), bv = tensor({3}, {1, 1, 1});
  HostTensor skip = scalar(0), go = scalar(1);
  // ok == 0, in place: nothing changes.
  ASSERT_OK(runOp(OpKind::BnRunningUpdate, a, {&rm, &rv, &bm, &bv, &skip}, {&rm, &rv}));
  expectClose(rm.values(), std::vector<float>{1, 2, 3}, 0, 0);
  expectClose(rv.values(), std::vector<float>{4, 5, 6}, 0, 0);
  // ok == 0, separate outputs: they receive the unchanged statistics.
  HostTensor m = zeros({3}), v = zeros({3});
  ASSERT_OK(runOp(OpKind::BnRunningUpdate, a, {&rm, &rv, &bm, &bv, &skip}, {&m, &v}));
  expectClose(m.values(), std::vector<float>{1, 2, 3}, 0, 0);
  expectClose(v.values(), std::vector<float>{4, 5, 6}, 0, 0);
  // ok == 1, in place.
  ASSERT_OK(runOp(OpKind::BnRunningUpdate, a, {&rm, &rv, &bm, &bv, &go}, {&rm, &rv}));
  expectClose(rm.values(), std::vector<double>{0.75 + 2.25, 1.5 + 2.25, 2.25 + 2.25}, 1e-6, 0);
  expectClose(rv.values(), std::vector<double>{3 + 0.25, 3.75 + 0.25, 4.5 + 0.25}, 1e-6, 0);
}

/// ONNX LRN: the window of channel c is [c - floor((size-1)/2), c + ceil((size-1)/2)].
std::vector<double> refLrn(const HostTensor& x, int64_t size, double alpha, double beta,
                           double bias) {
  int64_t n = x.shape[0], c = x.shape[1], plane = x.numel() / (n * c);
  std::vector<double> y(size_t(x.numel()));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t j = 0; j < plane; ++j) {
        double sq = 0;
        for (int64_t k = ch - (size - 1) / 2; k <= ch + size / 2; ++k)
          if (k >= 0 && k < c)
            sq += double(x[(i * c + k) * plane + j]) * x[(i * c + k) * plane + j];
        int64_t e = (i * c + ch) * plane + j;
        y[size_t(e)] = x[e] / std::pow(bias + alpha / double(size) * sq, beta);
      }
  return y;
}

TEST(CpuNormTest, LrnMatchesOnnxDefinitionAndGradient) {
  std::mt19937 rng(25);
  for (int64_t size : {1, 3, 4}) {
    SCOPED_TRACE(size);
    AttrMap a;
    a.setInt("size", size);
    a.setFloat("alpha", 0.5);
    a.setFloat("beta", 0.75);
    a.setFloat("bias", 1.5);
    HostTensor x = randomTensor({2, 5, 2, 3}, rng, -2.f, 2.f);
    HostTensor y = run1(OpKind::LRN, a, {&x}, x.shape);
    expectClose(y.values(), refLrn(x, size, 0.5, 0.75, 1.5), 1e-6, 1e-5);
    HostTensor w = randomTensor(x.shape, rng);
    HostTensor dx = run1(OpKind::LRNBwd, a, {&w, &x, &y}, x.shape);
    auto loss = [&] { return weightedSum(run1(OpKind::LRN, a, {&x}, x.shape), w); };
    expectClose(dx.values(), numericGradient(x, loss, 1e-2), 2e-3, 2e-3, "dX");
  }
}

TEST(CpuNormTest, RejectsMismatchedChannels) {
  HostTensor x = zeros({2, 3, 4}), c3 = zeros({3}), c2 = zeros({2}), y = zeros({2, 3, 4});
  EXPECT_EQ(runOp(OpKind::BatchNorm, epsAttrs(), {&x, &c3, &c3, &c2, &c3}, {&y}).code(),
            ErrorCode::Internal);
}

} // namespace
} // namespace hgp::cpu::test
