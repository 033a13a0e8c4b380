// MixedPrecisionTest.cpp - --precision bf16|fp16: the 16-bit conversions, Cast, the
// mixed-precision pass (golden printed IR of a small net) and bf16 training of LeNet-5 on the
// CPU backend against fp32 (docs/precision.md gives the tolerances).
#include "tools/hgpc/Compile.h"
#include "ir/Printer.h"
#include "compiler/plan/PlanEmitter.h"
#include "passes/Pass.h"
#include "passes/Pipeline.h"
#include "runtime/Backend.h"
#include "runtime/plan/Half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>

namespace hgp {
namespace {

// ---- Conversions ---------------------------------------------------------------------------

TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(floatToBf16(1.0f + 1.0f / 256), 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6.
  EXPECT_EQ(floatToBf16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_EQ(floatToBf16(1.0f + 1.0f / 256 + 1.0f / 65536), 0x3f81); // above the tie
  EXPECT_EQ(bf16ToFloat(floatToBf16(-2.5f)), -2.5f);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(std::nanf("")))));
  EXPECT_TRUE(std::isinf(bf16ToFloat(floatToBf16(3.4e38f)))); // rounds past the largest bf16
}

TEST(Half, F16RoundsToNearestEvenWithSubnormalsAndOverflow) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);              // the tie rounds to even: infinity
  EXPECT_EQ(floatToHalf(1.0f + 1.0f / 2048), 0x3c00);    // tie -> even
  EXPECT_EQ(floatToHalf(1.0f + 3.0f / 2048), 0x3c02);    // tie -> even
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001); // smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000); // tie -> even (zero)
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)), 0x0002); // tie -> even
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(halfToFloat(0xfbff), -65504.0f);
  EXPECT_TRUE(std::isinf(halfToFloat(0x7c00)));
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(std::nanf("")))));
  // Every finite half survives the round trip through float.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;
    ASSERT_EQ(floatToHalf(halfToFloat(uint16_t(h))), h) << h;
  }
}

/// Cast chains on the CPU backend round exactly as Half.h does: f32 -> bf16 -> f16 -> f32, and a
/// bf16 Relu (the backend's widen, compute, round path) in between.
TEST(Half, CastsOnTheCpuBackendRoundToNearestEven) {
  Graph g("casts");
  const int64_t n = 7;
  Value* x = *g.addGraphValue("x", TensorRole::Input, {DType::F32, {n}});
  auto cast = [&](Value* v, const char* to) {
    AttrMap a;
    a.setString("to", to);
    return (*g.addNode(OpKind::Cast, {v}, a, std::string("to_") + to))->output(0);
  };
  Value* b = cast(x, "bf16");
  Value* r = (*g.addNode(OpKind::Relu, {b}, {}, "relu"))->output(0);
  Value* y = cast(cast(r, "f16"), "f32");
  g.addOutput(y);
  auto e = emitPlan({ProgramSource{"step", &g, {{"x", "x"}, {"y", y->name()}}}}, EmitOptions{});
  ASSERT_TRUE(e.hasValue()) << e.status().toString();
  auto be = createCpuBackend();
  ASSERT_TRUE(be->load(e->plan, InitData{e->data, {}}).isOk());
  std::vector<float> in = {1.0f + 1.0f / 256,     1.0f + 3.0f / 256, -2.5f, 70000.f, 1e-9f,
                           std::ldexp(1.0f, -20), 3.14159f};
  ASSERT_TRUE(be->write(e->plan.binding("x"), in.data()).isOk());
  ASSERT_TRUE(be->run("step").isOk());
  std::vector<float> out(n);
  ASSERT_TRUE(be->read(e->plan.binding("y"), out.data()).isOk());
  for (int64_t i = 0; i < n; ++i) {
    float want = halfToFloat(floatToHalf(std::max(0.f, bf16ToFloat(floatToBf16(in[size_t(i)])))));
    EXPECT_EQ(out[size_t(i)], want) << i;
  }
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 1.0f + 4.0f / 256);
  EXPECT_EQ(out[2], 0.f);
  EXPECT_TRUE(std::isinf(out[3])) << "70000 is a bf16 but overflows f16";
  EXPECT_EQ(out[4], 0.f) << "1e-9 underflows f16";
}

