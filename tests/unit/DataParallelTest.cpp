// Data parallelism at the plan level (docs/distributed.md): the all-reduce-gradients pass
// (bucket contents, caps and order, placement right after the last gradient of each bucket), the
// optimizer reading the averaged gradients, the CPU backend's one-rank identity (a plan for 2
// ranks trains bit-identically to a plan for 1 on one rank), the plan text round trip, the
// collectives' own stream, and the ring all-reduce term of the cost model against hand-computed
// values.
#include "compiler/analysis/CostModel.h"
#include "compiler/schedule/AssignStreams.h"
#include "compiler/plan/PlanEmitter.h"
#include "compiler/schedule/StreamSchedule.h"
#include "passes/Pass.h"
#include "passes/Pipeline.h"
#include "runtime/Backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>

namespace hgp {
namespace {

std::shared_ptr<TensorData> randomData(const TensorType& t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  auto d = std::make_shared<TensorData>();
  d->type = t;
  d->bytes.resize(size_t(t.bytes()));
  float* f = reinterpret_cast<float*>(d->bytes.data());
  for (int64_t i = 0; i < t.numElements(); ++i) f[i] = u(rng);
  return d;
}

struct Compiled {
  EmittedPlan emitted;
  std::map<std::string, int64_t> stats;
};

/// A two-layer perceptron (x[4,8] -> 16 -> 10) trained with SGD and momentum, for `ranks`.
Compiled compileMlp(int64_t ranks, int64_t bucketBytes) {
  Graph g("mlp");
  Value* x = *g.addGraphValue("x", TensorRole::Input, {DType::F32, {4, 8}});
  auto param = [&](const std::string& n, Shape s, uint32_t seed) {
    TensorType t{DType::F32, s};
    return *g.addGraphValue(n, TensorRole::Param, t, randomData(t, seed));
  };
  Value *w1 = param("w1", {16, 8}, 1), *b1 = param("b1", {16}, 2);
  Value *w2 = param("w2", {10, 16}, 3), *b2 = param("b2", {10}, 4);
  AttrMap gemm;
  gemm.setFloat("alpha", 1);
  gemm.setFloat("beta", 1);
  gemm.setInt("transA", 0);
  gemm.setInt("transB", 1);
  Value* h = (*g.addNode(OpKind::Gemm, {x, w1, b1}, gemm, "fc1"))->output(0);
  Value* r = (*g.addNode(OpKind::Relu, {h}, {}, "relu"))->output(0);
  Value* y = (*g.addNode(OpKind::Gemm, {r, w2, b2}, gemm, "fc2"))->output(0);
  g.addOutput(y);
  PassContext ctx;
  ctx.train.lr = 0.1;
  ctx.train.momentum = 0.9;
  ctx.train.ranks = ranks;
  ctx.train.bucketBytes = bucketBytes;
  Status st = runPipeline(g, trainPipeline(), ctx);
  EXPECT_TRUE(st.isOk()) << st.toString();
  ProgramSource prog{"train", &g, {{"input", "x"}, {"labels", "labels"}, {"loss", "loss"}}};
  auto emitted = emitPlan({prog}, EmitOptions{});
  EXPECT_TRUE(emitted.hasValue()) << emitted.status().toString();
  return {std::move(*emitted), ctx.stats};
}

std::vector<const PlanStep*> allReduces(const PlanProgram& p) {
  std::vector<const PlanStep*> out;
  for (const PlanStep& s : p.steps)
    if (s.op == OpKind::AllReduce) out.push_back(&s);
  return out;
}

/// The index of the step that writes tensor `t`, or -1.
int producerOf(const PlanProgram& p, int t) {
  for (size_t i = 0; i < p.steps.size(); ++i)
    for (int o : p.steps[i].outputs)
      if (o == t) return int(i);
  return -1;
}

TEST(DataParallel, OneRankAddsNoCollectives) {
  Compiled c = compileMlp(1, 1 << 20);
  EXPECT_TRUE(allReduces(c.emitted.plan.programs[0]).empty());
}

TEST(DataParallel, EveryGradientTheLossAndTheCountAreAveragedOnce) {
  Compiled c = compileMlp(2, int64_t(1) << 30);
  const Plan& plan = c.emitted.plan;
  const PlanProgram& p = plan.programs[0];
  auto ars = allReduces(p);
  ASSERT_EQ(ars.size(), 1u) << "a cap above the model's size gives one bucket";
  std::set<std::string> reduced;
  int64_t bytes = 0;
  for (size_t i = 0; i < ars[0]->outputs.size(); ++i) {
    const PlanTensor& in = plan.tensors[size_t(ars[0]->inputs[i])];
    const PlanTensor& out = plan.tensors[size_t(ars[0]->outputs[i])];
    EXPECT_EQ(in.name, out.name + ".local");
    EXPECT_EQ(in.type, out.type);
    reduced.insert(out.name);
    bytes += out.bytes();
  }
  EXPECT_EQ(reduced,
            (std::set<std::string>{"loss", "correct", "w1.grad", "b1.grad", "w2.grad", "b2.grad"}));
  EXPECT_EQ(ars[0]->attrs.getInt("bytes"), bytes);
  EXPECT_EQ(ars[0]->attrs.getInt("ranks"), 2);
  EXPECT_EQ(ars[0]->attrs.getString("reduce"), "avg");
  // The optimizer and the finiteness check read the averaged values, never the local ones.
  for (const PlanStep& s : p.steps) {
    if (s.op == OpKind::AllReduce) continue;
    for (int in : s.inputs) {
      const std::string& n = plan.tensors[size_t(in)].name;
      if (n.size() > 6 && n.substr(n.size() - 6) == ".local")
        ADD_FAILURE() << opName(s.op) << " '" << s.loc << "' reads " << n;
    }
  }
  EXPECT_EQ(plan.tensors[size_t(plan.binding("loss"))].name, "loss");
}

TEST(DataParallel, BucketsFollowTheBackwardOrderAndStartRightAfterTheirLastGradient) {
  for (int64_t cap : {int64_t(1), int64_t(100), int64_t(700), int64_t(1) << 30}) {
    SCOPED_TRACE("cap " + std::to_string(cap));
    Compiled c = compileMlp(2, cap);
    const Plan& plan = c.emitted.plan;
    const PlanProgram& p = plan.programs[0];
    int lastReady = -1;
    int64_t bucket = 0, members = 0;
    for (size_t i = 0; i < p.steps.size(); ++i) {
      const PlanStep& s = p.steps[i];
      if (s.op != OpKind::AllReduce) continue;
      EXPECT_EQ(s.attrs.getInt("bucket"), bucket++);
      int64_t bytes = 0;
      int ready = -1;
      for (int in : s.inputs) {
        bytes += plan.tensors[size_t(in)].bytes();
        int prod = producerOf(p, in);
        EXPECT_GE(prod, lastReady) << "bucket members must be final in backward order";
        ready = std::max(ready, prod);
      }
      members += int64_t(s.inputs.size());
      EXPECT_TRUE(bytes <= cap || s.inputs.size() == 1) << "bucket over the cap: " << bytes;
      lastReady = ready;
      // Placed right after its last member's producer (other buckets may sit in between).
      size_t j = i;
      while (j > 0 && p.steps[j - 1].op == OpKind::AllReduce) --j;
      EXPECT_EQ(int(j) - 1, ready) << "bucket " << bucket - 1 << " starts late";
    }
    EXPECT_EQ(members, 6);
    if (cap == 1) {
      EXPECT_EQ(bucket, 6) << "a 1-byte cap gives every tensor its own bucket";
    }
    EXPECT_EQ(c.stats["all-reduce-gradients.buckets"], bucket);
  }
}

/// A bucket's operands are read while later steps compute, until its results are first read:
/// no step in between may write their bytes.
TEST(DataParallel, MemoryPlanKeepsBucketOperandsUntilTheJoin) {
  Compiled c = compileMlp(2, 1);
  const Plan& plan = c.emitted.plan;
  const PlanProgram& p = plan.programs[0];
  auto overlaps = [&](int a, int b) {
    const PlanTensor &x = plan.tensors[size_t(a)], &y = plan.tensors[size_t(b)];
    return x.storage == y.storage && x.offset < y.offset + y.bytes() &&
           y.offset < x.offset + x.bytes();
  };
  int checked = 0;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const PlanStep& ar = p.steps[i];
    if (ar.op != OpKind::AllReduce) continue;
    size_t join = i + 1;
    for (; join < p.steps.size(); ++join) {
      bool reads = false;
      for (int in : p.steps[join].inputs)
        for (int o : ar.outputs) reads |= in == o;
      if (reads) break;
    }
    for (size_t k = i + 1; k < join; ++k)
      for (int w : p.steps[k].outputs)
        for (int in : ar.inputs) {
          ++checked;
          EXPECT_FALSE(overlaps(w, in))
              << opName(p.steps[k].op) << " '" << p.steps[k].loc << "' overwrites "
              << plan.tensors[size_t(in)].name << " while bucket " << ar.attrs.getInt("bucket")
              << " reads it";
        }
  }
  EXPECT_GT(checked, 0);
}

TEST(DataParallel, PlanTextRoundTrips) {
  Compiled c = compileMlp(2, 100);
  std::string text = printPlan(c.emitted.plan);
  EXPECT_NE(text.find("AllReduce("), std::string::npos);
  auto back = parsePlan(text);
  ASSERT_TRUE(back.hasValue()) << back.status().toString();
  EXPECT_EQ(printPlan(*back), text);
}

/// What `steps` training steps on the CPU backend produced: the loss of each, and the named
/// tensors afterwards. The same batch is fed every step.
struct CpuRun {
  std::vector<float> losses;
  std::map<std::string, std::vector<float>> tensors;
};

void trainOnCpu(const Compiled& c, const std::vector<float>& x, const std::vector<int64_t>& labels,
                int steps, std::initializer_list<const char*> names, CpuRun& out) {
  const Plan& plan = c.emitted.plan;
  auto b = createCpuBackend();
  ASSERT_TRUE(b->load(plan, InitData{c.emitted.data, {}}).isOk());
  for (int step = 0; step < steps; ++step) {
    ASSERT_TRUE(b->write(plan.binding("input"), x.data()).isOk());
    ASSERT_TRUE(b->write(plan.binding("labels"), labels.data()).isOk());
    Status st = b->run("train");
    ASSERT_TRUE(st.isOk()) << st.toString();
    float loss = 0;
    ASSERT_TRUE(b->read(plan.binding("loss"), &loss).isOk());
    out.losses.push_back(loss);
  }
  for (const char* n : names) {
    int t = plan.findTensor(n);
    ASSERT_GE(t, 0) << n;
    std::vector<float> v(size_t(plan.tensors[size_t(t)].type.numElements()));
    ASSERT_TRUE(b->read(t, v.data()).isOk());
    out.tensors[n] = v;
  }
}

/// The CPU backend is one rank, where the mean over ranks is the identity: a plan for 2 ranks
/// must train exactly like the plan for 1.
TEST(DataParallel, OnOneRankTheTwoRankPlanTrainsLikeTheOneRankPlan) {
  Compiled one = compileMlp(1, 1 << 20), two = compileMlp(2, 100);
  std::vector<float> x(32);
  std::vector<int64_t> labels = {1, 7, 3, 0};
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 37 % 11) - 5) / 5.f;
  CpuRun runs[2];
  trainOnCpu(one, x, labels, 3, {"w1", "b1", "w2", "b2"}, runs[0]);
  trainOnCpu(two, x, labels, 3, {"w1", "b1", "w2", "b2"}, runs[1]);
  EXPECT_EQ(runs[0].losses, runs[1].losses);
  EXPECT_NE(runs[0].losses[0], runs[0].losses[2]) << "the test must train";
  for (const auto& [name, v] : runs[0].tensors) EXPECT_EQ(v, runs[1].tensors[name]) << name;
}

