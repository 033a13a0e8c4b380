// FuseConvBatchNormTest.cpp - the fuse-conv-bn pass (passes/FuseConvBatchNorm.cpp,
// docs/fusion.md "Convolutions and BatchNorm"): which convolutions take over their BatchNorm's
// statistics pass, which stay as they are, that the pipeline runs it in bf16 and fp16 only and
// --no-conv-bn-fusion (disabling the pass) leaves it out, and that on the CPU backend the fused
// plan trains like the unfused one: the same values up to the rounding of the variance formula
// (sum and sum of squares instead of two passes), checked in f32 tightly and in bf16/f16 to one
// unit in the last place of the 16-bit results.
#include "compiler/plan/PlanEmitter.h"
#include "compiler/schedule/BatchSlicing.h"
#include "ir/Printer.h"
#include "passes/Pass.h"
#include "passes/Pipeline.h"
#include "runtime/Backend.h"
#include "runtime/plan/Half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

namespace hgp {
namespace {

TensorType f32(Shape s) {
  return {DType::F32, std::move(s)};
}

std::shared_ptr<TensorData> uniform(const TensorType& t, uint64_t seed, float lo, float hi) {
  auto d = std::make_shared<TensorData>();
  d->type = t;
  d->bytes.resize(size_t(t.bytes()));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    float v = u(rng);
    std::memcpy(d->bytes.data() + 4 * i, &v, 4);
  }
  return d;
}

Value* param(Graph& g, const std::string& name, TensorType t, uint64_t seed, float lo = -1,
             float hi = 1) {
  auto v = g.addGraphValue(name, TensorRole::Param, t, uniform(t, seed, lo, hi));
  EXPECT_TRUE(v.hasValue()) << v.status().toString();
  return *v;
}

Value* op1(Graph& g, OpKind op, std::vector<Value*> in, AttrMap a = {}) {
  auto n = g.addNode(op, std::move(in), std::move(a), opName(op));
  EXPECT_TRUE(n.hasValue()) << n.status().toString();
  return (*n)->output(0);
}

AttrMap conv3x3(bool relu = false) {
  AttrMap a;
  a.setInts("strides", {1, 1});
  a.setInts("pads", {1, 1, 1, 1});
  a.setInts("dilations", {1, 1});
  a.setInt("group", 1);
  if (relu) a.setString("activation", "relu");
  return a;
}

Value* bnTrain(Graph& g, std::vector<Value*> in) {
  AttrMap a;
  a.setFloat("epsilon", 1e-5);
  return op1(g, OpKind::BatchNormTrain, std::move(in), a);
}

/// A ResNet basic block on x[N,C,H,W]: z1 = relu(BN(conv(x))), out = relu(BN(conv(z1)) + x),
/// with loss = sum(out * r), its backward pass (autodiff) and the fusion passes before
/// fuse-conv-bn; fuse-conv-bn itself when `fuse`. With `bias` the first convolution has one
/// (and keeps its BatchNorm's statistics pass). Bindings: the loss, the output, every gradient.
struct Prepared {
  std::unique_ptr<Graph> g;
  std::map<std::string, std::string> bindings;
  PassContext ctx;
};

Prepared prepare(Precision precision, bool fuse, bool bias = false, Shape xs = {4, 8, 6, 6}) {
  Prepared p;
  p.g = std::make_unique<Graph>("block");
  Graph& g = *p.g;
  int64_t c = xs[1];
  // A mean far from zero against the spread (uniform in [1, 3]), which the sum-of-squares
  // variance must survive.
  Value* x = param(g, "x", f32(xs), 1, 1.f, 3.f);
  Value* w1 = param(g, "w1", f32({c, c, 3, 3}), 2, -0.3f, 0.3f);
  Value* w2 = param(g, "w2", f32({c, c, 3, 3}), 3, -0.3f, 0.3f);
  Value* s1 = param(g, "s1", f32({c}), 4, 0.5f, 1.5f);
  Value* b1 = param(g, "b1", f32({c}), 5);
  Value* s2 = param(g, "s2", f32({c}), 6, 0.5f, 1.5f);
  Value* b2 = param(g, "b2", f32({c}), 7);
  std::vector<Value*> in1 = {x, w1};
  if (bias) in1.push_back(param(g, "cb", f32({c}), 8));
  Value* z1 = op1(g, OpKind::Relu, {bnTrain(g, {op1(g, OpKind::Conv, in1, conv3x3()), s1, b1})});
  Value* y2 = bnTrain(g, {op1(g, OpKind::Conv, {z1, w2}, conv3x3()), s2, b2});
  Value* out = op1(g, OpKind::Relu, {op1(g, OpKind::Add, {y2, x})});
  p.ctx.precision = precision;
  if (isMixedPrecision(precision)) {
    g.addOutput(out);
    Status st = runPipeline(g, {"mixed-precision"}, p.ctx);
    EXPECT_TRUE(st.isOk()) << st.toString();
    AttrMap a;
    a.setString("to", "f32");
    out = op1(g, OpKind::Cast, {g.outputs()[0]}, a);
    g.mutableOutputs().clear();
  }
  auto r = g.addGraphValue("r", TensorRole::Const, out->type(), uniform(out->type(), 9, -1, 1));
  AttrMap ra;
  ra.setInts("axes", {0, 1, 2, 3});
  ra.setInt("keepdims", 0);
  Value* loss = op1(g, OpKind::ReduceSum, {op1(g, OpKind::Mul, {out, *r})}, ra);
  g.addOutput(loss);
  g.addOutput(out);
  p.bindings["loss"] = loss->name();
  p.bindings["out"] = out->name();
  std::vector<std::string> passes = {"autodiff", "fuse-batch-norm", "fuse-gradient-sums"};
  if (fuse) passes.push_back("fuse-conv-bn");
  Status st = runPipeline(g, passes, p.ctx);
  EXPECT_TRUE(st.isOk()) << st.toString() << "\n" << printGraph(g);
  for (auto& [v, grad] : p.ctx.paramGrads) {
    g.addOutput(grad);
    p.bindings["grad." + v->name()] = grad->name();
  }
  return p;
}

std::vector<const Node*> nodesOf(const Graph& g, OpKind op) {
  std::vector<const Node*> out;
  for (const Node* n : g.nodes())
    if (n->op() == op) out.push_back(n);
  return out;
}

TEST(FuseConvBatchNorm, EveryConvolutionBeforeABatchNormEmitsItsStatistics) {
  Prepared p = prepare(Precision::BF16, true);
  EXPECT_EQ(p.ctx.stats["fuse-conv-bn.statistics"], 2);
  auto convs = nodesOf(*p.g, OpKind::Conv);
  ASSERT_EQ(convs.size(), 2u);
  for (const Node* conv : convs) {
    EXPECT_EQ(conv->attrs().getInt("stats", 0), 1);
    ASSERT_EQ(conv->numOutputs(), 3u);
    EXPECT_EQ(conv->output(0)->dtype(), DType::BF16);
    for (size_t i = 1; i < 3; ++i) EXPECT_EQ(conv->output(i)->type(), f32({8}));
  }
  auto bns = nodesOf(*p.g, OpKind::BatchNormTrain);
  ASSERT_EQ(bns.size(), 2u);
  for (const Node* bn : bns) {
    EXPECT_EQ(bn->attrs().getInt("given_stats", 0), 1);
    const Node* conv = bn->input(0)->producer();
    ASSERT_TRUE(conv && conv->op() == OpKind::Conv);
    size_t n = bn->numInputs();
    EXPECT_EQ(bn->input(n - 2), conv->output(1));
    EXPECT_EQ(bn->input(n - 1), conv->output(2));
  }
  // The block end keeps its fused residual Add + Relu: six operands.
  EXPECT_EQ(bns[1]->numInputs(), 6u) << printGraph(*p.g);
  EXPECT_EQ(bns[1]->attrs().getString("activation"), "relu");
  // The backward still reads the convolutions' results (BatchNormBwd's X, nothing recomputed).
  for (const Node* conv : convs) EXPECT_GE(conv->output(0)->users().size(), 2u);
}

TEST(FuseConvBatchNorm, LeavesAConvolutionWithABias) {
  Prepared p = prepare(Precision::BF16, true, /*bias=*/true);
  EXPECT_EQ(p.ctx.stats["fuse-conv-bn.statistics"], 1);
  auto convs = nodesOf(*p.g, OpKind::Conv);
  ASSERT_EQ(convs.size(), 2u);
  EXPECT_EQ(convs[0]->numOutputs(), 1u);
  EXPECT_EQ(nodesOf(*p.g, OpKind::BatchNormTrain)[0]->attrs().getInt("given_stats", 0), 0);
}

TEST(FuseConvBatchNorm, ThePipelineRunsItInSixteenBitPrecisionsOnly) {
  auto has = [](const std::vector<std::string>& p) {
    return std::find(p.begin(), p.end(), "fuse-conv-bn") != p.end();
  };
  for (Precision prec : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::FP16}) {
    PipelineOptions o;
    o.precision = prec;
    EXPECT_EQ(has(pipelineFor(PipelineKind::Train, o)), isMixedPrecision(prec)) << precisionName(prec);
    EXPECT_FALSE(has(pipelineFor(PipelineKind::Eval, o)));
    o.fuse = false;
    EXPECT_FALSE(has(pipelineFor(PipelineKind::Train, o))) << "--no-fuse";
    o.fuse = true;
    o.disabled = {"fuse-conv-bn"}; // what --no-conv-bn-fusion asks for
    EXPECT_FALSE(has(pipelineFor(PipelineKind::Train, o)));
  }
}