// ---- The pass on a small net ---------------------------------------------------------------

std::shared_ptr<TensorData> randomData(const TensorType& t, uint32_t seed, float lo = -0.5f,
                                       float hi = 0.5f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  auto d = std::make_shared<TensorData>();
  d->type = t;
  d->bytes.resize(size_t(t.bytes()));
  float* f = reinterpret_cast<float*>(d->bytes.data());
  for (int64_t i = 0; i < t.numElements(); ++i) f[i] = u(rng);
  return d;
}

/// x[4,3,6,6] -> Conv(4, 3x3) -> BatchNormTrain -> Relu -> MaxPool 2 -> Reshape -> Gemm 10.
std::unique_ptr<Graph> smallNet() {
  auto g = std::make_unique<Graph>("small");
  Value* x = *g->addGraphValue("x", TensorRole::Input, {DType::F32, {4, 3, 6, 6}});
  auto param = [&](const std::string& n, Shape s, uint32_t seed, float lo = -0.5f,
                   float hi = 0.5f) {
    TensorType t{DType::F32, s};
    return *g->addGraphValue(n, TensorRole::Param, t, randomData(t, seed, lo, hi));
  };
  Value *w = param("w", {4, 3, 3, 3}, 1), *b = param("b", {4}, 2);
  Value *gamma = param("gamma", {4}, 3, 0.5f, 1.5f), *beta = param("beta", {4}, 4);
  Value* fb = param("fb", {10}, 6);
  AttrMap conv;
  conv.setInts("dilations", {1, 1});
  conv.setInt("group", 1);
  conv.setInts("pads", {1, 1, 1, 1});
  conv.setInts("strides", {1, 1});
  Value* c = (*g->addNode(OpKind::Conv, {x, w, b}, conv, "conv"))->output(0);
  AttrMap bn;
  bn.setFloat("epsilon", 1e-5);
  Value* y = (*g->addNode(OpKind::BatchNormTrain, {c, gamma, beta}, bn, "bn", 3))->output(0);
  Value* r = (*g->addNode(OpKind::Relu, {y}, {}, "relu"))->output(0);
  AttrMap pool;
  pool.setInts("kernel_shape", {2, 2});
  pool.setInts("strides", {2, 2});
  pool.setInts("pads", {0, 0, 0, 0});
  pool.setInts("dilations", {1, 1});
  pool.setInt("ceil_mode", 0);
  Value* p = (*g->addNode(OpKind::MaxPool, {r}, pool, "pool"))->output(0);
  AttrMap rs;
  rs.setInts("shape", {4, 36});
  AttrMap gemm;
  gemm.setFloat("alpha", 1);
  gemm.setFloat("beta", 1);
  gemm.setInt("transA", 0);
  gemm.setInt("transB", 1);
  // 4 channels x 3 x 3 = 36 features.
  Value* fw36 = param("fw36", {10, 36}, 5);
  Value* f = (*g->addNode(OpKind::Reshape, {p}, rs, "flatten"))->output(0);
  Value* logits = (*g->addNode(OpKind::Gemm, {f, fw36, fb}, gemm, "fc"))->output(0);
  g->addOutput(logits);
  return g;
}

