// Tests of the CPU activation executors: forward values against formulas in double, gradients
// against finite differences of the forward away from the kinks, and the gradient at the kinks
// pinned to PyTorch's choices (strict inequalities for hardtanh and hardsigmoid, ReLU's
// gradient zero at 0, HardSwish's middle branch including -3 and 3).
#include "CpuTestUtil.h"

namespace hgp::cpu::test {
namespace {

struct ActCase {
  const char* name;
  OpKind fwd, bwd;
  AttrMap attrs;
  std::function<double(double)> f;
  bool bwdTakesY;            // Relu, Sigmoid, Tanh: (dY, Y)
  std::vector<double> kinks; // inputs where f is not differentiable
};

AttrMap alpha(double a) {
  AttrMap m;
  m.setFloat("alpha", a);
  return m;
}

std::vector<ActCase> cases() {
  AttrMap clip;
  clip.setFloat("min", -0.5);
  clip.setFloat("max", 1.0);
  AttrMap clipMax;
  clipMax.setFloat("max", 0.25);
  AttrMap hs;
  hs.setFloat("alpha", 0.25);
  hs.setFloat("beta", 0.4);
  return {
      {"Relu",
       OpKind::Relu,
       OpKind::ReluBwd,
       {},
       [](double x) { return x > 0 ? x : 0; },
       true,
       {0}},
      {"LeakyRelu",
       OpKind::LeakyRelu,
       OpKind::LeakyReluBwd,
       alpha(0.1),
       [](double x) { return x > 0 ? x : 0.1 * x; },
       false,
       {0}},
      {"Clip",
       OpKind::Clip,
       OpKind::ClipBwd,
       clip,
       [](double x) { return std::min(1.0, std::max(-0.5, x)); },
       false,
       {-0.5, 1}},
      {"Clip max only",
       OpKind::Clip,
       OpKind::ClipBwd,
       clipMax,
       [](double x) { return std::min(0.25, x); },
       false,
       {0.25}},
      {"Sigmoid",
       OpKind::Sigmoid,
       OpKind::SigmoidBwd,
       {},
       [](double x) { return 1 / (1 + std::exp(-x)); },
       true,
       {}},
      {"Tanh", OpKind::Tanh, OpKind::TanhBwd, {}, [](double x) { return std::tanh(x); }, true, {}},
      {"HardSigmoid",
       OpKind::HardSigmoid,
       OpKind::HardSigmoidBwd,
       hs,
       [](double x) { return std::min(1.0, std::max(0.0, 0.25 * x + 0.4)); },
       false,
       {-1.6, 2.4}},
      {"HardSwish",
       OpKind::HardSwish,
       OpKind::HardSwishBwd,
       {},
       [](double x) { return x * std::min(1.0, std::max(0.0, x / 6 + 0.5)); },
       false,
       {-3, 3}},
  };
}

/// Random inputs in [-4, 4] that keep at least 0.05 away from every kink.
HostTensor awayFromKinks(Shape s, std::mt19937& rng, const std::vector<double>& kinks) {
  HostTensor t = randomTensor(std::move(s), rng, -4.f, 4.f);
  for (int64_t i = 0; i < t.numel(); ++i)
    for (double k : kinks)
      if (std::fabs(t[i] - k) < 0.05) t[i] = float(k + (t[i] < k ? -0.1 : 0.1));
  return t;
}

TEST(CpuActivationTest, ForwardMatchesFormula) {
  std::mt19937 rng(31);
  for (const ActCase& c : cases()) {
    SCOPED_TRACE(c.name);
    HostTensor x = randomTensor({3, 50}, rng, -5.f, 5.f);
    HostTensor y = run1(c.fwd, c.attrs, {&x}, x.shape);
    std::vector<double> ref;
    for (float v : x.values()) ref.push_back(c.f(v));
    expectClose(y.values(), ref, 1e-6, 1e-6);
  }
}

TEST(CpuActivationTest, GradientsMatchFiniteDifferences) {
  std::mt19937 rng(32);
  for (const ActCase& c : cases()) {
    SCOPED_TRACE(c.name);
    HostTensor x = awayFromKinks({4, 25}, rng, c.kinks), w = randomTensor({4, 25}, rng);
    HostTensor y = run1(c.fwd, c.attrs, {&x}, x.shape);
    HostTensor dx = run1(c.bwd, c.attrs, {&w, c.bwdTakesY ? &y : &x}, x.shape);
    auto loss = [&] { return weightedSum(run1(c.fwd, c.attrs, {&x}, x.shape), w); };
    expectClose(dx.values(), numericGradient(x, loss, 1e-2), 1e-3, 1e-3);
  }
}

TEST(CpuActivationTest, GradientsAtTheKinksFollowPyTorch) {
  auto grad = [](OpKind op, const AttrMap& a, std::vector<float> saved) {
    HostTensor dy = tensor({int64_t(saved.size())}, std::vector<float>(saved.size(), 2.f));
    HostTensor s = tensor({int64_t(saved.size())}, saved);
    return run1(op, a, {&dy, &s}, s.shape).values();
  };
  // ReluBwd takes Y: it passes exactly where y > 0.
  EXPECT_EQ(grad(OpKind::ReluBwd, {}, {0, 1e-30f, -1}), (std::vector<float>{0, 2, 0}));
  EXPECT_EQ(grad(OpKind::LeakyReluBwd, alpha(0.1), {0, 1}), (std::vector<float>{0.2f, 2}));
  AttrMap clip;
  clip.setFloat("min", -0.5);
  clip.setFloat("max", 1.0);
  EXPECT_EQ(grad(OpKind::ClipBwd, clip, {-0.5f, -0.4f, 1.f, 0.99f, 7.f}),
            (std::vector<float>{0, 2, 0, 2, 0}));
  AttrMap noBounds;
  EXPECT_EQ(grad(OpKind::ClipBwd, noBounds, {-1e30f, 1e30f}), (std::vector<float>{2, 2}));
  AttrMap hs;
  hs.setFloat("alpha", 0.25);
  hs.setFloat("beta", 0.5);
  EXPECT_EQ(grad(OpKind::HardSigmoidBwd, hs, {-2, -1.9f, 2, 1.9f}),
            (std::vector<float>{0, 0.5f, 0, 0.5f}));
  // HardSwish: 0 below -3, dy above 3, dy * (x/3 + 1/2) on [-3, 3].
  EXPECT_EQ(grad(OpKind::HardSwishBwd, {}, {-3.5f, -3, 0, 3, 3.5f}),
            (std::vector<float>{0, -1, 1, 3, 2}));
}

TEST(CpuActivationTest, HandValues) {
  HostTensor x = tensor({5}, {-4, -1, 0, 1, 4});
  EXPECT_EQ(run1(OpKind::Relu, {}, {&x}, {5}).values(), (std::vector<float>{0, 0, 0, 1, 4}));
  EXPECT_EQ(run1(OpKind::Neg, {}, {&x}, {5}).values(), (std::vector<float>{4, 1, -0.f, -1, -4}));
  EXPECT_EQ(run1(OpKind::Scale, alpha(2.5), {&x}, {5}).values(),
            (std::vector<float>{-10, -2.5, 0, 2.5, 10}));
  expectClose(run1(OpKind::HardSwish, {}, {&x}, {5}).values(),
              std::vector<double>{0, -1.0 / 3, 0, 2.0 / 3, 4}, 1e-7, 0);
  HostTensor big = tensor({2}, {-200, 200});
  EXPECT_EQ(run1(OpKind::Sigmoid, {}, {&big}, {2}).values(), (std::vector<float>{0, 1}));
  HostTensor y = zeros({5});
  EXPECT_EQ(runOp(OpKind::Scale, {}, {&x}, {&y}).code(), ErrorCode::Internal)
      << "alpha is required";
}

} // namespace
} // namespace hgp::cpu::test