TEST(FuseConvBatchNorm, VerifierChecksTheOperands) {
  Graph g("v");
  Value* x = param(g, "x", f32({2, 4, 5, 5}), 1);
  Value* w = param(g, "w", f32({4, 4, 3, 3}), 2);
  Value* cb = param(g, "cb", f32({4}), 3);
  Value* s = param(g, "s", f32({4}), 4);
  AttrMap st = conv3x3();
  st.setInt("stats", 1);
  EXPECT_FALSE(g.addNode(OpKind::Conv, {x, w}, st, "one-result", 1).hasValue());
  EXPECT_FALSE(g.addNode(OpKind::Conv, {x, w, cb}, st, "with-bias", 3).hasValue());
  AttrMap relu = conv3x3(true);
  relu.setInt("stats", 1);
  EXPECT_FALSE(g.addNode(OpKind::Conv, {x, w}, relu, "with-relu", 3).hasValue());
  auto conv = g.addNode(OpKind::Conv, {x, w}, st, "ok", 3);
  ASSERT_TRUE(conv.hasValue()) << conv.status().toString();
  Value *y = (*conv)->output(0), *sum = (*conv)->output(1), *sq = (*conv)->output(2);
  AttrMap given;
  given.setFloat("epsilon", 1e-5);
  given.setInt("given_stats", 1);
  EXPECT_TRUE(g.addNode(OpKind::BatchNormTrain, {y, s, s, sum, sq}, given, "bn", 3).hasValue());
  EXPECT_FALSE(g.addNode(OpKind::BatchNormTrain, {y, s, s, sum}, given, "short", 3).hasValue());
  EXPECT_FALSE(g.addNode(OpKind::BatchNormTrain, {y, s, s, sum, x}, given, "shape", 3).hasValue());
  // A residual needs activation="relu".
  EXPECT_FALSE(g.addNode(OpKind::BatchNormTrain, {y, s, s, y, sum, sq}, given, "res", 3).hasValue());
  given.setString("activation", "relu");
  EXPECT_TRUE(g.addNode(OpKind::BatchNormTrain, {y, s, s, y, sum, sq}, given, "res", 3).hasValue());
}