TEST(MixedPrecision, GoldenForwardIrInBf16) {
  auto g = smallNet();
  PassContext ctx;
  ctx.precision = Precision::BF16;
  Status st = runPipeline(*g, {"canonicalize", "add-loss", "mixed-precision"}, ctx);
  ASSERT_TRUE(st.isOk()) << st.toString();
  std::string ir = printGraph(*g);
  // One Cast per value: the input and the conv and fc weights and biases go down; BN's scale and
  // bias stay f32; the logits go up for the loss and the accuracy count, and the f32 copy keeps
  // the output's name (%t7).
  const char* golden = R"(graph "small" {
  input %x: f32[4,3,6,6]
  param %w: f32[4,3,3,3]
  param %b: f32[4]
  param %gamma: f32[4]
  param %beta: f32[4]
  param %fb: f32[10]
  param %fw36: f32[10,36]
  input %labels: i64[4]
  %x.bf16: act bf16[4,3,6,6] = Cast(%x) {to="bf16"} loc("cast/x.bf16")
  %w.bf16: act bf16[4,3,3,3] = Cast(%w) {to="bf16"} loc("cast/w.bf16")
  %b.bf16: act bf16[4] = Cast(%b) {to="bf16"} loc("cast/b.bf16")
  %t0: act bf16[4,4,6,6] = Conv(%x.bf16, %w.bf16, %b.bf16) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[1,1]} loc("conv")
  %t1: act bf16[4,4,6,6], %t2: act f32[4], %t3: act f32[4] = BatchNormTrain(%t0, %gamma, %beta) {epsilon=1e-05} loc("bn")
  %t4: act bf16[4,4,6,6] = Relu(%t1) loc("relu")
  %t5: act bf16[4,4,3,3] = MaxPool(%t4) {ceil_mode=0, dilations=[1,1], kernel_shape=[2,2], pads=[0,0,0,0], strides=[2,2]} loc("pool")
  %t6: act bf16[4,36] = Reshape(%t5) {shape=[4,36]} loc("flatten")
  %fw36.bf16: act bf16[10,36] = Cast(%fw36) {to="bf16"} loc("cast/fw36.bf16")
  %fb.bf16: act bf16[10] = Cast(%fb) {to="bf16"} loc("cast/fb.bf16")
  %t7.bf16: act bf16[4,10] = Gemm(%t6, %fw36.bf16, %fb.bf16) {alpha=1.0, beta=1.0, transA=0, transB=1} loc("fc")
  %t7: act f32[4,10] = Cast(%t7.bf16) {to="f32"} loc("cast/t7")
  %loss: act f32[] = SoftmaxCrossEntropy(%t7, %labels) {label_smoothing=0.0} loc("loss")
  %correct: act f32[] = CountCorrect(%t7, %labels) loc("metrics/correct")
  output %loss
  output %correct
}
)";
  EXPECT_EQ(ir, golden);
  auto back = parseGraph(ir);
  ASSERT_TRUE(back.hasValue()) << back.status().toString();
  EXPECT_EQ(printGraph(**back), ir);
  EXPECT_EQ(ctx.stats["mixed-precision.casts"], 6) << ir;
  // The dtypes of every node's results.
  std::map<std::string, std::string> types;
  for (const Node* n : g->nodes())
    for (const Value* o : n->outputs()) types[o->name()] = typeToString(o->type());
  for (const Node* n : g->nodes()) {
    if (n->op() == OpKind::Conv || n->op() == OpKind::Relu || n->op() == OpKind::MaxPool ||
        n->op() == OpKind::Gemm || n->op() == OpKind::Reshape)
      EXPECT_EQ(n->output(0)->dtype(), DType::BF16) << n->describe();
    if (n->op() == OpKind::BatchNormTrain) {
      EXPECT_EQ(n->output(0)->dtype(), DType::BF16);
      EXPECT_EQ(n->output(1)->dtype(), DType::F32);
      EXPECT_EQ(n->output(2)->dtype(), DType::F32);
    }
    if (n->op() == OpKind::SoftmaxCrossEntropy || n->op() == OpKind::CountCorrect)
      EXPECT_EQ(n->input(0)->dtype(), DType::F32) << n->describe();
  }
  // The float32 logits keep the model output's name; the bf16 ones are renamed.
  Value* logits = g->findValue(g->nodes().back()->input(0)->name());
  ASSERT_NE(logits, nullptr);
  EXPECT_EQ(logits->dtype(), DType::F32);
  EXPECT_EQ(logits->producer()->op(), OpKind::Cast);
}