/// A small CNN with a training-mode BatchNorm (x[4,3,6,6] -> conv 4 -> BN -> relu -> pool -> 10).
Compiled compileBnNet(int64_t ranks, bool syncBn) {
  Graph g("bnnet");
  Value* x = *g.addGraphValue("x", TensorRole::Input, {DType::F32, {4, 3, 6, 6}});
  auto value = [&](const std::string& n, TensorRole role, Shape s, uint32_t seed, float fill = 0) {
    TensorType t{DType::F32, s};
    std::shared_ptr<TensorData> d = randomData(t, seed);
    if (seed == 0)
      for (int64_t i = 0; i < t.numElements(); ++i)
        reinterpret_cast<float*>(d->bytes.data())[i] = fill;
    return *g.addGraphValue(n, role, t, d);
  };
  Value* w = value("w", TensorRole::Param, {4, 3, 3, 3}, 5);
  Value *s = value("bn.scale", TensorRole::Param, {4}, 0, 1.f),
        *b = value("bn.bias", TensorRole::Param, {4}, 6);
  Value *rm = value("bn.mean", TensorRole::State, {4}, 0, 0.f),
        *rv = value("bn.var", TensorRole::State, {4}, 0, 1.f);
  Value* w2 = value("w2", TensorRole::Param, {10, 4}, 7);
  AttrMap conv;
  conv.setInts("strides", {1, 1});
  conv.setInts("pads", {1, 1, 1, 1});
  conv.setInts("dilations", {1, 1});
  conv.setInt("group", 1);
  Value* c = (*g.addNode(OpKind::Conv, {x, w}, conv, "conv"))->output(0);
  AttrMap bnA;
  bnA.setFloat("epsilon", 1e-5);
  Node* bn = *g.addNode(OpKind::BatchNormTrain, {c, s, b}, bnA, "bn");
  AttrMap up;
  up.setFloat("momentum", 0.9);
  up.setInt("unbiased", 1);
  up.setInt("count", 4 * 36);
  Node* u =
      *g.addNode(OpKind::BnRunningUpdate, {rm, rv, bn->output(1), bn->output(2)}, up, "bn/update");
  g.addCarry(rm, u->output(0));
  g.addCarry(rv, u->output(1));
  Value* r = (*g.addNode(OpKind::Relu, {bn->output(0)}, {}, "relu"))->output(0);
  Value* p = (*g.addNode(OpKind::GlobalAveragePool, {r}, {}, "pool"))->output(0);
  AttrMap flat;
  flat.setInts("shape", {4, 4});
  Value* f = (*g.addNode(OpKind::Reshape, {p}, flat, "flat"))->output(0);
  AttrMap gemm;
  gemm.setFloat("alpha", 1);
  gemm.setFloat("beta", 1);
  gemm.setInt("transA", 0);
  gemm.setInt("transB", 1);
  g.addOutput((*g.addNode(OpKind::Gemm, {f, w2}, gemm, "fc"))->output(0));
  PassContext ctx;
  ctx.train.lr = 0.1;
  ctx.train.momentum = 0.9;
  ctx.train.ranks = ranks;
  ctx.train.syncBn = syncBn;
  Status st = runPipeline(g, trainPipeline(), ctx);
  EXPECT_TRUE(st.isOk()) << st.toString();
  ProgramSource prog{"train", &g, {{"input", "x"}, {"labels", "labels"}, {"loss", "loss"}}};
  auto emitted = emitPlan({prog}, EmitOptions{});
  EXPECT_TRUE(emitted.hasValue()) << emitted.status().toString();
  return {std::move(*emitted), ctx.stats};
}

