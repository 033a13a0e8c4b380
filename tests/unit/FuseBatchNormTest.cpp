// FuseBatchNormTest.cpp - the fuse-batch-norm pass (passes/FuseBatchNorm.cpp, docs/fusion.md):
// which patterns it fuses and which it must leave alone, and that the fused ops on the CPU
// backend compute exactly what the unfused chain computes, forward and backward, in f32, bf16
// and f16 (the fused ops have no gradient rules; their backward is the fused BatchNormBwd, held
// bit for bit to the unfused ReluBwd + BatchNormBwd, and to the gradient Sum it folds).
#include "tools/hgpc/Compile.h"
#include "ir/Printer.h"
#include "compiler/plan/PlanEmitter.h"
#include "compiler/schedule/BatchSlicing.h"
#include "passes/Pass.h"
#include "passes/Pipeline.h"
#include "runtime/Backend.h"
#include "tests/unit/BatchNormFusionFixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <tuple>

namespace hgp {
namespace {

using namespace bnfusion;

// ---- The pass on small graphs --------------------------------------------------------------

Builder bnRelu = [](Graph& g, const Params& p) {
  return std::vector<Value*>{op1(g, OpKind::Relu, {bnTrain(g, p[0], p[1], p[2])})};
};

Builder bnAddRelu = [](Graph& g, const Params& p) {
  Value* s = op1(g, OpKind::Relu, {p[3]}); // the residual is computed before the BatchNorm
  Value* a = op1(g, OpKind::Add, {bnTrain(g, p[0], p[1], p[2]), s});
  return std::vector<Value*>{op1(g, OpKind::Relu, {a})};
};

/// ResNet's downsampling block end: relu(BN(x) + BN(s)); the later BatchNorm takes the earlier
/// one's result as its residual.
Builder twoBnAddRelu = [](Graph& g, const Params& p) {
  Value* y1 = bnTrain(g, p[0], p[1], p[2]);
  Value* y2 = bnTrain(g, p[3], p[1], p[2]);
  return std::vector<Value*>{op1(g, OpKind::Relu, {op1(g, OpKind::Add, {y1, y2})})};
};

/// Inference-mode BatchNorm (frozen statistics) + Relu, in a training graph.
Builder frozenBnRelu = [](Graph& g, const Params& p) {
  int64_t c = p[0]->shape()[1];
  Value* mean = *g.addGraphValue("mean", TensorRole::State, f32({c}), uniform(f32({c}), 5));
  Value* var = *g.addGraphValue("var", TensorRole::State, f32({c}), uniform(f32({c}), 6, 0.5, 2));
  Value* x = op1(g, OpKind::Neg, {p[0]}); // a transient X, which batch slicing can slice
  return std::vector<Value*>{
      op1(g, OpKind::Relu, {op1(g, OpKind::BatchNorm, {x, p[1], p[2], mean, var}, eps())})};
};

AttrMap conv3x3() {
  AttrMap a;
  a.setInts("strides", {1, 1});
  a.setInts("pads", {1, 1, 1, 1});
  a.setInts("dilations", {1, 1});
  a.setInt("group", 1);
  return a;
}

/// A ResNet block on a stem: Z0 = relu(BN(x)), Z = relu(BN(conv(Z0)) + Z0). In the backward the
/// gradient of the block input Z0 is Sum(conv's ConvBwdData, the block end's G), and its only
/// reader is the stem's fused BatchNormBwd: the Sum the pass folds.
Builder residualBlock = [](Graph& g, const Params& p) {
  int64_t c = p[0]->shape()[1];
  TensorType wt = f32({c, c, 3, 3});
  Value* w = *g.addGraphValue("w", TensorRole::Param, wt, uniform(wt, 7, -0.3f, 0.3f));
  Value* z0 = op1(g, OpKind::Relu, {bnTrain(g, p[0], p[1], p[2])});
  Value* y = bnTrain(g, op1(g, OpKind::Conv, {z0, w}, conv3x3()), p[1], p[2]);
  return std::vector<Value*>{op1(g, OpKind::Relu, {op1(g, OpKind::Add, {y, z0})})};
};

/// A BatchNorm without a Relu whose result has two readers: its gradient is a Sum of two, read
/// only by the plain BatchNormBwd.
Builder bnTwoReaders = [](Graph& g, const Params& p) {
  Value* y = bnTrain(g, p[0], p[1], p[2]);
  AttrMap a;
  a.setFloat("alpha", 3.0);
  return std::vector<Value*>{op1(g, OpKind::Neg, {y}), op1(g, OpKind::Scale, {y}, a)};
};

TEST(FuseBatchNorm, FusesBatchNormReluForwardAndBackward) {
  Prepared p = prepare(bnRelu, Precision::FP32, true);
  const Graph& g = *p.g;
  EXPECT_EQ(count(g, OpKind::Relu), 0u) << printGraph(g);
  EXPECT_EQ(count(g, OpKind::ReluBwd), 0u) << printGraph(g);
  const Node* bn = find(g, OpKind::BatchNormTrain);
  ASSERT_NE(bn, nullptr);
  EXPECT_EQ(bn->attrs().getString("activation"), "relu");
  EXPECT_EQ(bn->numInputs(), 3u);
  const Node* bwd = find(g, OpKind::BatchNormBwd);
  ASSERT_NE(bwd, nullptr);
  EXPECT_EQ(bwd->attrs().getString("activation"), "relu");
  ASSERT_EQ(bwd->numInputs(), 6u);
  EXPECT_EQ(bwd->input(5), bn->output(0)) << "the mask source is the fused forward's output";
  EXPECT_EQ(p.ctx.stats["fuse-batch-norm.relu"], 1);
  EXPECT_EQ(p.ctx.stats["fuse-batch-norm.bwd-relu"], 1);
  // The printed IR shows the attribute and parses back.
  std::string text = printGraph(g);
  EXPECT_NE(text.find("activation=\"relu\""), std::string::npos);
  auto back = parseGraph(text);
  ASSERT_TRUE(back.hasValue()) << back.status().toString();
  EXPECT_EQ(printGraph(**back), text);
}

TEST(FuseBatchNorm, FusesTheResidualAddAndWritesTheSharedGradient) {
  Prepared p = prepare(bnAddRelu, Precision::FP32, true);
  const Graph& g = *p.g;
  const Node* bn = find(g, OpKind::BatchNormTrain);
  ASSERT_NE(bn, nullptr);
  ASSERT_EQ(bn->numInputs(), 4u) << printGraph(g);
  EXPECT_EQ(bn->attrs().getString("activation"), "relu");
  EXPECT_EQ(count(g, OpKind::Add), 0u) << printGraph(g);
  EXPECT_EQ(count(g, OpKind::Relu), 1u) << "only the residual's own Relu stays";
  // The block end's gradient G also feeds the shortcut: the fused BatchNormBwd writes it as a
  // fourth result, which the shortcut's gradient (ReluBwd of the residual's own Relu) reads.
  EXPECT_EQ(count(g, OpKind::ReluBwd), 1u) << "only the residual's own Relu's gradient stays";
  const Node* bwd = find(g, OpKind::BatchNormBwd);
  ASSERT_NE(bwd, nullptr);
  EXPECT_EQ(bwd->numInputs(), 6u);
  ASSERT_EQ(bwd->numOutputs(), 4u) << printGraph(g);
  EXPECT_EQ(bwd->attrs().getString("activation"), "relu");
  const Node* shortcut = find(g, OpKind::ReluBwd);
  EXPECT_EQ(shortcut->input(0), bwd->output(3));
  EXPECT_EQ(p.ctx.stats["fuse-batch-norm.add-relu"], 1);
  EXPECT_EQ(p.ctx.stats["fuse-batch-norm.bwd-relu-shared"], 1);
}

TEST(FuseBatchNorm, TheLaterBatchNormTakesTheEarlierOneAsResidual) {
  Prepared p = prepare(twoBnAddRelu, Precision::FP32, true);
  const Graph& g = *p.g;
  EXPECT_EQ(count(g, OpKind::Add), 0u) << printGraph(g);
  std::vector<const Node*> bns;
  for (const Node* n : g.nodes())
    if (n->op() == OpKind::BatchNormTrain) bns.push_back(n);
  ASSERT_EQ(bns.size(), 2u);
  EXPECT_EQ(bns[0]->numInputs(), 3u);
  EXPECT_FALSE(bns[0]->attrs().has("activation"));
  ASSERT_EQ(bns[1]->numInputs(), 4u);
  EXPECT_EQ(bns[1]->input(3), bns[0]->output(0));
  // G feeds both BatchNormBwds: the first absorbs the ReluBwd and writes G for the second.
  EXPECT_EQ(count(g, OpKind::ReluBwd), 0u) << printGraph(g);
  std::vector<const Node*> bwds;
  for (const Node* n : g.nodes())
    if (n->op() == OpKind::BatchNormBwd) bwds.push_back(n);
  ASSERT_EQ(bwds.size(), 2u);
  ASSERT_EQ(bwds[0]->numOutputs(), 4u);
  EXPECT_EQ(bwds[1]->input(0), bwds[0]->output(3));
  EXPECT_FALSE(bwds[1]->attrs().has("activation"));
}

TEST(FuseBatchNorm, FusesInferenceModeBatchNorm) {
  Prepared p = prepare(frozenBnRelu, Precision::FP32, true);
  const Node* bn = find(*p.g, OpKind::BatchNorm);
  ASSERT_NE(bn, nullptr);
  EXPECT_EQ(bn->attrs().getString("activation"), "relu");
  EXPECT_EQ(count(*p.g, OpKind::Relu), 0u);
  const Node* bwd = find(*p.g, OpKind::BatchNormBwd);
  ASSERT_NE(bwd, nullptr);
  EXPECT_EQ(bwd->attrs().getString("activation"), "relu");
  EXPECT_EQ(bwd->attrs().getInt("batch_stats", 1), 0);
}

TEST(FuseBatchNorm, LeavesAnIntermediateWithAnotherReader) {
  // Y is also an output: it must stay, so the Relu is not folded in.
  Prepared p = prepare(
      [](Graph& g, const Params& ps) {
        Value* y = bnTrain(g, ps[0], ps[1], ps[2]);
        return std::vector<Value*>{op1(g, OpKind::Relu, {y}), y};
      },
      Precision::FP32, true);
  EXPECT_EQ(count(*p.g, OpKind::Relu), 1u);
  EXPECT_FALSE(find(*p.g, OpKind::BatchNormTrain)->attrs().has("activation"));
  // Its gradient is the sum of the Relu's and the output's: ReluBwd feeds a Sum, not the BN.
  EXPECT_EQ(count(*p.g, OpKind::ReluBwd), 1u);
  EXPECT_FALSE(find(*p.g, OpKind::BatchNormBwd)->attrs().has("activation"));

  // The Add's result read twice: no residual fusion.
  Prepared q = prepare(
      [](Graph& g, const Params& ps) {
        Value* a = op1(g, OpKind::Add, {bnTrain(g, ps[0], ps[1], ps[2]), ps[3]});
        return std::vector<Value*>{op1(g, OpKind::Relu, {a}), a};
      },
      Precision::FP32, true);
  EXPECT_EQ(count(*q.g, OpKind::Add), 1u);
  EXPECT_EQ(find(*q.g, OpKind::BatchNormTrain)->numInputs(), 3u);
}

TEST(FuseBatchNorm, LeavesAReluThatIsNotDirectlyAfterTheBatchNorm) {
  Prepared p = prepare(
      [](Graph& g, const Params& ps) {
        AttrMap a;
        a.setFloat("alpha", 2.0);
        Value* y = op1(g, OpKind::Scale, {bnTrain(g, ps[0], ps[1], ps[2])}, a);
        return std::vector<Value*>{op1(g, OpKind::Relu, {y})};
      },
      Precision::FP32, true);
  EXPECT_EQ(count(*p.g, OpKind::Relu), 1u);
  EXPECT_EQ(count(*p.g, OpKind::ReluBwd), 1u);
  EXPECT_FALSE(find(*p.g, OpKind::BatchNormTrain)->attrs().has("activation"));
  EXPECT_FALSE(find(*p.g, OpKind::BatchNormBwd)->attrs().has("activation"));
}

TEST(FuseBatchNorm, LeavesAResidualComputedAfterTheBatchNormOrOfAnotherShape) {
  // The residual is computed after the BatchNorm (and is not a BatchNorm result itself).
  Prepared p = prepare(
      [](Graph& g, const Params& ps) {
        Value* y = bnTrain(g, ps[0], ps[1], ps[2]);
        Value* s = op1(g, OpKind::Relu, {ps[3]});
        return std::vector<Value*>{op1(g, OpKind::Relu, {op1(g, OpKind::Add, {y, s})})};
      },
      Precision::FP32, true);
  EXPECT_EQ(count(*p.g, OpKind::Add), 1u) << printGraph(*p.g);
  EXPECT_EQ(find(*p.g, OpKind::BatchNormTrain)->numInputs(), 3u);
  // A broadcast residual ([C,1,1]) is not fused.
  Prepared q = prepare(
      [](Graph& g, const Params& ps) {
        Value* s = *g.addGraphValue("b", TensorRole::Param, f32({3, 1, 1}), uniform(f32({3, 1, 1}), 8));
        Value* a = op1(g, OpKind::Add, {bnTrain(g, ps[0], ps[1], ps[2]), s});
        return std::vector<Value*>{op1(g, OpKind::Relu, {a})};
      },
      Precision::FP32, true);
  EXPECT_EQ(count(*q.g, OpKind::Add), 1u);
}

/// The Sums whose result is the first operand of a BatchNormBwd or of a ReluBwd (the unfused
/// form of the block input's gradient: Sum, then ReluBwd, then BatchNormBwd).
size_t sumsIntoBatchNormBwd(const Graph& g) {
  size_t n = 0;
  for (const Node* b : g.nodes())
    if ((b->op() == OpKind::BatchNormBwd || b->op() == OpKind::ReluBwd) &&
        b->input(0)->producer() && b->input(0)->producer()->op() == OpKind::Sum)
      ++n;
  return n;
}

TEST(FuseBatchNorm, FoldsTheGradientSumAtABlockInput) {
  Prepared plain = prepare(residualBlock, Precision::FP32, false);
  EXPECT_EQ(sumsIntoBatchNormBwd(*plain.g), 1u) << printGraph(*plain.g);
  Prepared p = prepare(residualBlock, Precision::FP32, true);
  const Graph& g = *p.g;
  EXPECT_EQ(sumsIntoBatchNormBwd(g), 0u) << printGraph(g);
  EXPECT_EQ(count(g, OpKind::Sum), count(*plain.g, OpKind::Sum) - 1) << printGraph(g);
  EXPECT_EQ(p.ctx.stats["fuse-gradient-sums.bwd-sum"], 1);
  std::vector<const Node*> bwds;
  for (const Node* n : g.nodes())
    if (n->op() == OpKind::BatchNormBwd) bwds.push_back(n);
  ASSERT_EQ(bwds.size(), 2u);
  // The block end's BatchNormBwd (first in program order) writes G; the stem's reads the two
  // addends: the convolution's input gradient and G, with its own Z as the 6th operand.
  const Node *end = bwds[0], *stem = bwds[1];
  ASSERT_EQ(end->numOutputs(), 4u) << printGraph(g);
  EXPECT_EQ(end->attrs().getInt("dy_parts", 1), 1);
  ASSERT_EQ(stem->numInputs(), 7u) << printGraph(g);
  EXPECT_EQ(stem->attrs().getInt("dy_parts", 1), 2);
  EXPECT_EQ(stem->attrs().getString("activation"), "relu");
  std::set<const Value*> parts = {stem->input(0), stem->input(6)};
  EXPECT_TRUE(parts.count(end->output(3))) << "G is one addend";
  bool convGrad = false;
  for (const Value* v : parts)
    convGrad |= v->producer() && v->producer()->op() == OpKind::ConvBwdData;
  EXPECT_TRUE(convGrad) << "the convolution's input gradient is the other";
  EXPECT_EQ(stem->input(5)->producer(), find(g, OpKind::BatchNormTrain)) << "Z stays the 6th";
  // The printed IR shows the attribute and parses back.
  std::string text = printGraph(g);
  EXPECT_NE(text.find("dy_parts=2"), std::string::npos) << text;
  auto back = parseGraph(text);
  ASSERT_TRUE(back.hasValue()) << back.status().toString();
  EXPECT_EQ(printGraph(**back), text);
}

TEST(FuseBatchNorm, FoldsTheGradientSumIntoAPlainBatchNormBwd) {
  Prepared p = prepare(bnTwoReaders, Precision::FP32, true);
  const Node* bwd = find(*p.g, OpKind::BatchNormBwd);
  ASSERT_NE(bwd, nullptr);
  EXPECT_FALSE(bwd->attrs().has("activation"));
  EXPECT_EQ(bwd->attrs().getInt("dy_parts", 1), 2);
  EXPECT_EQ(bwd->numInputs(), 6u) << printGraph(*p.g);
  EXPECT_EQ(sumsIntoBatchNormBwd(*p.g), 0u);
  EXPECT_EQ(p.ctx.stats["fuse-gradient-sums.bwd-sum"], 1);
}

/// A hand-built backward fragment: D = Sum(parts), (dX, dscale, dbias) = BatchNormBwd(D, X, ...),
/// with dX, dscale and dbias as outputs, and D also an output when `dOutput`, also read by a Neg
/// when `dRead`; then fuse-batch-norm.
std::unique_ptr<Graph> sumIntoBwd(size_t parts, bool dOutput, bool dRead, PassContext& ctx) {
  auto g = std::make_unique<Graph>("sum-bwd");
  Value* x = param(*g, "x", f32({2, 3, 4}), 1);
  Value* c = param(*g, "c", f32({3}), 2);
  Value* var = param(*g, "v", f32({3}), 3);
  std::vector<Value*> ps;
  for (size_t i = 0; i < parts; ++i) ps.push_back(param(*g, "d" + std::to_string(i), f32({2, 3, 4}), 4 + i));
  Value* d = op1(*g, OpKind::Sum, ps);
  AttrMap a = eps();
  a.setInt("batch_stats", 1);
  auto bwd = g->addNode(OpKind::BatchNormBwd, {d, x, c, c, var}, a, "bwd");
  EXPECT_TRUE(bwd.hasValue()) << bwd.status().toString();
  for (size_t i = 0; i < 3; ++i) g->addOutput((*bwd)->output(i));
  if (dOutput) g->addOutput(d);
  if (dRead) g->addOutput(op1(*g, OpKind::Neg, {d}));
  Status st = runPipeline(*g, {"fuse-batch-norm", "fuse-gradient-sums"}, ctx);
  EXPECT_TRUE(st.isOk()) << st.toString();
  return g;
}

TEST(FuseBatchNorm, LeavesASumWithAnotherReaderOrOfThreeOperands) {
  {
    PassContext ctx;
    auto g = sumIntoBwd(2, false, false, ctx);
    EXPECT_EQ(count(*g, OpKind::Sum), 0u) << "the control case folds";
    EXPECT_EQ(ctx.stats["fuse-gradient-sums.bwd-sum"], 1);
  }
  for (auto [parts, out, read] : {std::tuple{2u, false, true}, std::tuple{2u, true, false},
                                  std::tuple{3u, false, false}}) {
    SCOPED_TRACE(std::to_string(parts) + (out ? " output" : "") + (read ? " read" : ""));
    PassContext ctx;
    auto g = sumIntoBwd(parts, out, read, ctx);
    EXPECT_EQ(count(*g, OpKind::Sum), 1u) << printGraph(*g);
    EXPECT_EQ(find(*g, OpKind::BatchNormBwd)->numInputs(), 5u);
    EXPECT_EQ(ctx.stats["fuse-gradient-sums.bwd-sum"], 0);
  }
}

TEST(FuseBatchNorm, NoFuseLeavesEveryFusionPassOut) {
  const std::vector<std::string> full = trainPipeline(), eval = evalPipeline();
  std::vector<std::string> train = withoutFusion(full);
  EXPECT_NE(std::find(full.begin(), full.end(), "fuse-batch-norm"), full.end());
  EXPECT_NE(std::find(eval.begin(), eval.end(), "fuse-batch-norm"), eval.end());
  for (const std::string& pass : train) EXPECT_NE(pass.rfind("fuse-", 0), 0u) << pass;
  for (const std::string& pass : withoutFusion(eval)) EXPECT_NE(pass.rfind("fuse-", 0), 0u) << pass;
  EXPECT_EQ(train.size() + 3, full.size()); // fuse-batch-norm, -gradient-sums, -conv-epilogue
  // The passes must follow autodiff: the fused ops have no gradient rules.
  auto at = [&](const char* name) { return std::find(full.begin(), full.end(), name) - full.begin(); };
  EXPECT_LT(at("autodiff"), at("fuse-batch-norm"));
  EXPECT_LT(at("autodiff"), at("fuse-conv-epilogue"));
  EXPECT_LT(at("fuse-batch-norm"), at("fuse-gradient-sums"));
}

TEST(FuseBatchNorm, VerifierChecksTheFusedOperands) {
  Graph g("bad");
  Value* x = param(g, "x", f32({2, 3, 4}), 1);
  Value* c = param(g, "c", f32({3}), 2);
  Value* other = param(g, "o", f32({2, 3, 5}), 3);
  AttrMap relu = eps();
  relu.setString("activation", "relu");
  AttrMap tanh = eps();
  tanh.setString("activation", "tanh");
  EXPECT_FALSE(g.addNode(OpKind::BatchNormTrain, {x, c, c}, tanh, "bad-act").hasValue());
  EXPECT_FALSE(g.addNode(OpKind::BatchNormTrain, {x, c, c, x}, eps(), "residual-without-relu").hasValue());
  EXPECT_FALSE(g.addNode(OpKind::BatchNormTrain, {x, c, c, other}, relu, "bad-residual").hasValue());
  EXPECT_TRUE(g.addNode(OpKind::BatchNormTrain, {x, c, c, x}, relu, "ok").hasValue());
  AttrMap bwd = relu;
  bwd.setInt("batch_stats", 1);
  EXPECT_FALSE(g.addNode(OpKind::BatchNormBwd, {x, x, c, c, c}, bwd, "no-mask").hasValue());
  EXPECT_FALSE(g.addNode(OpKind::BatchNormBwd, {x, x, c, c, c, other}, bwd, "bad-mask").hasValue());
  EXPECT_TRUE(g.addNode(OpKind::BatchNormBwd, {x, x, c, c, c, x}, bwd, "ok-bwd").hasValue());
  EXPECT_TRUE(g.addNode(OpKind::BatchNormBwd, {x, x, c, c, c, x}, bwd, "ok-bwd-g", 4).hasValue());
  AttrMap plainBwd = eps();
  plainBwd.setInt("batch_stats", 1);
  EXPECT_FALSE(g.addNode(OpKind::BatchNormBwd, {x, x, c, c, c}, plainBwd, "g-without-relu", 4).hasValue());
  // dy_parts=2: dY2 is the last operand, of dY's type; the count must match the attributes.
  AttrMap split = plainBwd, splitRelu = bwd;
  split.setInt("dy_parts", 2);
  splitRelu.setInt("dy_parts", 2);
  EXPECT_TRUE(g.addNode(OpKind::BatchNormBwd, {x, x, c, c, c, x}, split, "ok-split").hasValue());
  EXPECT_TRUE(g.addNode(OpKind::BatchNormBwd, {x, x, c, c, c, x, x}, splitRelu, "ok-split-relu", 4).hasValue());
  EXPECT_FALSE(g.addNode(OpKind::BatchNormBwd, {x, x, c, c, c}, split, "no-dy2").hasValue());
  EXPECT_FALSE(g.addNode(OpKind::BatchNormBwd, {x, x, c, c, c, x}, splitRelu, "no-z-or-no-dy2").hasValue());
  EXPECT_FALSE(g.addNode(OpKind::BatchNormBwd, {x, x, c, c, c, other}, split, "bad-dy2").hasValue());
  EXPECT_FALSE(g.addNode(OpKind::BatchNormBwd, {x, x, c, c, c, x, other}, splitRelu, "bad-dy2-relu").hasValue());
  EXPECT_FALSE(g.addNode(OpKind::BatchNormBwd, {x, x, c, c, c, x, x}, bwd, "dy2-without-attr").hasValue());
  AttrMap three = plainBwd;
  three.setInt("dy_parts", 3);
  EXPECT_FALSE(g.addNode(OpKind::BatchNormBwd, {x, x, c, c, c, x}, three, "three-parts").hasValue());
}

/// Batch slicing treats the fused ops at least as conservatively as the plain ones: the training
/// BatchNorm and its gradient stay whole-batch barriers, and an inference-mode BatchNorm + Relu
/// slices X and Z alike, as a plain inference-mode BatchNorm slices X and Y.
TEST(FuseBatchNorm, BatchSlicingKeepsFusedBatchNormWhole) {
  for (const Builder* body : {&bnRelu, &bnAddRelu, &frozenBnRelu}) {
    Prepared p = prepare(*body, Precision::FP32, true);
    EmitOptions eo;
    auto e = emitPlan({ProgramSource{"step", p.g.get(), p.bindings}}, eo);
    ASSERT_TRUE(e.hasValue()) << e.status().toString();
    int fused = 0;
    for (const PlanStep& st : e->plan.programs[0].steps) {
      if (st.attrs.getString("activation", "none") != "relu") continue;
      ++fused;
      auto b = batchOperands(e->plan, st, 4);
      if (st.op == OpKind::BatchNorm) {
        ASSERT_TRUE(b.has_value());
        EXPECT_TRUE(b->in[0] && b->out[0]);
        for (size_t i = 1; i < b->in.size(); ++i) EXPECT_FALSE(b->in[i]) << i;
      } else {
        EXPECT_FALSE(b.has_value()) << opName(st.op) << " must stay a barrier";
      }
    }
    EXPECT_GT(fused, 0);
  }
}

// ---- Fused against unfused on the CPU backend ----------------------------------------------

void expectFusedMatchesUnfused(const std::string& what, const Builder& body, Shape x = {4, 3, 5, 6}) {
  for (Precision precision : {Precision::FP32, Precision::BF16, Precision::FP16}) {
    SCOPED_TRACE(what + " " + precisionName(precision));
    Prepared fused = prepare(body, precision, true, x), plain = prepare(body, precision, false, x);
    int64_t fusions = 0;
    for (const auto& [k, v] : fused.ctx.stats)
      if (k.rfind("fuse-", 0) == 0) fusions += v;
    EXPECT_GT(fusions, 0) << printGraph(*fused.g);
    if (isMixedPrecision(precision)) {
      bool half = false;
      for (const Node* n : fused.g->nodes())
        if (n->op() == OpKind::BatchNormTrain || n->op() == OpKind::BatchNorm)
          half |= n->input(0)->dtype() == activationDType(precision);
      EXPECT_TRUE(half) << "the BatchNorm must run in " << precisionName(precision);
    }
    auto a = runOnCpu(fused), b = runOnCpu(plain);
    ASSERT_EQ(a.size(), b.size());
    ASSERT_GE(a.size(), 5u); // loss, out.0, grad.x, grad.scale, grad.bias (+ grad.s)
    for (const auto& [name, want] : b) {
      ASSERT_TRUE(a.count(name)) << name;
      EXPECT_TRUE(a[name] == want) << name << " differs between the fused and the unfused plan";
    }
  }
}

TEST(FuseBatchNorm, CpuFusedBatchNormReluIsBitIdenticalToUnfused) {
  expectFusedMatchesUnfused("bn-relu", bnRelu);
  expectFusedMatchesUnfused("bn-relu-3d", bnRelu, {2, 4, 3, 2, 5});
}

TEST(FuseBatchNorm, CpuFusedResidualIsBitIdenticalToUnfused) {
  expectFusedMatchesUnfused("bn-add-relu", bnAddRelu);
  expectFusedMatchesUnfused("bn-bn-add-relu", twoBnAddRelu, {3, 8, 7, 7});
}

TEST(FuseBatchNorm, CpuFoldedGradientSumIsBitIdenticalToUnfused) {
  expectFusedMatchesUnfused("residual-block", residualBlock, {2, 8, 5, 5});
  expectFusedMatchesUnfused("bn-two-readers", bnTwoReaders);
}

TEST(FuseBatchNorm, CpuFusedInferenceModeIsBitIdenticalToUnfused) {
  expectFusedMatchesUnfused("frozen-bn-relu", frozenBnRelu);
}

} // namespace
} // namespace hgp