TEST(MixedPrecision, WholeTrainStepKeepsMastersAndGradientsF32) {
  auto g = smallNet();
  PassContext ctx;
  ctx.precision = Precision::BF16;
  ctx.train.momentum = 0.9;
  std::vector<std::string> pipeline = trainPipeline();
  pipeline.insert(std::find(pipeline.begin(), pipeline.end(), "add-loss") + 1, "mixed-precision");
  Status st = runPipeline(*g, pipeline, ctx);
  ASSERT_TRUE(st.isOk()) << st.toString();
  ASSERT_EQ(ctx.paramGrads.size(), 6u);
  for (const auto& [p, grad] : ctx.paramGrads) {
    EXPECT_EQ(p->dtype(), DType::F32) << p->name();
    EXPECT_EQ(grad->dtype(), DType::F32) << p->name();
  }
  int casts = 0;
  for (const Node* n : g->nodes()) {
    casts += n->op() == OpKind::Cast;
    if (n->op() == OpKind::SgdUpdate)
      for (const Value* in : n->inputs()) EXPECT_NE(in->dtype(), DType::BF16) << n->describe();
    if (n->op() == OpKind::ConvBwdData || n->op() == OpKind::ConvBwdFilter)
      EXPECT_EQ(n->output(0)->dtype(), DType::BF16) << n->describe();
    if (n->op() == OpKind::BatchNormBwd) {
      EXPECT_EQ(n->output(0)->dtype(), DType::BF16);
      EXPECT_EQ(n->output(1)->dtype(), DType::F32);
    }
  }
  // 6 casts forward; backward: dlogits down, and one up per parameter cast (w, b, fw36, fb).
  EXPECT_EQ(casts, 6 + 1 + 4);
}

TEST(MixedPrecision, Fp32IsUntouched) {
  auto a = smallNet(), b = smallNet();
  PassContext ca, cb;
  ASSERT_TRUE(runPipeline(*a, {"canonicalize", "add-loss"}, ca).isOk());
  ASSERT_TRUE(runPipeline(*b, {"canonicalize", "add-loss", "mixed-precision"}, cb).isOk());
  EXPECT_EQ(printGraph(*a), printGraph(*b));
}

// ---- LeNet-5 on the CPU backend ------------------------------------------------------------

struct TrainRun {
  std::vector<float> losses;
  std::map<std::string, std::vector<float>> params; ///< every parameter after the steps
  std::string planText;
};

TrainRun trainLenet(Precision precision, int steps, int split = 0) {
  TrainRun r;
  CompileOptions o;
  if (split) {
    o.slicing.width = split;
    o.slicing.depth = split;
  }
  o.modelPath = std::string(HGP_SOURCE_DIR) + "/samples/lenet5.onnx";
  o.batch = 16;
  o.precision = precision;
  o.train.lr = 0.05;
  o.train.momentum = 0.9;
  o.maxStreams = 1;
  o.target = "h200";
  auto c = compileModel(o);
  EXPECT_TRUE(c.hasValue()) << c.status().toString();
  if (!c) return r;
  const Plan& plan = c->emitted.plan;
  r.planText = printPlan(plan);
  auto b = createCpuBackend();
  Status st = b->load(plan, InitData{c->emitted.data, {}});
  EXPECT_TRUE(st.isOk()) << st.toString();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> x(16 * 28 * 28);
  for (float& v : x) v = u(rng);
  std::vector<int64_t> labels(16);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = int64_t(i % 10);
  for (int s = 0; s < steps; ++s) {
    EXPECT_TRUE(b->write(plan.binding("input"), x.data()).isOk());
    EXPECT_TRUE(b->write(plan.binding("labels"), labels.data()).isOk());
    st = b->run("train");
    EXPECT_TRUE(st.isOk()) << st.toString();
    float loss = 0;
    EXPECT_TRUE(b->read(plan.binding("loss"), &loss).isOk());
    r.losses.push_back(loss);
  }
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const PlanTensor& t = plan.tensors[i];
    if (t.role != TensorRole::Param) continue;
    std::vector<float>& v = r.params[t.name];
    v.resize(size_t(t.type.numElements()));
    EXPECT_TRUE(b->read(int(i), v.data()).isOk());
  }
  return r;
}