/// --sync-bn on one rank (every all-reduce the identity) is ordinary training-mode BatchNorm:
/// the decomposed statistics and their gradients (through BatchNorm's mean and var, ReduceMean
/// and AllReduce) must train like the fused BatchNormTrain / BatchNormBwd.
TEST(DataParallel, SyncBatchNormOnOneRankTrainsLikeBatchNorm) {
  Compiled plain = compileBnNet(1, false), sync = compileBnNet(2, true);
  EXPECT_EQ(sync.stats["sync-batch-norm.layers"], 1);
  int statCollectives = 0;
  for (const PlanStep& st : sync.emitted.plan.programs[0].steps)
    statCollectives += st.op == OpKind::AllReduce && !st.attrs.has("bucket");
  EXPECT_EQ(statCollectives, 4) << "mean and var forward, their gradients backward";
  std::vector<float> x(4 * 3 * 36);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 37 % 23) - 11) / 7.f;
  std::vector<int64_t> labels = {1, 7, 3, 0};
  CpuRun runs[2];
  for (int k = 0; k < 2; ++k)
    trainOnCpu(k ? sync : plain, x, labels, 4, {"w", "bn.scale", "bn.bias", "w2", "bn.mean"},
               runs[k]);
  EXPECT_NE(runs[0].losses[0], runs[0].losses[3]) << "the test must train";
  for (size_t i = 0; i < runs[0].losses.size(); ++i)
    EXPECT_NEAR(runs[1].losses[i], runs[0].losses[i], 1e-5) << i;
  for (const auto& [name, v] : runs[0].tensors)
    for (size_t i = 0; i < v.size(); ++i)
      EXPECT_NEAR(runs[1].tensors[name][i], v[i], 2e-5 * (1 + std::fabs(v[i])))
          << name << "[" << i << "]";
}

