// Tests of the CPU loss and metric executors: cross-entropy with label smoothing against
// torch.nn.CrossEntropyLoss's definition, MSE, their gradients against finite differences,
// OneHot, CountCorrect's first-maximum rule, and BadData errors for labels out of range.
#include "CpuTestUtil.h"

namespace hgp::cpu::test {
namespace {

AttrMap smoothing(double eps) {
  AttrMap a;
  a.setFloat("label_smoothing", eps);
  return a;
}

/// mean_i [(1-eps) * -log p[i, y_i] + eps * mean_c -log p[i, c]], in double.
double refCrossEntropy(const HostTensor& logits, const std::vector<int64_t>& y, double eps) {
  int64_t n = logits.shape[0], c = logits.shape[1];
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += std::exp(double(logits[i * c + j]));
    double lse = std::log(sum), smooth = 0;
    for (int64_t j = 0; j < c; ++j) smooth += (lse - logits[i * c + j]) / double(c);
    total += (1 - eps) * (lse - logits[i * c + y[size_t(i)]]) + eps * smooth;
  }
  return total / double(n);
}

TEST(CpuLossTest, CrossEntropyMatchesTorchDefinition) {
  HostTensor two = tensor({1, 2}, {0, 0});
  HostTensor l0 = labels({0});
  EXPECT_NEAR(run1(OpKind::SoftmaxCrossEntropy, smoothing(0), {&two, &l0}, {})[0], std::log(2.0),
              1e-7);
  std::mt19937 rng(91);
  std::vector<int64_t> y = {3, 0, 9, 4, 4, 1};
  HostTensor lab = labels(y);
  for (double eps : {0.0, 0.1, 1.0}) {
    SCOPED_TRACE(eps);
    HostTensor logits = randomTensor({6, 10}, rng, -4.f, 4.f);
    HostTensor loss = run1(OpKind::SoftmaxCrossEntropy, smoothing(eps), {&logits, &lab}, {});
    EXPECT_NEAR(loss[0], refCrossEntropy(logits, y, eps), 1e-6);
  }
}

TEST(CpuLossTest, CrossEntropyGradientMatchesFiniteDifferences) {
  std::mt19937 rng(92);
  HostTensor lab = labels({2, 0, 4, 4});
  HostTensor dloss = scalar(0.7f);
  for (double eps : {0.0, 0.2}) {
    SCOPED_TRACE(eps);
    HostTensor logits = randomTensor({4, 5}, rng, -3.f, 3.f);
    HostTensor grad =
        run1(OpKind::SoftmaxCrossEntropyBwd, smoothing(eps), {&logits, &lab, &dloss}, {4, 5});
    auto loss = [&] {
      return 0.7 * run1(OpKind::SoftmaxCrossEntropy, smoothing(eps), {&logits, &lab}, {})[0];
    };
    expectClose(grad.values(), numericGradient(logits, loss, 1e-2), 1e-4, 2e-3);
  }
}

TEST(CpuLossTest, LabelsOutOfRangeAreBadData) {
  HostTensor logits = zeros({2, 3}), loss = zeros({}), grad = zeros({2, 3}), dl = scalar(1);
  for (int64_t badLabel : {-1, 3}) {
    HostTensor lab = labels({0, badLabel});
    Status s = runOp(OpKind::SoftmaxCrossEntropy, {}, {&logits, &lab}, {&loss});
    EXPECT_EQ(s.code(), ErrorCode::BadData);
    EXPECT_NE(s.message().find("label " + std::to_string(badLabel)), std::string::npos)
        << s.message();
    EXPECT_EQ(runOp(OpKind::SoftmaxCrossEntropyBwd, {}, {&logits, &lab, &dl}, {&grad}).code(),
              ErrorCode::BadData);
    EXPECT_EQ(runOp(OpKind::CountCorrect, {}, {&logits, &lab}, {&loss}).code(), ErrorCode::BadData);
    AttrMap depth;
    depth.setInt("depth", 3);
    EXPECT_EQ(runOp(OpKind::OneHot, depth, {&lab}, {&grad}).code(), ErrorCode::BadData);
  }
}

TEST(CpuLossTest, MseLossAndGradient) {
  std::mt19937 rng(93);
  HostTensor p = randomTensor({3, 7}, rng), t = randomTensor({3, 7}, rng);
  double ref = 0;
  for (int64_t i = 0; i < 21; ++i) ref += (double(p[i]) - t[i]) * (double(p[i]) - t[i]) / 21;
  EXPECT_NEAR(run1(OpKind::MseLoss, {}, {&p, &t}, {})[0], ref, 1e-6);
  HostTensor dloss = scalar(1.3f);
  HostTensor grad = run1(OpKind::MseLossBwd, {}, {&p, &t, &dloss}, p.shape);
  auto loss = [&] { return 1.3 * run1(OpKind::MseLoss, {}, {&p, &t}, {})[0]; };
  expectClose(grad.values(), numericGradient(p, loss, 1e-2), 1e-4, 1e-3);
}

TEST(CpuLossTest, OneHotAndCountCorrect) {
  HostTensor lab = labels({2, 0, 1});
  AttrMap depth;
  depth.setInt("depth", 4);
  EXPECT_EQ(run1(OpKind::OneHot, depth, {&lab}, {3, 4}).values(),
            (std::vector<float>{0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0}));
  // Row 0: the tie 3/3 goes to class 1 (first); row 1: the tie goes to class 0, label is 1.
  HostTensor logits = tensor({3, 3}, {1, 3, 3, 2, 2, 0, 0, 0, 5});
  HostTensor y = labels({1, 1, 2});
  EXPECT_EQ(run1(OpKind::CountCorrect, {}, {&logits, &y}, {})[0], 2.f);
}

} // namespace
} // namespace hgp::cpu::test
