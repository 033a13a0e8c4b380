// The intra-layer split and the micro-batch pipeline (compiler/schedule/BatchSlicing.h): the
// structure of the result (slices, offsets, accumulate flags, untouched barriers, the pipelined
// order, orders kept where the memory plan shares bytes) and, on the CPU backend, that the
// transformed program computes what the original does.
#include "compiler/schedule/BatchSlicing.h"
#include "compiler/schedule/StreamSchedule.h"
#include "runtime/Backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace hgp {
namespace {

/// A hand-built plan: tensors placed where the test says, one program "train".
struct PlanBuilder {
  Plan plan;
  PlanBuilder() {
    plan.meta.setInt("batch", 4);
    plan.programs.push_back({"train", {}});
  }
  int tensor(const std::string& name, Shape shape, int64_t offset,
             StorageClass storage = StorageClass::Transient,
             TensorRole role = TensorRole::Activation) {
    PlanTensor t;
    t.name = name;
    t.type.shape = std::move(shape);
    t.offset = offset;
    t.storage = storage;
    t.role = role;
    plan.tensors.push_back(t);
    int64_t& region =
        storage == StorageClass::Persistent ? plan.persistentBytes : plan.transientBytes;
    region = std::max(region, (offset + t.bytes() + 63) / 64 * 64);
    return int(plan.tensors.size()) - 1;
  }
  void step(OpKind op, std::vector<int> in, std::vector<int> out, AttrMap a = {}) {
    PlanStep s;
    s.op = op;
    s.inputs = std::move(in);
    s.outputs = std::move(out);
    s.attrs = std::move(a);
    s.loc = std::string(opName(op)) + std::to_string(plan.programs[0].steps.size());
    plan.programs[0].steps.push_back(s);
  }
};

AttrMap convAttrs() {
  AttrMap a;
  a.setInts("strides", {1, 1});
  a.setInts("pads", {1, 1, 1, 1});
  a.setInts("dilations", {1, 1});
  a.setInt("group", 1);
  return a;
}

/// x -> conv -> relu -> ReduceSum (a barrier); backward: dr -> ConvBwdData, ConvBwdFilter.
/// Batch 4, 8 channels of 4x4: 512 bytes per sample.
struct ConvNet {
  PlanBuilder b;
  int x, w, y, r, sum, dr, dx, dw;
  ConvNet() {
    x = b.tensor("x", {4, 8, 4, 4}, 0);
    w = b.tensor("w", {8, 8, 3, 3}, 0, StorageClass::Persistent, TensorRole::Param);
    y = b.tensor("y", {4, 8, 4, 4}, 2048);
    r = b.tensor("r", {4, 8, 4, 4}, 4096);
    sum = b.tensor("sum", {}, 6144);
    dr = b.tensor("dr", {4, 8, 4, 4}, 6208);
    dx = b.tensor("dx", {4, 8, 4, 4}, 8256);
    dw = b.tensor("dw", {8, 8, 3, 3}, 10304);
    b.step(OpKind::Conv, {x, w}, {y}, convAttrs());
    b.step(OpKind::Relu, {y}, {r});
    AttrMap red;
    red.setInts("axes", {0, 1, 2, 3});
    red.setInt("keepdims", 0);
    b.step(OpKind::ReduceSum, {r}, {sum}, red);
    AttrMap bd = convAttrs();
    bd.setInts("x_shape", {4, 8, 4, 4});
    b.step(OpKind::ConvBwdData, {dr, w}, {dx}, bd);
    AttrMap bf = convAttrs();
    bf.setInts("w_shape", {8, 8, 3, 3});
    b.step(OpKind::ConvBwdFilter, {x, dr}, {dw}, bf);
  }
};

SliceOptions forced(int width, int depth) {
  SliceOptions o;
  o.width = width;
  o.depth = depth;
  o.split = width > 1;
  o.pipeline = depth > 1;
  return o;
}

std::vector<float> randomFloats(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = u(rng);
  return v;
}

/// Runs "train" once on the CPU backend with `inputs` written first; returns the named tensors.
std::map<std::string, std::vector<float>> runCpu(const Plan& plan,
                                                 const std::map<int, std::vector<float>>& inputs,
                                                 const std::vector<int>& results) {
  std::map<std::string, std::vector<float>> out;
  EXPECT_TRUE(plan.validate().isOk()) << plan.validate().toString() << "\n" << printPlan(plan);
  auto cpu = createCpuBackend();
  Status st = cpu->load(plan, InitData{});
  EXPECT_TRUE(st.isOk()) << st.toString();
  if (!st) return out;
  for (const auto& [t, v] : inputs) EXPECT_TRUE(cpu->write(t, v.data()).isOk());
  st = cpu->run("train");
  EXPECT_TRUE(st.isOk()) << st.toString() << "\n" << printPlan(plan);
  for (int t : results) {
    std::vector<float> v(size_t(plan.tensors[size_t(t)].type.numElements()));
    EXPECT_TRUE(cpu->read(t, v.data()).isOk());
    out[plan.tensors[size_t(t)].name] = v;
  }
  return out;
}

void expectClose(const std::map<std::string, std::vector<float>>& got,
                 const std::map<std::string, std::vector<float>>& want) {
  for (const auto& [name, w] : want) {
    const std::vector<float>& g = got.at(name);
    ASSERT_EQ(g.size(), w.size()) << name;
    double maxDiff = 0, maxRef = 1e-30;
    for (size_t i = 0; i < w.size(); ++i) {
      maxDiff = std::max(maxDiff, std::fabs(double(g[i]) - double(w[i])));
      maxRef = std::max(maxRef, std::fabs(double(w[i])));
    }
    EXPECT_LE(maxDiff / maxRef, 1e-5) << name;
  }
}

const PlanStep& stepAt(const Plan& p, size_t i) {
  return p.programs[0].steps[i];
}

TEST(BatchSlicing, SplitMakesKSlicesOverContiguousRows) {
  ConvNet n;
  Plan p = n.b.plan;
  SliceResult r = sliceBatches(p, forced(2, 0));
  const auto& steps = p.programs[0].steps;
  // conv x2, relu x2, bwd-data x2, bwd-filter x2, then the barrier, which no later step
  // depends on, so it waits until the end of the run.
  ASSERT_EQ(steps.size(), 9u) << printPlan(p);
  EXPECT_EQ(r.programs["train"].splitSteps, 4);
  EXPECT_EQ(r.programs["train"].pipelines, 0);
  for (int j = 0; j < 2; ++j) {
    const PlanStep& conv = stepAt(p, size_t(j));
    ASSERT_EQ(conv.op, OpKind::Conv);
    const PlanTensor& xs = p.tensors[size_t(conv.inputs[0])];
    const PlanTensor& ys = p.tensors[size_t(conv.outputs[0])];
    EXPECT_EQ(xs.type.shape, (Shape{2, 8, 4, 4}));
    EXPECT_EQ(xs.offset, 0 + j * 1024);
    EXPECT_EQ(ys.offset, 2048 + j * 1024);
    EXPECT_EQ(ys.storage, StorageClass::Transient);
    EXPECT_EQ(conv.inputs[1], n.w) << "the weights stay whole";
    EXPECT_EQ(r.programs["train"].steps[size_t(j)].width, 2);
    EXPECT_EQ(r.programs["train"].steps[size_t(j)].part, j);
  }
  EXPECT_EQ(stepAt(p, 2).op, OpKind::Relu);
  EXPECT_EQ(stepAt(p, 8).op, OpKind::ReduceSum);
  EXPECT_EQ(stepAt(p, 8).inputs, (std::vector<int>{n.r})) << "the barrier reads the whole tensor";
  EXPECT_EQ(r.programs["train"].steps[8].width, 1);
  for (int j = 0; j < 2; ++j) {
    const PlanStep& bd = stepAt(p, size_t(4 + j));
    ASSERT_EQ(bd.op, OpKind::ConvBwdData);
    EXPECT_EQ(bd.attrs.getInts("x_shape"), (std::vector<int64_t>{2, 8, 4, 4}));
    EXPECT_EQ(p.tensors[size_t(bd.outputs[0])].offset, 8256 + j * 1024);
    const PlanStep& bf = stepAt(p, size_t(6 + j));
    ASSERT_EQ(bf.op, OpKind::ConvBwdFilter);
    EXPECT_EQ(bf.outputs, (std::vector<int>{n.dw})) << "slices add into one dW";
    EXPECT_EQ(bf.attrs.getInt("accumulate", 0), j) << "the first slice overwrites, the rest add";
    EXPECT_EQ(p.tensors[size_t(bf.inputs[1])].offset, 6208 + j * 1024);
  }
  EXPECT_TRUE(p.validate().isOk()) << p.validate().toString();
  // Printing and parsing keep the slices.
  auto back = parsePlan(printPlan(p));
  ASSERT_TRUE(back.hasValue()) << back.status().toString();
  EXPECT_EQ(printPlan(*back), printPlan(p));
}

TEST(BatchSlicing, PipelineRunsMicroBatchIOfEveryLayerBeforeIPlusOne) {
  ConvNet n;
  Plan p = n.b.plan;
  SliceResult r = sliceBatches(p, forced(0, 2));
  std::vector<std::string> order;
  for (size_t i = 0; i < p.programs[0].steps.size(); ++i) {
    const StepSlicing& s = r.programs["train"].steps[i];
    order.push_back(std::string(opName(stepAt(p, i).op)) + "#" + std::to_string(s.micro) + "/" +
                    std::to_string(s.depth));
  }
  // The ReduceSum barrier depends on nothing after it, so it moves after the backward run,
  // which then joins the forward run: one run of four layers.
  std::vector<std::string> want = {"Conv#0/2",          "Relu#0/2",          "ConvBwdData#0/2",
                                   "ConvBwdFilter#0/2", "Conv#1/2",          "Relu#1/2",
                                   "ConvBwdData#1/2",   "ConvBwdFilter#1/2", "ReduceSum#0/1"};
  EXPECT_EQ(order, want) << printPlan(p);
  EXPECT_EQ(r.programs["train"].pipelines, 1);
}

TEST(BatchSlicing, SplitAndPipelinedStepsComputeWhatTheWholeStepDoes) {
  ConvNet n;
  std::map<int, std::vector<float>> in = {
      {n.x, randomFloats(512, 1)}, {n.w, randomFloats(576, 2)}, {n.dr, randomFloats(512, 3)}};
  std::vector<int> results = {n.y, n.r, n.sum, n.dx, n.dw};
  auto want = runCpu(n.b.plan, in, results);
  for (auto [w, d] : {std::pair{2, 0}, {0, 2}, {2, 2}, {4, 0}, {0, 4}}) {
    SCOPED_TRACE("width " + std::to_string(w) + " depth " + std::to_string(d));
    Plan p = n.b.plan;
    sliceBatches(p, forced(w, d));
    EXPECT_GT(p.programs[0].steps.size(), n.b.plan.programs[0].steps.size());
    expectClose(runCpu(p, in, results), want);
  }
}

TEST(BatchSlicing, SharedBytesKeepTheOrderTheyNeed) {
  // a = relu(x) [4,32]; c = concat(a, a) [4,64] placed on x's bytes (x is dead after a).
  // Pipelined as a0 c0 a1 c1, c0 would overwrite x's second half before a1 reads it.
  PlanBuilder b;
  int x = b.tensor("x", {4, 32}, 0);
  int a = b.tensor("a", {4, 32}, 1024);
  int c = b.tensor("c", {4, 64}, 0);
  b.step(OpKind::Relu, {x}, {a});
  AttrMap cat;
  cat.setInt("axis", 1);
  b.step(OpKind::Concat, {a, a}, {c}, cat);
  std::map<int, std::vector<float>> in = {{x, randomFloats(128, 4)}};
  auto want = runCpu(b.plan, in, {c});
  Plan p = b.plan;
  sliceBatches(p, forced(0, 2));
  ASSERT_EQ(p.programs[0].steps.size(), 4u);
  EXPECT_EQ(stepAt(p, 0).op, OpKind::Relu);
  EXPECT_EQ(stepAt(p, 1).op, OpKind::Relu) << "a1 must read x before c0 overwrites it";
  expectClose(runCpu(p, in, {c}), want);
}

TEST(BatchSlicing, BarriersAndUnsplittableOperandsStayWhole) {
  PlanBuilder b;
  // A plan input (persistent, double-buffered on CUDA), rows that are not 64-byte multiples,
  // and a BatchNormTrain.
  int in = b.tensor("input", {4, 8, 4, 4}, 0, StorageClass::Persistent, TensorRole::Input);
  int w = b.tensor("w", {8, 8, 3, 3}, 2048, StorageClass::Persistent, TensorRole::Param);
  int y = b.tensor("y", {4, 8, 4, 4}, 0);
  int odd = b.tensor("odd", {4, 10}, 2048);
  int oddr = b.tensor("oddr", {4, 10}, 2240);
  int s = b.tensor("s", {8}, 8192, StorageClass::Persistent, TensorRole::Param);
  int bn = b.tensor("bn", {4, 8, 4, 4}, 4096);
  int m = b.tensor("m", {8}, 6144);
  int v = b.tensor("v", {8}, 6208);
  b.step(OpKind::Conv, {in, w}, {y}, convAttrs());
  b.step(OpKind::Relu, {odd}, {oddr});
  AttrMap eps;
  eps.setFloat("epsilon", 1e-5);
  b.step(OpKind::BatchNormTrain, {y, s, s}, {bn, m, v}, eps);
  Plan p = b.plan;
  SliceResult r = sliceBatches(p, forced(2, 2));
  EXPECT_EQ(printPlan(p), printPlan(b.plan));
  EXPECT_EQ(r.programs["train"].splitSteps, 0);
  EXPECT_FALSE(batchOperands(p, stepAt(p, 2), 4).has_value());
}

TEST(BatchSlicing, ElementwiseBroadcastOperandsStayWhole) {
  PlanBuilder b;
  int x = b.tensor("x", {4, 16}, 0);
  int bias = b.tensor("bias", {1, 16}, 256);
  int y = b.tensor("y", {4, 16}, 512);
  b.step(OpKind::Add, {x, bias}, {y});
  auto ops = batchOperands(b.plan, stepAt(b.plan, 0), 4);
  ASSERT_TRUE(ops.has_value());
  EXPECT_EQ(ops->in, (std::vector<bool>{true, false}));
  EXPECT_EQ(ops->out, (std::vector<bool>{true}));
  Plan p = b.plan;
  sliceBatches(p, forced(2, 0));
  ASSERT_EQ(p.programs[0].steps.size(), 2u);
  EXPECT_EQ(stepAt(p, 1).inputs[1], bias);
  std::map<int, std::vector<float>> in = {{x, randomFloats(64, 5)}, {bias, randomFloats(16, 6)}};
  expectClose(runCpu(p, in, {y}), runCpu(b.plan, in, {y}));
}

TEST(BatchSlicing, FusedPerChannelOperandsStayWhole) {
  // A fused step's per-channel bias (FusedOperandMap: element i % 4) is read whole by every
  // slice, even when its length equals the batch; a [1,4,1,1] operand likewise.
  PlanBuilder b;
  int x = b.tensor("x", {4, 4, 2, 4}, 0);
  int bias = b.tensor("bias", {4}, 512);
  int scale = b.tensor("scale", {1, 4, 1, 1}, 576);
  int y = b.tensor("y", {4, 4, 2, 4}, 1024);
  AttrMap a;
  a.setString("program", "Add f32 %0 %1; Mul f32 %3 %2; Relu f32 %4");
  a.setInts("results", {5});
  b.step(OpKind::FusedElementwise, {x, bias, scale}, {y}, a);
  auto ops = batchOperands(b.plan, stepAt(b.plan, 0), 4);
  ASSERT_TRUE(ops.has_value());
  EXPECT_EQ(ops->in, (std::vector<bool>{true, false, false}));
  Plan p = b.plan;
  sliceBatches(p, forced(2, 0));
  ASSERT_EQ(p.programs[0].steps.size(), 2u);
  EXPECT_EQ(stepAt(p, 1).inputs[1], bias);
  std::map<int, std::vector<float>> in = {
      {x, randomFloats(128, 5)}, {bias, randomFloats(4, 6)}, {scale, randomFloats(4, 7)}};
  expectClose(runCpu(p, in, {y}), runCpu(b.plan, in, {y}));
}

TEST(BatchSlicing, SlicesOfOneTensorAreIndependentForTheStreamSchedule) {
  ConvNet n;
  Plan p = n.b.plan;
  sliceBatches(p, forced(2, 0));
  // Steps 0 and 1 are the two conv slices, 2 and 3 the relu slices.
  auto deps = reducedDependencies(p, p.programs[0]);
  EXPECT_TRUE(deps[1].empty()) << "conv slice 1 does not wait for slice 0";
  EXPECT_EQ(deps[2], (std::vector<int>{0}));
  EXPECT_EQ(deps[3], (std::vector<int>{1}));
  Target t = *findTarget("h200");
  ProgramCost cost = programCost(t, p, p.programs[0], Precision::TF32);
  StreamSchedule s = scheduleStreams(t, p, p.programs[0], cost, 2);
  EXPECT_NE(s.stream[0], s.stream[1]);
  // The filter gradient's slices add into one dW: the second waits for the first.
  EXPECT_EQ(stepAt(p, 7).attrs.getInt("accumulate", 0), 1);
  EXPECT_NE(std::find(deps[7].begin(), deps[7].end(), 6), deps[7].end());
}

TEST(BatchSlicing, TheAnalyzersChoicesNeverSlowTheScheduleDown) {
  // Batch 32 in fp32 (no tensor cores): relu, then a 3x3 conv 48 -> 128 on 34x34. Its implicit
  // GEMM has M = 32 x 1156 = 36,992 rows (289 tiles of 128), N = 128 and a reduction of 432, too
  // short for split-K, so it runs 1.09 waves of the H200's 264 block slots and pays for two,
  // compute-bound. Quarters of 73 blocks each leave SMs to one another, and the analyzer splits
  // it; the relu before it is split along, at four launches for one. What is kept must not make
  // the predicted schedule slower than the plain program's; with 8 streams the split is kept,
  // with one it cannot pay.
  PlanBuilder b;
  b.plan.meta.setInt("batch", 32);
  int64_t in = 32 * 48 * 1156 * 4;
  int x = b.tensor("x", {32, 48, 34, 34}, 0);
  int w = b.tensor("w", {128, 48, 3, 3}, 0, StorageClass::Persistent, TensorRole::Param);
  int r = b.tensor("r", {32, 48, 34, 34}, in);
  int y = b.tensor("y", {32, 128, 34, 34}, 2 * in);
  b.step(OpKind::Relu, {x}, {r});
  b.step(OpKind::Conv, {r, w}, {y}, convAttrs());
  Target t = *findTarget("h200");
  for (int streams : {1, 8}) {
    SliceOptions o;
    o.target = &t;
    o.maxStreams = streams;
    o.precision = Precision::FP32;
    Plan p = b.plan;
    SliceResult res = sliceBatches(p, o);
    auto predicted = [&](const Plan& q) {
      ProgramCost c = programCost(t, q, q.programs[0], Precision::FP32);
      return scheduleStreams(t, q, q.programs[0], c, streams).sharedSeconds;
    };
    EXPECT_LE(predicted(p), predicted(b.plan)) << streams << " streams";
    if (streams == 1)
      EXPECT_EQ(res.programs["train"].splitSteps, 0) << "one stream cannot overlap slices";
    else
      EXPECT_GT(res.programs["train"].splitSteps, 0);
    ASSERT_TRUE(p.validate().isOk());
  }
}

TEST(BatchSlicing, WithoutATargetNothingIsSplitUnlessForced) {
  ConvNet n;
  Plan p = n.b.plan;
  SliceResult r = sliceBatches(p, SliceOptions{});
  EXPECT_EQ(printPlan(p), printPlan(n.b.plan));
  EXPECT_EQ(r.programs["train"].splitSteps, 0);
  ASSERT_EQ(r.programs["train"].steps.size(), p.programs[0].steps.size());
  for (const StepSlicing& s : r.programs["train"].steps) EXPECT_EQ(s.width * s.depth, 1);
}

} // namespace
} // namespace hgp
