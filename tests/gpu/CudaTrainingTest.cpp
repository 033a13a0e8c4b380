// GPU tests of the stateful ops and of whole training steps: optimizer updates (SGD with
// momentum, Nesterov and weight decay; Adam; AdamW) in one multi-tensor launch, skipped steps
// (ok = 0), learning-rate schedules, the metrics ring, CheckFinite, counters and BN running
// statistics, each against the CPU reference over several runs in eager and graph mode; a small
// CNN trained for a few steps through the real training pipeline; and determinism: two
// deterministic backends, graph replay against eager execution, and the plan scheduled over
// several streams against the same plan on one stream, agree bit for bit.
//
// Tolerances: the optimizer and control executors repeat the CPU's float operations in its order,
// so they compare bit for bit, except Adam, whose bias correction uses the device's pow (1e-6).
// The training steps compare to 1e-4: they run cuDNN convolutions (fp32, no TF32), whose
// summation order differs from the CPU's, for several steps.
#include "compiler/schedule/AssignStreams.h"
#include "passes/Pipeline.h"
#include "tests/gpu/GpuTestUtil.h"

namespace hgp::gputest {
namespace {

AttrMap attrs(std::initializer_list<std::pair<const char*, AttrValue>> kv) {
  AttrMap a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

TensorType f32(Shape s) {
  return {DType::F32, std::move(s)};
}
const TensorType kI64Scalar{DType::I64, {}};
const TensorType kF32Scalar{DType::F32, {}};

std::vector<uint8_t> scalarBytes(float v) {
  std::vector<uint8_t> b(4);
  std::memcpy(b.data(), &v, 4);
  return b;
}

/// lr = 0.1 + 0.01 * run; ok = 0 on run 2 (a skipped step); other inputs random.
Feeder stepFeed() {
  return [](const PlanTensor& t, int run) {
    if (t.name == "lr") return scalarBytes(0.1f + 0.01f * float(run));
    if (t.name == "ok") return scalarBytes(run == 2 ? 0.f : 1.f);
    return defaultFeed(t, run);
  };
}

RunSpec statefulSpec(double tol) {
  RunSpec s;
  s.runs = 6;
  s.tol = tol;
  s.fed = [](const PlanTensor& t) { return t.role == TensorRole::Input; };
  s.feed = stepFeed();
  return s;
}

/// One optimizer step per parameter shape, all in one group, then the step counter. With
/// inPlace false the results are graph outputs with storage of their own instead of carries.
void checkOptimizer(const std::string& what, OpKind op, AttrMap a, int buffers, double tol,
                    bool inPlace = true) {
  SCOPED_TRACE(what);
  Graph g(what);
  Value* lr = addValue(g, "lr", TensorRole::Input, kF32Scalar);
  Value* ok = addValue(g, "ok", TensorRole::Input, kF32Scalar);
  Value* step = addValue(g, "opt_step", TensorRole::State, kI64Scalar);
  std::vector<Value*> outs;
  int k = 0;
  for (Shape s : {Shape{37}, Shape{16, 33}, Shape{20000}, Shape{3}}) {
    std::string n = "w" + std::to_string(k++);
    Value* p = addValue(g, n, TensorRole::Param, f32(s));
    Value* grad = addValue(g, n + ".grad", TensorRole::Input, f32(s));
    std::vector<Value*> ins = {p, grad, lr, ok, step};
    for (int b = 0; b < buffers; ++b)
      ins.push_back(addValue(g, n + ".buf" + std::to_string(b), TensorRole::State, f32(s)));
    Node* u = addNode(g, op, ins, a);
    ASSERT_NE(u, nullptr);
    if (!inPlace) {
      for (int o = 0; o <= buffers; ++o) outs.push_back(u->output(size_t(o)));
      continue;
    }
    g.addCarry(p, u->output(0));
    for (int b = 0; b < buffers; ++b) g.addCarry(ins[size_t(5 + b)], u->output(size_t(1 + b)));
  }
  Node* inc = addNode(g, OpKind::CounterIncrement, {step, ok});
  if (inPlace)
    g.addCarry(step, inc->output(0));
  else
    outs.push_back(inc->output(0));
  auto e = emit(g, bindOutputs(g, outs));
  ASSERT_TRUE(e.has_value());
  runAndCompare(*e, statefulSpec(tol));
}

TEST(CudaTraining, SgdMomentumNesterovWeightDecay) {
  HGP_REQUIRE_CUDA();
  checkOptimizer("sgd-nesterov", OpKind::SgdUpdate,
                 attrs({{"momentum", 0.9},
                        {"dampening", 0.0},
                        {"nesterov", int64_t(1)},
                        {"weight_decay", 1e-2}}),
                 1, 0);
  checkOptimizer(
      "sgd-dampening", OpKind::SgdUpdate,
      attrs(
          {{"momentum", 0.8}, {"dampening", 0.3}, {"nesterov", int64_t(0)}, {"weight_decay", 0.0}}),
      1, 0);
  checkOptimizer("sgd-plain", OpKind::SgdUpdate,
                 attrs({{"momentum", 0.0},
                        {"dampening", 0.0},
                        {"nesterov", int64_t(0)},
                        {"weight_decay", 1e-3}}),
                 0, 0);
}

TEST(CudaTraining, AdamAndAdamW) {
  HGP_REQUIRE_CUDA();
  for (int64_t decoupled : {0, 1})
    checkOptimizer(decoupled ? "adamw" : "adam", OpKind::AdamUpdate,
                   attrs({{"beta1", 0.9},
                          {"beta2", 0.999},
                          {"eps", 1e-8},
                          {"weight_decay", 1e-2},
                          {"decoupled", decoupled}}),
                   2, 1e-6);
}

TEST(CudaTraining, UpdatesIntoResultsOfTheirOwn) {
  HGP_REQUIRE_CUDA();
  checkOptimizer("sgd-out-of-place", OpKind::SgdUpdate,
                 attrs({{"momentum", 0.9},
                        {"dampening", 0.0},
                        {"nesterov", int64_t(1)},
                        {"weight_decay", 1e-2}}),
                 1, 0, /*inPlace=*/false);
  checkOptimizer("adam-out-of-place", OpKind::AdamUpdate,
                 attrs({{"beta1", 0.9},
                        {"beta2", 0.999},
                        {"eps", 1e-8},
                        {"weight_decay", 0.0},
                        {"decoupled", int64_t(0)}}),
                 2, 1e-6, /*inPlace=*/false);
  Graph g("stats-out-of-place");
  TensorType c = f32({5});
  Value* ok = addValue(g, "ok", TensorRole::Input, kF32Scalar);
  Value* rm = addValue(g, "running_mean", TensorRole::State, c);
  Value* rv = addValue(g, "running_var", TensorRole::State, c, filled(c, 1.f));
  Node* upd = addNode(g, OpKind::BnRunningUpdate,
                      {rm, rv, addValue(g, "bm", TensorRole::Input, c),
                       addValue(g, "bv", TensorRole::Input, c), ok},
                      attrs({{"momentum", 0.9}}));
  Value* iter = addValue(g, "iter", TensorRole::State, kI64Scalar, scalarI64(5));
  Value* ring = addValue(g, "metrics", TensorRole::State, f32({4, 4}));
  Value* m = addValue(g, "m", TensorRole::Input, kF32Scalar);
  std::vector<Value*> outs = {upd->output(0), upd->output(1),
                              op1(g, OpKind::CounterIncrement, {iter, ok}),
                              op1(g, OpKind::MetricsLog, {ring, iter, m, m, ok, m})};
  auto e = emit(g, bindOutputs(g, outs));
  ASSERT_TRUE(e.has_value());
  runAndCompare(*e, statefulSpec(0));
}

TEST(CudaTraining, LrSchedules) {
  HGP_REQUIRE_CUDA();
  Graph g("schedules");
  Value* iter = addValue(g, "iter", TensorRole::State, kI64Scalar);
  std::vector<AttrMap> kinds = {attrs({{"base_lr", 0.1}, {"kind", std::string("constant")}}),
                                attrs({{"base_lr", 0.1},
                                       {"kind", std::string("step")},
                                       {"step_size", int64_t(2)},
                                       {"gamma", 0.5}}),
                                attrs({{"base_lr", 0.1},
                                       {"kind", std::string("multistep")},
                                       {"milestones", std::vector<int64_t>{1, 3}},
                                       {"gamma", 0.1}}),
                                attrs({{"base_lr", 0.1},
                                       {"kind", std::string("cosine")},
                                       {"t_max", int64_t(4)},
                                       {"eta_min", 1e-3}}),
                                attrs({{"base_lr", 0.1},
                                       {"kind", std::string("cosine")},
                                       {"t_max", int64_t(5)},
                                       {"eta_min", 0.0},
                                       {"warmup_steps", int64_t(3)},
                                       {"warmup_factor", 0.25}})};
  std::vector<Value*> outs;
  for (const AttrMap& a : kinds) outs.push_back(op1(g, OpKind::LrSchedule, {iter}, a));
  Node* inc = addNode(g, OpKind::CounterIncrement, {iter});
  g.addCarry(iter, inc->output(0));
  auto e = emit(g, bindOutputs(g, outs));
  ASSERT_TRUE(e.has_value());
  RunSpec spec = statefulSpec(0);
  spec.runs = 8;
  runAndCompare(*e, spec);
}

TEST(CudaTraining, MetricsRingWrapsAround) {
  HGP_REQUIRE_CUDA();
  Graph g("metrics");
  Value* ring = addValue(g, "metrics", TensorRole::State, f32({3, 4}));
  Value* iter = addValue(g, "iter", TensorRole::State, kI64Scalar);
  std::vector<Value*> m;
  for (const char* n : {"loss", "correct", "ok", "lr"})
    m.push_back(addValue(g, n, TensorRole::Input, kF32Scalar));
  Node* log = addNode(g, OpKind::MetricsLog, {ring, iter, m[0], m[1], m[2], m[3]});
  g.addCarry(ring, log->output(0));
  Node* inc = addNode(g, OpKind::CounterIncrement, {iter});
  g.addCarry(iter, inc->output(0));
  auto e = emit(g, {});
  ASSERT_TRUE(e.has_value());
  RunSpec spec = statefulSpec(0);
  spec.runs = 7;
  runAndCompare(*e, spec);
}

TEST(CudaTraining, CheckFiniteCountersAndRunningStatistics) {
  HGP_REQUIRE_CUDA();
  Graph g("control");
  std::vector<Value*> xs = {addValue(g, "x0", TensorRole::Input, f32({5})),
                            addValue(g, "x1", TensorRole::Input, f32({70001})),
                            addValue(g, "x2", TensorRole::Input, f32({3, 3}))};
  Value* checked = op1(g, OpKind::CheckFinite, xs);
  Value* ok = addValue(g, "ok", TensorRole::Input, kF32Scalar);
  Value* gated = addValue(g, "gated", TensorRole::State, kI64Scalar, scalarI64(41));
  Value* plain = addValue(g, "plain", TensorRole::State, kI64Scalar, scalarI64(-2));
  Node* inc1 = addNode(g, OpKind::CounterIncrement, {gated, ok});
  Node* inc2 = addNode(g, OpKind::CounterIncrement, {plain});
  g.addCarry(gated, inc1->output(0));
  g.addCarry(plain, inc2->output(0));
  TensorType c = f32({6});
  Value* rm = addValue(g, "running_mean", TensorRole::State, c);
  Value* rv = addValue(g, "running_var", TensorRole::State, c, filled(c, 1.f));
  Value* bm = addValue(g, "batch_mean", TensorRole::Input, c);
  Value* bv = addValue(g, "batch_var", TensorRole::Input, c);
  Node* upd = addNode(g, OpKind::BnRunningUpdate, {rm, rv, bm, bv, ok},
                      attrs({{"momentum", 0.9}, {"unbiased", int64_t(1)}, {"count", int64_t(10)}}));
  g.addCarry(rm, upd->output(0));
  g.addCarry(rv, upd->output(1));
  Value* rm2 = addValue(g, "running_mean2", TensorRole::State, c);
  Value* rv2 = addValue(g, "running_var2", TensorRole::State, c, filled(c, 1.f));
  Node* upd2 = addNode(g, OpKind::BnRunningUpdate, {rm2, rv2, bm, bv}, attrs({{"momentum", 0.7}}));
  g.addCarry(rm2, upd2->output(0));
  g.addCarry(rv2, upd2->output(1));
  auto e = emit(g, bindOutputs(g, {checked}));
  ASSERT_TRUE(e.has_value());
  RunSpec spec = statefulSpec(0);
  Feeder base = spec.feed;
  // Runs 1, 3 and 4 put an infinity, a NaN and a negative infinity somewhere.
  spec.feed = [base](const PlanTensor& t, int run) {
    std::vector<uint8_t> b = base(t, run);
    auto poke = [&](const char* name, int64_t i, float v) {
      if (t.name == name) std::memcpy(b.data() + 4 * i, &v, 4);
    };
    if (run == 1) poke("x1", 70000, INFINITY);
    if (run == 3) poke("x0", 2, NAN);
    if (run == 4) poke("x2", 0, -INFINITY);
    return b;
  };
  runAndCompare(*e, spec);
}

// ---- Whole training steps ------------------------------------------------------------------

/// A small CNN: conv-BN-ReLU-maxpool, conv-BN-ReLU, conv+bias-ReLU-dropout, global pool, Gemm,
/// 10 classes.
std::unique_ptr<Graph> smallCnn(int64_t batch) {
  auto g = std::make_unique<Graph>("cnn");
  Value* x = addValue(*g, "input", TensorRole::Input, f32({batch, 3, 12, 12}));
  auto conv = [&](Value* in, int64_t cin, int64_t cout, bool bias, const std::string& n) {
    std::vector<Value*> ins = {in,
                               addValue(*g, n + ".w", TensorRole::Param, f32({cout, cin, 3, 3}))};
    if (bias) ins.push_back(addValue(*g, n + ".b", TensorRole::Param, f32({cout})));
    return op1(*g, OpKind::Conv, ins,
               attrs({{"strides", std::vector<int64_t>{1, 1}},
                      {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                      {"dilations", std::vector<int64_t>{1, 1}},
                      {"group", int64_t(1)}}));
  };
  auto bn = [&](Value* in, const std::string& n) {
    int64_t c = in->shape()[1];
    TensorType t = f32({c});
    Value* scale = addValue(*g, n + ".scale", TensorRole::Param, t, filled(t, 1.f));
    Value* bias = addValue(*g, n + ".bias", TensorRole::Param, t, filled(t, 0.f));
    Node* b = addNode(*g, OpKind::BatchNormTrain, {in, scale, bias}, attrs({{"epsilon", 1e-5}}));
    Value* rm = addValue(*g, n + ".running_mean", TensorRole::State, t);
    Value* rv = addValue(*g, n + ".running_var", TensorRole::State, t, filled(t, 1.f));
    Node* u = addNode(*g, OpKind::BnRunningUpdate, {rm, rv, b->output(1), b->output(2)},
                      attrs({{"momentum", 0.9},
                             {"unbiased", int64_t(1)},
                             {"count", in->type().numElements() / c}}));
    g->addCarry(rm, u->output(0));
    g->addCarry(rv, u->output(1));
    return op1(*g, OpKind::Relu, {b->output(0)});
  };
  // A bias right before BN would get a gradient of pure rounding noise, which Adam amplifies;
  // so conv1 has none and conv3 (no BN) has one.
  Value* h = bn(conv(x, 3, 8, false, "conv1"), "bn1");
  h = op1(*g, OpKind::MaxPool, {h},
          attrs({{"kernel_shape", std::vector<int64_t>{2, 2}},
                 {"strides", std::vector<int64_t>{2, 2}},
                 {"pads", std::vector<int64_t>{0, 0, 0, 0}},
                 {"ceil_mode", int64_t(0)}}));
  h = bn(conv(h, 8, 12, false, "conv2"), "bn2");
  h = op1(*g, OpKind::Relu, {conv(h, 12, 12, true, "conv3")});
  h = op1(*g, OpKind::Dropout, {h}, attrs({{"ratio", 0.25}, {"key", int64_t(1)}}));
  h = op1(*g, OpKind::GlobalAveragePool, {h});
  h = op1(*g, OpKind::Reshape, {h}, attrs({{"shape", std::vector<int64_t>{batch, 12}}}));
  Value* logits =
      op1(*g, OpKind::Gemm,
          {h, addValue(*g, "fc.w", TensorRole::Param, f32({10, 12})),
           addValue(*g, "fc.b", TensorRole::Param, f32({10}))},
          attrs({{"transA", int64_t(0)}, {"transB", int64_t(1)}, {"alpha", 1.0}, {"beta", 1.0}}));
  g->addOutput(logits);
  return g;
}

std::optional<EmittedPlan> trainingPlan(TrainOptions o, int64_t batch) {
  std::unique_ptr<Graph> g = smallCnn(batch);
  PassContext ctx;
  ctx.train = o;
  Status st = runPipeline(*g, trainPipeline(), ctx);
  EXPECT_TRUE(st.isOk()) << st.toString();
  if (!st.isOk()) return std::nullopt;
  return emit(*g, {{"input", "input"},
                   {"labels", "labels"},
                   {"loss", "loss"},
                   {"metrics", "metrics"},
                   {"iter", "iter"},
                   {"opt_step", "opt_step"}});
}

Feeder trainingFeed() {
  return [](const PlanTensor& t, int run) {
    if (t.name == "labels") return indexBytes(t.type, hashName(t.name, uint64_t(run)), 10);
    return defaultFeed(t, run);
  };
}

RunSpec trainingSpec() {
  RunSpec s;
  s.tol = 1e-4;
  s.fed = [](const PlanTensor& t) { return t.role == TensorRole::Input; };
  s.feed = trainingFeed();
  return s;
}

TrainOptions sgdOptions() {
  TrainOptions o;
  o.optimizer = "sgd";
  o.lr = 0.1;
  o.momentum = 0.9;
  o.nesterov = true;
  o.weightDecay = 5e-4;
  o.schedule = "cosine";
  o.tMax = 10;
  o.etaMin = 1e-3;
  o.warmupSteps = 2;
  o.labelSmoothing = 0.1;
  o.seed = 5;
  o.metricsRing = 4;
  return o;
}

TEST(CudaTraining, SmallCnnStepsMatchTheCpu) {
  HGP_REQUIRE_CUDA();
  for (const char* opt : {"sgd", "adam", "adamw"})
    for (int64_t batch : {8, 1}) {
      SCOPED_TRACE(std::string(opt) + " batch " + std::to_string(batch));
      TrainOptions o = sgdOptions();
      o.optimizer = opt;
      if (o.optimizer != "sgd") o.lr = 1e-3, o.weightDecay = -1;
      if (batch == 1) o.loss = "mse";
      auto e = trainingPlan(o, batch);
      ASSERT_TRUE(e.has_value());
      runAndCompare(*e, trainingSpec());
    }
}

TEST(CudaTraining, DeterministicRunsAreBitIdentical) {
  HGP_REQUIRE_CUDA();
  auto e = trainingPlan(sgdOptions(), 8);
  ASSERT_TRUE(e.has_value());
  RunSpec spec = trainingSpec();
  BackendOptions det;
  det.deterministic = true;
  expectBitIdentical(*e, det, det, spec);
}

TEST(CudaTraining, GraphReplayIsBitIdenticalToEager) {
  HGP_REQUIRE_CUDA();
  auto e = trainingPlan(sgdOptions(), 8);
  ASSERT_TRUE(e.has_value());
  RunSpec spec = trainingSpec();
  BackendOptions eager, graph;
  eager.deterministic = graph.deterministic = true;
  eager.eager = true;
  expectBitIdentical(*e, eager, graph, spec);
}

/// The small CNN's plan scheduled over up to four streams. The executors and algorithms are the
/// one-stream plan's, so in deterministic mode every tensor must come out bit for bit the same:
/// only the order of independent work changes, and a missing dependency would show as a race.
TEST(CudaTraining, MultiStreamPlanIsBitIdenticalToOneStream) {
  HGP_REQUIRE_CUDA();
  for (int64_t batch : {8, 64}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    auto one = trainingPlan(sgdOptions(), batch);
    ASSERT_TRUE(one.has_value());
    EmittedPlan many = *one;
    auto target = findTarget("h200");
    ASSERT_TRUE(target.hasValue());
    StreamAssignment a = assignStreams(many.plan, *target, Precision::FP32, 4);
    ASSERT_GT(a.maxStreamsUsed, 1) << "the schedule did not spread the step";
    ASSERT_GT(a.events, 0u);
    ASSERT_TRUE(many.plan.validate().isOk());
    RunSpec spec = trainingSpec();
    spec.runs = 6;
    BackendOptions graph, eager;
    graph.deterministic = eager.deterministic = true;
    eager.eager = true;
    expectBitIdentical(one.value(), many, graph, graph, spec);
    expectBitIdentical(one.value(), many, graph, eager, spec);
  }
}

} // namespace
} // namespace hgp::gputest