TEST(DataParallel, CollectivesRunOnTheirOwnStream) {
  Compiled c = compileMlp(2, 100);
  const Plan& plan = c.emitted.plan;
  const PlanProgram& p = plan.programs[0];
  Target t = *findTarget("h200");
  ProgramCost cost = programCost(t, plan, p, Precision::TF32);
  for (int maxStreams : {1, 4}) {
    StreamSchedule s = scheduleStreams(t, plan, p, cost, maxStreams);
    ASSERT_GE(s.commStream, 0);
    EXPECT_LE(s.streams, maxStreams + 1);
    for (size_t i = 0; i < p.steps.size(); ++i)
      EXPECT_EQ(s.stream[i] == s.commStream, p.steps[i].op == OpKind::AllReduce) << i;
    // Every dependency, also between a bucket and its producers or readers, is kept by stream
    // order and events: step i is reachable from each step it depends on.
    size_t n = p.steps.size();
    std::vector<std::vector<int>> next(n);
    std::map<int, int> last;
    for (size_t i = 0; i < n; ++i) {
      auto it = last.find(s.stream[i]);
      if (it != last.end()) next[size_t(it->second)].push_back(int(i));
      last[s.stream[i]] = int(i);
    }
    for (const auto& e : s.events) next[size_t(e.from)].push_back(e.to);
    for (size_t i = 0; i < n; ++i)
      for (int d : s.dependencies[i]) {
        std::vector<bool> seen(n);
        std::vector<int> todo = {d};
        while (!todo.empty()) {
          int k = todo.back();
          todo.pop_back();
          if (seen[size_t(k)]) continue;
          seen[size_t(k)] = true;
          for (int m : next[size_t(k)]) todo.push_back(m);
        }
        EXPECT_TRUE(seen[i]) << "step " << i << " may run before step " << d;
      }
  }
}