TEST(MixedPrecision, LeNet5Bf16TracksFp32OnCpu) {
  const int steps = 5;
  TrainRun f32 = trainLenet(Precision::FP32, steps), bf16 = trainLenet(Precision::BF16, steps);
  ASSERT_EQ(bf16.losses.size(), size_t(steps));
  EXPECT_NE(bf16.planText.find("precision=\"bf16\""), std::string::npos);
  EXPECT_NE(bf16.planText.find("act bf16["), std::string::npos);
  for (int s = 0; s < steps; ++s) {
    // docs/precision.md: bf16 keeps 8 bits of mantissa (relative rounding 2^-9); over a few
    // steps the loss stays within 2% (relative) of fp32's.
    EXPECT_NEAR(bf16.losses[size_t(s)], f32.losses[size_t(s)], 0.02 * f32.losses[size_t(s)])
        << "step " << s;
  }
  EXPECT_LT(bf16.losses.back(), bf16.losses.front()) << "bf16 must train";
  TrainRun init = trainLenet(Precision::FP32, 0);
  ASSERT_EQ(bf16.params.size(), 10u);
  for (const auto& [name, w0] : init.params) {
    const std::vector<float>&a = f32.params[name], &b = bf16.params[name];
    double diff = 0, step = 0;
    for (size_t i = 0; i < w0.size(); ++i) {
      diff += std::pow(double(b[i]) - a[i], 2);
      step += std::pow(double(a[i]) - w0[i], 2);
    }
    std::printf("%s |bf16 - fp32| / |fp32 update| = %.4f\n", name.c_str(), std::sqrt(diff / step));
    EXPECT_LT(std::sqrt(diff), 0.25 * std::sqrt(step)) << name;
  }
}

TEST(MixedPrecision, LeNet5Fp16WithLossScalingTracksFp32OnCpu) {
  const int steps = 5;
  TrainRun f32 = trainLenet(Precision::FP32, steps), f16 = trainLenet(Precision::FP16, steps);
  ASSERT_EQ(f16.losses.size(), size_t(steps));
  EXPECT_NE(f16.planText.find("LossScaleUpdate("), std::string::npos);
  EXPECT_NE(f16.planText.find("grad_scale=1"), std::string::npos);
  for (int s = 0; s < steps; ++s)
    EXPECT_NEAR(f16.losses[size_t(s)], f32.losses[size_t(s)], 0.01 * f32.losses[size_t(s)])
        << "step " << s;
  TrainRun init = trainLenet(Precision::FP32, 0);
  for (const auto& [name, w0] : init.params) {
    const std::vector<float>&a = f32.params[name], &b = f16.params[name];
    double diff = 0, step = 0;
    for (size_t i = 0; i < w0.size(); ++i) {
      diff += std::pow(double(b[i]) - a[i], 2);
      step += std::pow(double(a[i]) - w0[i], 2);
    }
    std::printf("%s |fp16 - fp32| / |fp32 update| = %.4f\n", name.c_str(), std::sqrt(diff / step));
    // The gradients are unscaled: a missing or doubled 1/scale would be off by 2^16.
    EXPECT_LT(std::sqrt(diff), 0.1 * std::sqrt(step)) << name;
  }
}

