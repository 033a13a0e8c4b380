// Tests of the CPU optimizer executors against torch.optim's update rules written here in
// double: several steps of SGD (plain, momentum with the step-0 buffer initialization,
// dampening, Nesterov, weight decay) and of Adam and AdamW; skipped steps (ok == 0); in-place
// storage; and bit-exactness against torch 1.13's float operation order.
#include "CpuTestUtil.h"

namespace hgp::cpu::test {
namespace {

struct SgdConfig {
  double momentum = 0, dampening = 0, weightDecay = 0;
  bool nesterov = false;
  AttrMap attrs() const {
    AttrMap a;
    a.setFloat("momentum", momentum);
    a.setFloat("dampening", dampening);
    a.setFloat("weight_decay", weightDecay);
    a.setInt("nesterov", nesterov);
    return a;
  }
};

/// torch.optim.SGD's step, in double.
void sgdRef(const SgdConfig& c, double lr, int64_t step, const std::vector<double>& grad,
            std::vector<double>& p, std::vector<double>& buf) {
  for (size_t i = 0; i < p.size(); ++i) {
    double g = grad[i] + c.weightDecay * p[i];
    if (c.momentum != 0) {
      buf[i] = step == 0 ? g : c.momentum * buf[i] + (1 - c.dampening) * g;
      g = c.nesterov ? g + c.momentum * buf[i] : buf[i];
    }
    p[i] -= lr * g;
  }
}

TEST(CpuOptimTest, SgdMatchesTorchOverSeveralSteps) {
  const std::vector<SgdConfig> configs = {
      {0, 0, 0, false},        {0, 0, 0.01, false},  {0.9, 0, 0, false},
      {0.9, 0.3, 5e-4, false}, {0.9, 0, 1e-3, true},
  };
  std::mt19937 rng(111);
  for (const SgdConfig& c : configs) {
    SCOPED_TRACE(c.attrs().toString());
    HostTensor p = randomTensor({257}, rng), buf = zeros({257});
    std::vector<double> pRef = p.doubles(), bufRef(257, 0.0);
    HostTensor ok = scalar(1);
    for (int64_t step = 0; step < 6; ++step) {
      HostTensor g = randomTensor({257}, rng), lr = scalar(0.05f * float(step + 1));
      HostTensor st = scalarI64(step);
      std::vector<HostTensor*> in = {&p, &g, &lr, &ok, &st}, out = {&p};
      if (c.momentum != 0) {
        in.push_back(&buf);
        out.push_back(&buf);
      }
      ASSERT_OK(runOp(OpKind::SgdUpdate, c.attrs(), in, out)); // in place, as planned
      std::vector<double> gd = g.doubles();
      sgdRef(c, lr[0], step, gd, pRef, bufRef);
    }
    expectClose(p.values(), pRef, 1e-6, 1e-5, "param");
    if (c.momentum != 0) expectClose(buf.values(), bufRef, 1e-6, 1e-5, "buf");
  }
}

struct AdamConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0;
  bool decoupled = false;
  AttrMap attrs() const {
    AttrMap a;
    a.setFloat("beta1", beta1);
    a.setFloat("beta2", beta2);
    a.setFloat("eps", eps);
    a.setFloat("weight_decay", weightDecay);
    a.setInt("decoupled", decoupled);
    return a;
  }
};

/// torch.optim.Adam / AdamW's step, in double; `step` counts the updates already applied.
void adamRef(const AdamConfig& c, double lr, int64_t step, const std::vector<double>& grad,
             std::vector<double>& p, std::vector<double>& m, std::vector<double>& v) {
  double t = double(step + 1);
  double bc1 = 1 - std::pow(c.beta1, t), bc2 = 1 - std::pow(c.beta2, t);
  for (size_t i = 0; i < p.size(); ++i) {
    double g = grad[i];
    if (c.decoupled)
      p[i] *= 1 - lr * c.weightDecay;
    else
      g += c.weightDecay * p[i];
    m[i] = c.beta1 * m[i] + (1 - c.beta1) * g;
    v[i] = c.beta2 * v[i] + (1 - c.beta2) * g * g;
    double denom = std::sqrt(v[i]) / std::sqrt(bc2) + c.eps;
    p[i] -= lr / bc1 * m[i] / denom;
  }
}

TEST(CpuOptimTest, AdamAndAdamWMatchTorchOverSeveralSteps) {
  const std::vector<AdamConfig> configs = {{},
                                           {0.8, 0.99, 1e-6, 0.01, false},
                                           {0.9, 0.999, 1e-8, 0.05, true},
                                           {0.5, 0.9, 1e-3, 0, true}};
  std::mt19937 rng(112);
  for (const AdamConfig& c : configs) {
    SCOPED_TRACE(c.attrs().toString());
    const int64_t n = 300;
    HostTensor p = randomTensor({n}, rng), m = zeros({n}), v = zeros({n}), ok = scalar(1);
    std::vector<double> pRef = p.doubles(), mRef(size_t(n), 0.0), vRef(size_t(n), 0.0);
    for (int64_t step = 0; step < 8; ++step) {
      HostTensor g = randomTensor({n}, rng, -2.f, 2.f), lr = scalar(1e-3f), st = scalarI64(step);
      ASSERT_OK(
          runOp(OpKind::AdamUpdate, c.attrs(), {&p, &g, &lr, &ok, &st, &m, &v}, {&p, &m, &v}));
      std::vector<double> gd = g.doubles();
      adamRef(c, lr[0], step, gd, pRef, mRef, vRef);
    }
    expectClose(p.values(), pRef, 1e-6, 1e-5, "param");
    expectClose(m.values(), mRef, 1e-6, 1e-5, "m");
    expectClose(v.values(), vRef, 1e-9, 1e-5, "v");
  }
}

TEST(CpuOptimTest, SkippedStepChangesNothing) {
  std::mt19937 rng(113);
  HostTensor p = randomTensor({50}, rng), g = randomTensor({50}, rng),
             buf = randomTensor({50}, rng);
  HostTensor m = randomTensor({50}, rng), v = randomTensor({50}, rng, 0.f, 1.f);
  HostTensor lr = scalar(0.1f), skip = scalar(0), st = scalarI64(3);
  const HostTensor p0 = p, buf0 = buf, m0 = m, v0 = v;
  SgdConfig sgd{0.9, 0, 0.1, true};
  ASSERT_OK(runOp(OpKind::SgdUpdate, sgd.attrs(), {&p, &g, &lr, &skip, &st, &buf}, {&p, &buf}));
  ASSERT_OK(runOp(OpKind::AdamUpdate, AdamConfig{}.attrs(), {&p, &g, &lr, &skip, &st, &m, &v},
                  {&p, &m, &v}));
  EXPECT_EQ(p.storage, p0.storage);
  EXPECT_EQ(buf.storage, buf0.storage);
  EXPECT_EQ(m.storage, m0.storage);
  EXPECT_EQ(v.storage, v0.storage);
  // Separate result buffers receive the unchanged state.
  HostTensor p2 = zeros({50}), m2 = zeros({50}), v2 = zeros({50});
  ASSERT_OK(runOp(OpKind::AdamUpdate, AdamConfig{}.attrs(), {&p, &g, &lr, &skip, &st, &m, &v},
                  {&p2, &m2, &v2}));
  EXPECT_EQ(p2.storage, p0.storage);
  EXPECT_EQ(m2.storage, m0.storage);
  EXPECT_EQ(v2.storage, v0.storage);
}

TEST(CpuOptimTest, InPlaceAndSeparateResultsAgreeBitForBit) {
  std::mt19937 rng(114);
  HostTensor p = randomTensor({1000}, rng), g = randomTensor({1000}, rng);
  HostTensor m = randomTensor({1000}, rng), v = randomTensor({1000}, rng, 0.f, 1.f);
  HostTensor lr = scalar(0.01f), ok = scalar(1), st = scalarI64(4);
  AdamConfig c{0.9, 0.999, 1e-8, 0.01, true};
  HostTensor p2 = zeros({1000}), m2 = zeros({1000}), v2 = zeros({1000});
  ASSERT_OK(runOp(OpKind::AdamUpdate, c.attrs(), {&p, &g, &lr, &ok, &st, &m, &v}, {&p2, &m2, &v2}));
  ASSERT_OK(runOp(OpKind::AdamUpdate, c.attrs(), {&p, &g, &lr, &ok, &st, &m, &v}, {&p, &m, &v}));
  EXPECT_EQ(p.storage, p2.storage);
  EXPECT_EQ(m.storage, m2.storage);
  EXPECT_EQ(v.storage, v2.storage);
}

TEST(CpuOptimTest, FloatOperationOrderIsTorchs) {
  // torch 1.13 _single_tensor_sgd / _single_tensor_adam, one float op at a time, scalars rounded
  // to float by TensorIterator; hyper-parameter arithmetic on Python floats in double.
  HostTensor p = tensor({3}, {0.3f, -1.7f, 2.2f}), g = tensor({3}, {0.11f, 0.5f, -0.9f});
  HostTensor buf = tensor({3}, {0.01f, -0.02f, 0.3f}), lr = scalar(0.1f), ok = scalar(1);
  HostTensor st = scalarI64(2);
  SgdConfig sgd{0.9, 0.1, 1e-4, false};
  HostTensor p1 = zeros({3}), b1 = zeros({3});
  ASSERT_OK(runOp(OpKind::SgdUpdate, sgd.attrs(), {&p, &g, &lr, &ok, &st, &buf}, {&p1, &b1}));
  for (int i = 0; i < 3; ++i) {
    float d = g[i] + float(1e-4) * p[i];
    float b = buf[i] * float(0.9) + float(1 - 0.1) * d;
    EXPECT_EQ(b1[i], b);
    EXPECT_EQ(p1[i], p[i] + float(-double(lr[0])) * b);
  }
  HostTensor m = tensor({3}, {0.05f, -0.1f, 0.2f}), v = tensor({3}, {0.01f, 0.02f, 0.5f});
  HostTensor p2 = zeros({3}), m2 = zeros({3}), v2 = zeros({3});
  AdamConfig adam{0.9, 0.999, 1e-8, 0.02, false};
  ASSERT_OK(
      runOp(OpKind::AdamUpdate, adam.attrs(), {&p, &g, &lr, &ok, &st, &m, &v}, {&p2, &m2, &v2}));
  double lrd = lr[0], bc1 = 1 - std::pow(0.9, 3.0), bc2 = 1 - std::pow(0.999, 3.0);
  for (int i = 0; i < 3; ++i) {
    float gi = g[i] + float(0.02) * p[i];
    float mi = m[i] * float(0.9) + float(1 - 0.9) * gi;
    float vi = v[i] * float(0.999) + float(1 - 0.999) * gi * gi;
    float denom = std::sqrt(vi) / float(std::sqrt(bc2)) + float(1e-8);
    EXPECT_EQ(m2[i], mi);
    EXPECT_EQ(v2[i], vi);
    EXPECT_EQ(p2[i], p[i] + float(-(lrd / bc1)) * mi / denom);
  }
}

} // namespace
} // namespace hgp::cpu::test