/// hgpc compile writes the schedule into the plan: the collectives get a stream of their own also
/// with one compute stream, and the stream count stays within the plan's limit.
TEST(DataParallel, CompiledPlansPutCollectivesOnTheirOwnStream) {
  Target t = *findTarget("h200");
  for (int maxStreams : {1, 4, kMaxPlanStreams}) {
    Compiled c = compileMlp(2, 100);
    assignStreams(c.emitted.plan, t, Precision::TF32, maxStreams, {}, nullptr);
    ASSERT_TRUE(c.emitted.plan.validate().isOk()) << maxStreams;
    std::set<int> comm, compute;
    for (const PlanStep& s : c.emitted.plan.programs[0].steps)
      (s.op == OpKind::AllReduce ? comm : compute).insert(s.stream);
    EXPECT_EQ(comm.size(), 1u) << maxStreams;
    for (int st : comm) EXPECT_EQ(compute.count(st), 0u) << maxStreams;
    if (maxStreams == 1) {
      EXPECT_EQ(compute, std::set<int>{0});
    }
  }
}

TEST(DataParallel, RingAllReduceTimeFromLinkBandwidth) {
  Target t = *findTarget("h200");
  EXPECT_DOUBLE_EQ(t.linkBandwidth, 450e9);
  CostCalibration cal;
  EXPECT_DOUBLE_EQ(cal.linkEfficiency, 0.28) << "fitted on 2 H200s; refit before changing";
  // 2 ranks: 2 hops of latency, and each GPU sends and receives half the bytes twice.
  double bytes = 100e6;
  EXPECT_NEAR(allReduceSeconds(t, bytes, 2, cal), 2 * 3e-6 + bytes / (450e9 * 0.28), 1e-12);
  // 8 ranks: 14 hops, 2 * 7/8 of the bytes.
  EXPECT_NEAR(allReduceSeconds(t, bytes, 8, cal), 14 * 3e-6 + 1.75 * bytes / (450e9 * 0.28), 1e-12);
  EXPECT_EQ(allReduceSeconds(t, bytes, 1, cal), 0);
  // A PCIe part is far slower than NVLink for the same bucket.
  EXPECT_GT(allReduceSeconds(*findTarget("l4"), bytes, 2, cal),
            10 * allReduceSeconds(t, bytes, 2, cal));

  Compiled c = compileMlp(2, int64_t(1) << 30);
  const Plan& plan = c.emitted.plan;
  for (const PlanStep& s : plan.programs[0].steps) {
    if (s.op != OpKind::AllReduce) continue;
    StepCost sc = stepCost(t, plan, s, Precision::TF32, cal);
    EXPECT_NEAR(sc.seconds,
                t.launchSeconds + allReduceSeconds(t, double(s.attrs.getInt("bytes")), 2, cal),
                1e-15);
  }
}

} // namespace
} // namespace hgp