/// fp16 loss scaling on the CPU backend, on the small net: a step whose scaled gradients overflow
/// is skipped (weights unchanged) and halves the scale; good steps
/// count up, and after growth_interval of them the scale doubles.
TEST(MixedPrecision, Fp16LossScalingSkipsAndAdjustsOnTheDevice) {
  auto g = smallNet();
  PassContext ctx;
  ctx.precision = Precision::FP16;
  ctx.train.momentum = 0.9;
  ctx.train.lr = 0.1;
  ctx.lossScaleInterval = 2;
  std::vector<std::string> pipeline = trainPipeline();
  auto at = std::find(pipeline.begin(), pipeline.end(), "add-loss") + 1;
  pipeline.insert(at, {"mixed-precision", "loss-scaling"});
  Status st = runPipeline(*g, pipeline, ctx);
  ASSERT_TRUE(st.isOk()) << st.toString();
  ProgramSource prog{"train",
                     g.get(),
                     {{"input", "x"},
                      {"labels", "labels"},
                      {"loss", "loss"},
                      {"scale", "loss_scale"},
                      {"good", "loss_scale.good_steps"},
                      {"ok", "ok"}}};
  auto e = emitPlan({prog}, EmitOptions{});
  ASSERT_TRUE(e.hasValue()) << e.status().toString();
  const Plan& plan = e->plan;
  auto b = createCpuBackend();
  ASSERT_TRUE(b->load(plan, InitData{e->data, {}}).isOk());
  std::vector<float> x(4 * 3 * 6 * 6);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (float& v : x) v = u(rng);
  std::vector<int64_t> labels = {1, 7, 3, 0};
  auto readF = [&](const std::string& name) {
    int t = plan.findTensor(name);
    EXPECT_GE(t, 0) << name;
    if (t < 0) return std::vector<float>();
    std::vector<float> v(size_t(plan.tensors[size_t(t)].type.numElements()));
    EXPECT_TRUE(b->read(t, v.data()).isOk());
    return v;
  };
  auto scalarF = [&](const char* binding) {
    float v = 0;
    EXPECT_TRUE(b->read(plan.binding(binding), &v).isOk());
    return v;
  };
  auto good = [&] {
    int64_t v = -1;
    EXPECT_TRUE(b->read(plan.binding("good"), &v).isOk());
    return v;
  };
  auto step = [&] {
    ASSERT_TRUE(b->write(plan.binding("input"), x.data()).isOk());
    ASSERT_TRUE(b->write(plan.binding("labels"), labels.data()).isOk());
    Status rs = b->run("train");
    ASSERT_TRUE(rs.isOk()) << rs.toString();
  };
  EXPECT_EQ(scalarF("scale"), 65536.f);
  EXPECT_EQ(good(), 0);

  // A scale so large that the f16 gradients overflow while the f32 loss stays finite.
  float huge = 1e30f;
  ASSERT_TRUE(b->write(plan.binding("scale"), &huge).isOk());
  std::vector<float> w = readF("w"), fw = readF("fw36");
  step();
  EXPECT_TRUE(std::isfinite(scalarF("loss")));
  EXPECT_EQ(scalarF("ok"), 0.f) << "the overflowed step must be skipped";
  EXPECT_EQ(scalarF("scale"), 0.5e30f);
  EXPECT_EQ(good(), 0);
  EXPECT_EQ(readF("w"), w) << "a skipped step changes no weight";
  EXPECT_EQ(readF("fw36"), fw);

  // A workable scale: steps apply, count up, and every second one doubles the scale.
  float scale = 1024.f;
  ASSERT_TRUE(b->write(plan.binding("scale"), &scale).isOk());
  step();
  EXPECT_EQ(scalarF("ok"), 1.f);
  EXPECT_EQ(good(), 1);
  EXPECT_EQ(scalarF("scale"), 1024.f);
  EXPECT_NE(readF("w"), w) << "a good step updates the weights";
  step();
  EXPECT_EQ(good(), 0);
  EXPECT_EQ(scalarF("scale"), 2048.f);
  step();
  EXPECT_EQ(good(), 1);
  EXPECT_EQ(scalarF("scale"), 2048.f);
}

