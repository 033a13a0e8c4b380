// FuseCastsTest.cpp - fuse-casts (passes/FuseCasts.cpp): which mixed-precision casts it gathers
// into CastGroup steps, and that a grouped plan trains bit for bit like the ungrouped one
// (--no-fuse) on the CPU backend, whose Cast executor is the reference for the CUDA one.
#include "tools/hgpc/Compile.h"
#include "ir/Graph.h"
#include "runtime/Backend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

namespace hgp {
namespace {

Expected<Compilation> compileLenet(Precision precision, bool fuse, int ranks = 1) {
  CompileOptions o;
  o.modelPath = std::string(HGP_SOURCE_DIR) + "/samples/lenet5.onnx";
  o.batch = 8;
  o.precision = precision;
  o.fuse = fuse;
  o.train.lr = 0.05;
  o.train.momentum = 0.9;
  o.train.ranks = ranks;
  o.maxStreams = 1;
  o.target = "h200";
  o.kernels = CompileOptions::Kernels::Off;
  return compileModel(o);
}

struct Counts {
  int castGroups = 0, groupedTensors = 0, paramCasts = 0, casts = 0;
};

Counts countSteps(const Plan& plan, const std::string& program) {
  Counts c;
  const PlanProgram* p = plan.findProgram(program);
  EXPECT_NE(p, nullptr);
  if (!p) return c;
  for (const PlanStep& s : p->steps) {
    if (s.op == OpKind::CastGroup) {
      ++c.castGroups;
      c.groupedTensors += int(s.inputs.size());
      EXPECT_EQ(s.inputs.size(), s.outputs.size());
    }
    if (s.op == OpKind::Cast) {
      ++c.casts;
      c.paramCasts += plan.tensors[size_t(s.inputs[0])].role == TensorRole::Param;
    }
  }
  return c;
}

TEST(FuseCasts, GathersTheParameterAndGradientCastsOfABf16Step) {
  auto fused = compileLenet(Precision::BF16, true), plain = compileLenet(Precision::BF16, false);
  ASSERT_TRUE(fused.hasValue()) << fused.status().toString();
  ASSERT_TRUE(plain.hasValue()) << plain.status().toString();
  // LeNet-5 has 10 parameters: 10 casts down before the forward, 10 gradient casts up.
  Counts f = countSteps(fused->emitted.plan, "train"), p = countSteps(plain->emitted.plan, "train");
  EXPECT_EQ(p.castGroups, 0);
  EXPECT_EQ(p.paramCasts, 10);
  EXPECT_EQ(f.castGroups, 2);
  EXPECT_EQ(f.groupedTensors, 20);
  EXPECT_EQ(f.paramCasts, 0);
  EXPECT_EQ(f.casts, p.casts - 20); // the input, logits and loss-gradient casts stay
  Counts e = countSteps(fused->emitted.plan, "eval");
  EXPECT_EQ(e.castGroups, 1);
  EXPECT_EQ(e.groupedTensors, 10);
}

TEST(FuseCasts, Fp32HasNothingToGather) {
  auto fused = compileLenet(Precision::TF32, true);
  ASSERT_TRUE(fused.hasValue()) << fused.status().toString();
  EXPECT_EQ(countSteps(fused->emitted.plan, "train").castGroups, 0);
  EXPECT_EQ(countSteps(fused->emitted.plan, "train").casts, 0);
}

TEST(FuseCasts, GradientCastsThatAnAllReduceReadsStayInPlace) {
  auto fused = compileLenet(Precision::BF16, true, 2);
  ASSERT_TRUE(fused.hasValue()) << fused.status().toString();
  Counts f = countSteps(fused->emitted.plan, "train");
  EXPECT_EQ(f.castGroups, 1); // the parameters only
  EXPECT_EQ(f.groupedTensors, 10);
}

TEST(FuseCasts, CastGroupOperandsMustShareADtype) {
  Graph g;
  auto a = g.addGraphValue("a", TensorRole::Param, {DType::F32, {4}});
  auto b = g.addGraphValue("b", TensorRole::Param, {DType::BF16, {4}});
  ASSERT_TRUE(a.hasValue() && b.hasValue());
  AttrMap attrs;
  attrs.setString("to", "bf16");
  auto n = g.addNode(OpKind::CastGroup, {*a, *b}, attrs);
  ASSERT_FALSE(n.hasValue());
  EXPECT_NE(n.status().message().find("share one dtype"), std::string::npos) << n.status().toString();
}

/// Losses of 3 steps and every persistent tensor's bytes after them, on the CPU backend.
std::pair<std::vector<float>, std::map<std::string, std::vector<uint8_t>>> train(const Plan& plan,
                                                                                 const InitData& init) {
  std::vector<float> losses;
  std::map<std::string, std::vector<uint8_t>> state;
  auto b = createCpuBackend();
  Status st = b->load(plan, init);
  EXPECT_TRUE(st.isOk()) << st.toString();
  if (!st) return {losses, state};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> x(8 * 28 * 28);
  std::vector<int64_t> labels(8);
  for (int s = 0; s < 3; ++s) {
    for (float& v : x) v = u(rng);
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = int64_t((i + size_t(s)) % 10);
    EXPECT_TRUE(b->write(plan.binding("input"), x.data()).isOk());
    EXPECT_TRUE(b->write(plan.binding("labels"), labels.data()).isOk());
    EXPECT_TRUE(b->run("train").isOk());
    float loss = 0;
    EXPECT_TRUE(b->read(plan.binding("loss"), &loss).isOk());
    losses.push_back(loss);
  }
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const PlanTensor& t = plan.tensors[i];
    if (t.role != TensorRole::Param && t.role != TensorRole::State) continue;
    std::vector<uint8_t>& v = state[t.name];
    v.resize(size_t(t.bytes()));
    EXPECT_TRUE(b->read(int(i), v.data()).isOk());
  }
  return {losses, state};
}

TEST(FuseCasts, GroupedPlanTrainsBitForBitLikeTheUngroupedOne) {
  for (Precision precision : {Precision::BF16, Precision::FP16}) {
    SCOPED_TRACE(precisionName(precision));
    auto fused = compileLenet(precision, true), plain = compileLenet(precision, false);
    ASSERT_TRUE(fused.hasValue() && plain.hasValue());
    ASSERT_GT(countSteps(fused->emitted.plan, "train").castGroups, 0);
    auto [fl, fs] = train(fused->emitted.plan, InitData{fused->emitted.data, {}});
    auto [pl, ps] = train(plain->emitted.plan, InitData{plain->emitted.data, {}});
    ASSERT_EQ(fl.size(), 3u);
    EXPECT_EQ(fl, pl);
    for (const auto& [name, bytes] : ps) {
      ASSERT_TRUE(fs.count(name)) << name;
      EXPECT_TRUE(fs[name] == bytes) << name << " differs";
    }
  }
}

} // namespace
} // namespace hgp