TEST(FuseConvBatchNorm, BatchSlicingKeepsTheConvolutionWhole) {
  Prepared p = prepare(Precision::FP32, true);
  EmitOptions eo;
  auto e = emitPlan({ProgramSource{"step", p.g.get(), p.bindings}}, eo);
  ASSERT_TRUE(e.hasValue()) << e.status().toString();
  int seen = 0;
  for (const PlanStep& st : e->plan.programs[0].steps) {
    if (st.op != OpKind::Conv) continue;
    ++seen;
    EXPECT_FALSE(batchOperands(e->plan, st, 4).has_value()) << "whole-batch sums";
  }
  EXPECT_EQ(seen, 2);
}

// ---- Fused against unfused on the CPU backend ----------------------------------------------

std::map<std::string, std::vector<float>> runOnCpu(const Prepared& p) {
  EmitOptions eo;
  eo.modelName = "block";
  auto e = emitPlan({ProgramSource{"step", p.g.get(), p.bindings}}, eo);
  EXPECT_TRUE(e.hasValue()) << e.status().toString();
  if (!e.hasValue()) return {};
  auto b = createCpuBackend();
  Status st = b->load(e->plan, InitData{e->data, {}});
  EXPECT_TRUE(st.isOk()) << st.toString();
  st = b->run("step");
  EXPECT_TRUE(st.isOk()) << st.toString();
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, idx] : e->plan.bindings) {
    const PlanTensor& t = e->plan.tensors[size_t(idx)];
    EXPECT_EQ(t.type.dtype, DType::F32) << name;
    std::vector<float>& v = out[name];
    v.resize(size_t(t.type.numElements()));
    EXPECT_TRUE(b->read(idx, v.data()).isOk());
  }
  return out;
}

/// The largest |fused - unfused| of each bound tensor over its largest unfused magnitude.
void expectClose(Precision precision, double bound) {
  SCOPED_TRACE(precisionName(precision));
  Prepared fused = prepare(precision, true), plain = prepare(precision, false);
  ASSERT_EQ(fused.ctx.stats["fuse-conv-bn.statistics"], 2);
  auto a = runOnCpu(fused), b = runOnCpu(plain);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GE(a.size(), 9u); // loss, out, seven gradients
  for (const auto& [name, want] : b) {
    const std::vector<float>& got = a[name];
    ASSERT_EQ(got.size(), want.size()) << name;
    double err = 0, scale = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << name << "[" << i << "]";
      err = std::max(err, double(std::fabs(got[i] - want[i])));
      scale = std::max(scale, double(std::fabs(want[i])));
    }
    EXPECT_LE(err, bound * scale) << name << ": fused and unfused differ by " << err
                                  << " of " << scale;
    EXPECT_GT(scale, 0) << name;
  }
}

TEST(FuseConvBatchNorm, CpuFusedPlanMatchesUnfusedInF32) {
  // The variance from the sums differs from the two-pass one by float rounding: 1e-5.
  expectClose(Precision::FP32, 1e-5);
}

TEST(FuseConvBatchNorm, CpuFusedPlanMatchesUnfusedIn16Bits) {
  // A 16-bit result whose float value moved by that rounding may round to its neighbour: one
  // unit in the last place (bf16 2^-8, f16 2^-11, relative to the largest magnitude), and the
  // gradients downstream of it twice that.
  expectClose(Precision::BF16, 2.0 / 256);
  expectClose(Precision::FP16, 2.0 / 2048);
}

} // namespace
} // namespace hgp