/// The update unscales: training with the scale s gives the weights of training with scale 1, up
/// to f16 rounding of the scaled gradients (powers of two scale exactly unless they under- or
/// overflow).
TEST(MixedPrecision, Fp16UpdatesDoNotDependOnTheScale) {
  std::map<float, std::vector<float>> weights;
  for (float scale : {1.f, 256.f, 4096.f}) {
    auto g = smallNet();
    PassContext ctx;
    ctx.precision = Precision::FP16;
    ctx.train.lr = 0.1;
    ctx.initialLossScale = scale;
    std::vector<std::string> pipeline = trainPipeline();
    pipeline.insert(std::find(pipeline.begin(), pipeline.end(), "add-loss") + 1,
                    {"mixed-precision", "loss-scaling"});
    ASSERT_TRUE(runPipeline(*g, pipeline, ctx).isOk());
    ProgramSource prog{"train", g.get(), {{"input", "x"}, {"labels", "labels"}}};
    auto e = emitPlan({prog}, EmitOptions{});
    ASSERT_TRUE(e.hasValue());
    auto b = createCpuBackend();
    ASSERT_TRUE(b->load(e->plan, InitData{e->data, {}}).isOk());
    std::vector<float> x(4 * 3 * 6 * 6, 0.25f);
    for (size_t i = 0; i < x.size(); i += 3) x[i] = -0.5f;
    std::vector<int64_t> labels = {1, 7, 3, 0};
    ASSERT_TRUE(b->write(e->plan.binding("input"), x.data()).isOk());
    ASSERT_TRUE(b->write(e->plan.binding("labels"), labels.data()).isOk());
    ASSERT_TRUE(b->run("train").isOk());
    int t = e->plan.findTensor("fw36");
    std::vector<float>& v = weights[scale];
    v.resize(size_t(e->plan.tensors[size_t(t)].type.numElements()));
    ASSERT_TRUE(b->read(t, v.data()).isOk());
  }
  for (float scale : {256.f, 4096.f})
    for (size_t i = 0; i < weights[1.f].size(); ++i)
      ASSERT_NEAR(weights[scale][i], weights[1.f][i], 1e-4)
          << "scale " << scale << " element " << i;
}

/// Batch slicing keeps the math: a bf16 plan split 2 ways and pipelined 2 deep trains like the
/// whole one up to reassociation (which bf16 rounding makes visible), and it never accumulates a
/// filter gradient in 16 bits.
TEST(MixedPrecision, SlicedBf16PlanTrainsLikeTheWholeOne) {
  TrainRun whole = trainLenet(Precision::BF16, 3), sliced = trainLenet(Precision::BF16, 3, 2);
  ASSERT_EQ(sliced.losses.size(), 3u);
  EXPECT_NE(sliced.planText.find("#1/2"), std::string::npos) << "the plan must be sliced";
  auto back = parsePlan(sliced.planText);
  ASSERT_TRUE(back.hasValue()) << back.status().toString();
  for (const PlanProgram& p : back->programs)
    for (const PlanStep& st : p.steps)
      if (st.op == OpKind::ConvBwdFilter) {
        EXPECT_FALSE(st.attrs.getInt("accumulate", 0)) << st.loc;
      }
  for (int i = 0; i < 3; ++i)
    EXPECT_NEAR(sliced.losses[size_t(i)], whole.losses[size_t(i)], 5e-3 * whole.losses[size_t(i)]);
  for (const auto& [name, w] : whole.params) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      diff += std::pow(double(sliced.params[name][i]) - w[i], 2);
      norm += double(w[i]) * w[i];
    }
    EXPECT_LT(std::sqrt(diff / norm), 1e-3) << name;
  }
}

TEST(MixedPrecision, RejectsWhatItDoesNotSupport) {
  CompileOptions o;
  o.modelPath = std::string(HGP_SOURCE_DIR) + "/samples/lenet5.onnx";
  o.batch = 4;
  o.precision = Precision::BF16;
  o.training = false;
  auto c = compileModel(o);
  ASSERT_FALSE(c.hasValue());
  EXPECT_EQ(c.status().code(), ErrorCode::Usage);
  Expected<Precision> int8 = parsePrecision("int8");
  ASSERT_FALSE(int8.hasValue());
  EXPECT_EQ(int8.status().code(), ErrorCode::Usage);
}

} // namespace
} // namespace hgp
