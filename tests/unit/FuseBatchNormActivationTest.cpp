// FuseBatchNormActivationTest.cpp - fuse-batch-norm with the activations whose gradient reads
// their input (Silu, HardSwish; passes/FuseBatchNorm.cpp): the forward and the backward fuse
// together or not at all, the fused BatchNormBwd takes the bias to recompute y, and on the CPU
// backend the fused plan computes what the unfused one does: the forward bit for bit, the
// gradients to the last place of the recomputed y (its coefficients come from the saved f32
// statistics, the forward's from the double ones). RecognizeSilu, which makes the Silu, too.
#include "tests/unit/BatchNormFusionFixture.h"

#include <cmath>

namespace hgp {
namespace {

using namespace bnfusion;

Builder bnAct(OpKind act) {
  return [act](Graph& g, const Params& p) {
    return std::vector<Value*>{op1(g, act, {bnTrain(g, p[0], p[1], p[2])})};
  };
}

/// A frozen (inference-mode) BatchNorm with statistics of its own, then Silu.
Builder frozenBnSilu = [](Graph& g, const Params& p) {
  int64_t c = p[0]->shape()[1];
  Value* mean = *g.addGraphValue("mean", TensorRole::State, f32({c}), uniform(f32({c}), 5));
  Value* var = *g.addGraphValue("var", TensorRole::State, f32({c}), uniform(f32({c}), 6, 0.5, 2));
  return std::vector<Value*>{
      op1(g, OpKind::Silu, {op1(g, OpKind::BatchNorm, {p[0], p[1], p[2], mean, var}, eps())})};
};

TEST(FuseBatchNormActivation, SiluAndHardSwishFuseForwardAndBackwardTogether) {
  for (auto [op, name] :
       {std::pair{OpKind::Silu, "silu"}, std::pair{OpKind::HardSwish, "hardswish"}}) {
    SCOPED_TRACE(name);
    Prepared p = prepare(bnAct(op), Precision::FP32, true);
    const Graph& g = *p.g;
    EXPECT_EQ(count(g, op), 0u) << printGraph(g);
    EXPECT_EQ(count(g, op == OpKind::Silu ? OpKind::SiluBwd : OpKind::HardSwishBwd), 0u);
    const Node* bn = find(g, OpKind::BatchNormTrain);
    const Node* bwd = find(g, OpKind::BatchNormBwd);
    ASSERT_TRUE(bn && bwd);
    EXPECT_EQ(bn->attrs().getString("activation"), name);
    EXPECT_EQ(bwd->attrs().getString("activation"), name);
    ASSERT_EQ(bwd->numInputs(), 6u);
    EXPECT_EQ(bwd->input(1), bn->input(0)) << "X";
    EXPECT_EQ(bwd->input(5), bn->input(2)) << "the bias, to recompute y";
    EXPECT_EQ(p.ctx.stats[std::string("fuse-batch-norm.") + name], 1);
    EXPECT_EQ(p.ctx.stats[std::string("fuse-batch-norm.bwd-") + name], 1);
    auto back = parseGraph(printGraph(g));
    ASSERT_TRUE(back.hasValue()) << back.status().toString();
  }
}

TEST(FuseBatchNormActivation, LeavesBothHalvesWhenYHasAnotherReader) {
  Builder shared = [](Graph& g, const Params& p) {
    Value* y = bnTrain(g, p[0], p[1], p[2]);
    return std::vector<Value*>{op1(g, OpKind::Silu, {y}), op1(g, OpKind::Neg, {y})};
  };
  Prepared p = prepare(shared, Precision::FP32, true);
  EXPECT_EQ(count(*p.g, OpKind::Silu), 1u) << printGraph(*p.g);
  EXPECT_EQ(count(*p.g, OpKind::SiluBwd), 1u);
  EXPECT_FALSE(find(*p.g, OpKind::BatchNormTrain)->attrs().has("activation"));
  EXPECT_FALSE(find(*p.g, OpKind::BatchNormBwd)->attrs().has("activation"));
}

/// Max |a - b| over the f32 tensor bytes, and max |b|.
std::pair<double, double> maxDiff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  double d = 0, m = 0;
  for (size_t i = 0; i + 4 <= b.size(); i += 4) {
    float x, y;
    std::memcpy(&x, a.data() + i, 4);
    std::memcpy(&y, b.data() + i, 4);
    d = std::max(d, double(std::fabs(x - y)));
    m = std::max(m, double(std::fabs(y)));
  }
  return {d, m};
}

void expectFusedMatchesUnfused(const std::string& what, const Builder& body) {
  for (Precision precision : {Precision::FP32, Precision::BF16, Precision::FP16}) {
    SCOPED_TRACE(what + " " + precisionName(precision));
    Prepared fused = prepare(body, precision, true), plain = prepare(body, precision, false);
    EXPECT_EQ(count(*fused.g, OpKind::SiluBwd) + count(*fused.g, OpKind::HardSwishBwd), 0u)
        << printGraph(*fused.g);
    auto a = runOnCpu(fused), b = runOnCpu(plain);
    ASSERT_EQ(a.size(), b.size());
    ASSERT_GE(a.size(), 5u);
    // The gradients: float32's last place of y, carried through the activation's derivative
    // and the BatchNorm's sums; a 16-bit y that rounds the other way moves one element by an
    // ulp of its dtype. A fused backward that dropped the derivative is off by O(1).
    double tol = precision == Precision::FP32 ? 1e-5 : 2e-3;
    for (const auto& [name, want] : b) {
      ASSERT_TRUE(a.count(name)) << name;
      if (name == "loss" || name.rfind("out.", 0) == 0) {
        EXPECT_TRUE(a[name] == want) << name << ": the forward must be bit-identical";
        continue;
      }
      auto [d, m] = maxDiff(a[name], want);
      EXPECT_LE(d, tol * std::max(m, 1e-3))
          << name << " max |fused - unfused| " << d << " of max " << m;
    }
  }
}

TEST(FuseBatchNormActivation, CpuFusedSiluAndHardSwishMatchUnfused) {
  expectFusedMatchesUnfused("bn-silu", bnAct(OpKind::Silu));
  expectFusedMatchesUnfused("bn-hardswish", bnAct(OpKind::HardSwish));
  expectFusedMatchesUnfused("frozen-bn-silu", frozenBnSilu);
}

TEST(RecognizeSilu, MulBySigmoidOfItselfIsOneSiluAndASharedGateStays) {
  Graph g("silu");
  Value* x = param(g, "x", f32({2, 3}), 1);
  Value* y = param(g, "y", f32({2, 3}), 2);
  Value* silu = op1(g, OpKind::Mul, {op1(g, OpKind::Sigmoid, {x}), x}); // either operand order
  Value* gate = op1(g, OpKind::Sigmoid, {y});
  Value* kept = op1(g, OpKind::Mul, {y, gate}); // the gate is read twice: it stays
  g.addOutput(silu);
  g.addOutput(kept);
  g.addOutput(gate);
  PassContext ctx;
  Status st = runPipeline(g, {"recognize-silu"}, ctx);
  ASSERT_TRUE(st.isOk()) << st.toString();
  EXPECT_EQ(count(g, OpKind::Silu), 1u) << printGraph(g);
  EXPECT_EQ(count(g, OpKind::Sigmoid), 1u);
  EXPECT_EQ(count(g, OpKind::Mul), 1u);
  EXPECT_EQ(g.outputs()[0]->producer()->op(), OpKind::Silu);
  EXPECT_EQ(g.outputs()[0]->producer()->input(0), x);
  EXPECT_EQ(ctx.stats["recognize-silu.silus"], 1);
}

} // namespace
} // namespace hgp
