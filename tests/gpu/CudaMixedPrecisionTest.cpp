// CudaMixedPrecisionTest.cpp - the CUDA executors on bf16 and f16 tensors against the CPU
// reference running the same 16-bit plan (docs/precision.md).
//
// Each case builds a small f32 graph, rewrites it with the mixed-precision pass (16-bit operands,
// f32 parameters behind one Cast each), casts the results back to f32, differentiates, and
// compares every result and parameter gradient after each of five runs, eager and captured. Both
// backends store 16-bit values rounded to nearest even and compute in float, but they add in
// different orders, so a result may differ by a unit in the last place of its 16-bit value, and a
// gradient by a few: tolerances are relative to the largest reference magnitude, 2e-2 for bf16
// (8-bit mantissa, ulp 2^-7 at the top of a binade) and 4e-3 for f16 (11 bits). The scalar test
// loss sums results times weights of random sign and cancels, so it is held to the bound the
// results' own check implies (RunSpec::lossTolOfTerms), not to a fraction of itself.
#include "tools/hgpc/Compile.h"
#include "tests/gpu/GpuTestUtil.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace hgp::gputest {
namespace {

using Builder = std::function<std::vector<Value*>(Graph&, const std::vector<Value*>&)>;
using I = std::vector<int64_t>;

AttrMap attrs(std::initializer_list<std::pair<const char*, AttrValue>> kv) {
  AttrMap a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

TensorType f32(Shape s) {
  return {DType::F32, std::move(s)};
}

RunSpec mixedSpec(DType low, Feeder feed) {
  RunSpec s;
  s.tol = low == DType::BF16 ? 2e-2 : 4e-3;
  s.lossTolOfTerms = s.tol;
  s.feed = std::move(feed);
  return s;
}

/// `build` over f32 parameters, in `low` precision, against the CPU.
void checkMixed(const std::string& what, DType low, std::vector<TensorType> params,
                const Builder& build, size_t lossTerms = SIZE_MAX, Feeder feed = defaultFeed) {
  SCOPED_TRACE(what + " " + dtypeName(low));
  Graph g(what);
  std::vector<Value*> ps;
  for (size_t i = 0; i < params.size(); ++i)
    ps.push_back(addValue(g, "p" + std::to_string(i), TensorRole::Param, params[i]));
  for (Value* v : build(g, ps)) {
    ASSERT_NE(v, nullptr);
    g.addOutput(v);
  }
  PassContext ctx;
  ctx.precision = precisionStoring(low);
  Status st = runPipeline(g, {"mixed-precision"}, ctx);
  ASSERT_TRUE(st.isOk()) << st.toString();
  // The pass rebuilt the nodes: read the results back from the graph's outputs.
  std::vector<Value*> outs;
  for (Value* v : g.outputs())
    outs.push_back(v->dtype() == DType::F32
                       ? v
                       : op1(g, OpKind::Cast, {v}, attrs({{"to", std::string("f32")}})));
  g.mutableOutputs().clear();
  auto e = emit(g, differentiate(g, outs, lossTerms), low == DType::BF16 ? "bf16" : "fp16");
  ASSERT_TRUE(e.has_value());
  bool half = false;
  for (const PlanTensor& t : e->plan.tensors) half |= t.type.dtype == low;
  ASSERT_TRUE(half) << "the case must run in " << dtypeName(low);
  runAndCompare(*e, mixedSpec(low, feed));
}

void checkBoth(const std::string& what, std::vector<TensorType> params, const Builder& build,
               size_t lossTerms = SIZE_MAX, Feeder feed = defaultFeed) {
  for (DType low : {DType::BF16, DType::F16})
    checkMixed(what, low, params, build, lossTerms, feed);
}

AttrMap convAttrs(I strides, I pads, I dil, int64_t group) {
  return attrs({{"strides", strides}, {"pads", pads}, {"dilations", dil}, {"group", group}});
}

AttrMap poolAttrs(I k, I s, I pads) {
  return attrs({{"kernel_shape", k}, {"strides", s}, {"pads", pads}, {"ceil_mode", int64_t(0)}});
}

TEST(CudaMixedPrecision, Cast) {
  HGP_REQUIRE_CUDA();
  checkBoth("cast", {f32({3, 37})}, [](Graph& g, auto& p) {
    // Relu in 16 bits makes the pass cast p0 down; the test casts the result up.
    return std::vector<Value*>{op1(g, OpKind::Relu, {p[0]})};
  });
}

TEST(CudaMixedPrecision, Convolutions) {
  HGP_REQUIRE_CUDA();
  checkBoth("conv2d", {f32({2, 4, 7, 6}), f32({6, 2, 3, 3}), f32({6})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{
        op1(g, OpKind::Conv, {p[0], p[1], p[2]}, convAttrs({2, 1}, {1, 1, 1, 1}, {1, 2}, 2))};
  });
  checkBoth("conv2d-64", {f32({4, 16, 14, 14}), f32({32, 16, 3, 3})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{
        op1(g, OpKind::Conv, {p[0], p[1]}, convAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 1))};
  });
  checkBoth("depthwise", {f32({2, 3, 6, 6}), f32({3, 1, 3, 3})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{
        op1(g, OpKind::Conv, {p[0], p[1]}, convAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 3))};
  });
  checkBoth("convtranspose", {f32({2, 4, 4, 3}), f32({4, 3, 3, 3}), f32({6})},
            [](Graph& g, auto& p) {
              AttrMap a = convAttrs({2, 2}, {1, 1, 1, 1}, {1, 1}, 2);
              a.setInts("output_padding", {1, 0});
              return std::vector<Value*>{op1(g, OpKind::ConvTranspose, {p[0], p[1], p[2]}, a)};
            });
}

TEST(CudaMixedPrecision, MatrixProducts) {
  HGP_REQUIRE_CUDA();
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      Shape a = ta ? Shape{5, 3} : Shape{3, 5}, b = tb ? Shape{4, 5} : Shape{5, 4};
      checkBoth("gemm" + std::to_string(ta) + std::to_string(tb), {f32(a), f32(b), f32({4})},
                [&](Graph& g, auto& p) {
                  return std::vector<Value*>{op1(g, OpKind::Gemm, {p[0], p[1], p[2]},
                                                 attrs({{"transA", int64_t(ta)},
                                                        {"transB", int64_t(tb)},
                                                        {"alpha", 0.7},
                                                        {"beta", 1.3}}))};
                });
    }
  checkBoth("matmul-batched", {f32({2, 1, 3, 4}), f32({3, 4, 2})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{op1(g, OpKind::MatMul, {p[0], p[1]})};
  });
}

TEST(CudaMixedPrecision, BatchNorm) {
  HGP_REQUIRE_CUDA();
  for (Shape x : {Shape{4, 3, 5, 7}, Shape{8, 16, 8, 8}})
    checkBoth(
        "bn-train " + shapeToString(x), {f32(x), f32({x[1]}), f32({x[1]})}, [](Graph& g, auto& p) {
          int64_t c = p[0]->shape()[1];
          Node* bn =
              addNode(g, OpKind::BatchNormTrain, {p[0], p[1], p[2]}, attrs({{"epsilon", 1e-5}}));
          Value* rm = addValue(g, "running_mean", TensorRole::State, f32({c}));
          Value* rv =
              addValue(g, "running_var", TensorRole::State, f32({c}), filled(f32({c}), 1.f));
          Node* upd = addNode(g, OpKind::BnRunningUpdate, {rm, rv, bn->output(1), bn->output(2)},
                              attrs({{"momentum", 0.9},
                                     {"unbiased", int64_t(1)},
                                     {"count", p[0]->type().numElements() / c}}));
          g.addCarry(rm, upd->output(0));
          g.addCarry(rv, upd->output(1));
          return std::vector<Value*>{bn->output(0)};
        });
  checkBoth("bn-frozen", {f32({2, 3, 5, 5}), f32({3}), f32({3})}, [](Graph& g, auto& p) {
    TensorType c = f32({3});
    Value* mean = addValue(g, "mean", TensorRole::State, c, dataOf(c, uniformBytes(c, 5)));
    Value* var = addValue(g, "var", TensorRole::State, c, dataOf(c, uniformBytes(c, 6, 0.5, 2)));
    return std::vector<Value*>{
        op1(g, OpKind::BatchNorm, {p[0], p[1], p[2], mean, var}, attrs({{"epsilon", 1e-5}}))};
  });
}

TEST(CudaMixedPrecision, Pooling) {
  HGP_REQUIRE_CUDA();
  checkBoth("maxpool2x2", {f32({2, 3, 8, 8})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{
        op1(g, OpKind::MaxPool, {p[0]}, poolAttrs({2, 2}, {2, 2}, {0, 0, 0, 0}))};
  });
  checkBoth("maxpool3x3", {f32({2, 3, 9, 9})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{
        op1(g, OpKind::MaxPool, {p[0]}, poolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}))};
  });
  checkBoth("maxpool-general", {f32({2, 3, 9, 9})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{
        op1(g, OpKind::MaxPool, {p[0]}, poolAttrs({2, 3}, {1, 2}, {0, 1, 0, 1}))};
  });
  checkBoth("avgpool", {f32({2, 3, 7, 7})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{
        op1(g, OpKind::AveragePool, {p[0]}, poolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}))};
  });
  checkBoth("globalavg", {f32({2, 5, 6, 6})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{op1(g, OpKind::GlobalAveragePool, {p[0]})};
  });
}

TEST(CudaMixedPrecision, ActivationsAndArithmetic) {
  HGP_REQUIRE_CUDA();
  for (OpKind op : {OpKind::Relu, OpKind::Sigmoid, OpKind::Tanh, OpKind::HardSwish})
    checkBoth(std::string("act ") + opName(op), {f32({3, 5, 7})},
              [&](Graph& g, auto& p) { return std::vector<Value*>{op1(g, op, {p[0]})}; });
  checkBoth("add-per-channel", {f32({2, 3, 4, 5}), f32({3, 1, 1})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{op1(g, OpKind::Add, {p[0], p[1]})};
  });
  checkBoth("mul-same", {f32({2, 3, 4, 5}), f32({2, 3, 4, 5})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{op1(g, OpKind::Mul, {p[0], p[1]})};
  });
  // Two uses of p0: autodiff adds its gradients with a Sum in 16 bits.
  checkBoth("fan-out", {f32({4, 9})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{
        op1(g, OpKind::Add, {op1(g, OpKind::Relu, {p[0]}), op1(g, OpKind::Sigmoid, {p[0]})})};
  });
  checkBoth("reduce-mean", {f32({3, 4, 5})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{
        op1(g, OpKind::ReduceMean, {p[0]}, attrs({{"axes", I{0, 2}}, {"keepdims", int64_t(1)}}))};
  });
  checkBoth("pad-slice", {f32({2, 3, 5})}, [](Graph& g, auto& p) {
    Value* q = op1(g, OpKind::Pad, {p[0]},
                   attrs({{"pads", I{0, 1, 2, 0, 0, 1}}, {"mode", std::string("reflect")}}));
    return std::vector<Value*>{
        op1(g, OpKind::Slice, {q},
            attrs({{"starts", I{0, 1, 0}}, {"ends", I{2, 4, 6}}, {"steps", I{1, 1, 2}}}))};
  });
  checkBoth("concat-reshape", {f32({2, 3, 4}), f32({2, 5, 4})}, [](Graph& g, auto& p) {
    Value* c = op1(g, OpKind::Concat, {p[0], p[1]}, attrs({{"axis", int64_t(1)}}));
    return std::vector<Value*>{op1(g, OpKind::Reshape, {c}, attrs({{"shape", I{4, 16}}}))};
  });
}

/// The ops of the modern families (ConvNeXt, EfficientNet; issue 23): LayerNorm with 16-bit X
/// and Y and f32 scale, bias and statistics, over ConvNeXt's channels-last C and other trailing
/// dims; GELU in both forms; the elementary functions on their domains; stochastic depth's
/// Bernoulli row mask times a 16-bit block.
TEST(CudaMixedPrecision, ModernOps) {
  HGP_REQUIRE_CUDA();
  for (auto [x, axis] : std::vector<std::pair<Shape, int64_t>>{
           {{2, 7, 7, 96}, 3}, {{3, 5, 37}, 2}, {{4, 3, 6, 5}, 2}, {{300, 8}, 1}}) {
    Shape inner(x.begin() + axis, x.end());
    checkBoth("layernorm " + shapeToString(x) + " axis " + std::to_string(axis),
              {f32(x), f32(inner), f32(inner)}, [axis = axis](Graph& g, auto& p) {
                Node* n = addNode(g, OpKind::LayerNorm, {p[0], p[1], p[2]},
                                  attrs({{"axis", axis}, {"epsilon", 1e-6}}));
                return std::vector<Value*>{n->output(0)};
              });
  }
  struct Case {
    OpKind op;
    std::string approximate;
    double lo, hi;
  };
  for (const Case& c : std::vector<Case>{{OpKind::Gelu, "none", -5, 5},
                                         {OpKind::Gelu, "tanh", -5, 5},
                                         {OpKind::Erf, "", -3, 3},
                                         {OpKind::Exp, "", -3, 3},
                                         {OpKind::Log, "", 0.1, 4},
                                         {OpKind::Sqrt, "", 0.1, 4},
                                         {OpKind::Reciprocal, "", 0.5, 4}}) {
    AttrMap a;
    if (!c.approximate.empty()) a.setString("approximate", c.approximate);
    Feeder feed = [c](const PlanTensor& t, int run) {
      if (t.name != "p0" || t.type.dtype != DType::F32) return defaultFeed(t, run);
      return uniformBytes(t.type, hashName(t.name, uint64_t(run) + 17), c.lo, c.hi);
    };
    checkBoth(std::string(opName(c.op)) + c.approximate, {f32({3, 4, 37})},
              [&](Graph& g, auto& p) { return std::vector<Value*>{op1(g, c.op, {p[0]}, a)}; },
              SIZE_MAX, feed);
  }
  checkBoth("stochastic-depth", {f32({8, 3, 5, 5})}, [](Graph& g, auto& p) {
    Value* it = addValue(g, "iter", TensorRole::State, {DType::I64, {}}, scalarI64(5));
    Value* row = op1(g, OpKind::ReduceMean, {p[0]},
                     attrs({{"axes", I{1, 2, 3}}, {"keepdims", int64_t(1)}}));
    Value* mask = op1(g, OpKind::Bernoulli, {row, it},
                      attrs({{"p", 0.8}, {"seed", int64_t(3)}, {"key", int64_t(9)}}));
    return std::vector<Value*>{op1(g, OpKind::Mul, {p[0], mask})};
  });
}

/// max |a - b| / max |b| over two f32 tensors.
double relativeDistance(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  const float* x = reinterpret_cast<const float*>(a.data());
  const float* y = reinterpret_cast<const float*>(b.data());
  double diff = 0, ref = 0;
  for (size_t i = 0; i < b.size() / 4; ++i) {
    diff = std::max(diff, std::fabs(double(x[i]) - double(y[i])));
    ref = std::max(ref, std::fabs(double(y[i])));
  }
  return diff / std::max(ref, 1e-30);
}

/// Three LeNet-5 steps on CUDA and on the CPU, both in `precision`. Each f32 result (weights,
/// momentum buffers, loss) must agree within `tol`, or within four times what 16-bit rounding
/// alone does to it: the distance d between the CPU in `precision` and the CPU in f32 on the same
/// inputs. Two 16-bit runs that round in different places each sit about d from the f32 result,
/// so they sit up to 2d from each other when their noise is alike; the H200 rounds in more places
/// (cuBLAS and cuDNN write 16-bit partial results the CPU keeps in float), and on it (fifth
/// session, device call 1) the bf16 momentum buffers of the classifier at step 1 were 3.0 d from
/// the CPU's (10.6% of their largest element, d = 3.5%). A wiring fault (a lost cast, loss scale
/// or master-weight update) moves a result by its own size, far beyond 4d (docs/precision.md).
void trainLeNet5(Precision precision) {
  CompileOptions o;
  o.modelPath = sourceFile("samples/lenet5.onnx");
  ASSERT_FALSE(o.modelPath.empty()) << "samples/lenet5.onnx not found (set HGP_SOURCE_DIR)";
  o.batch = 16;
  o.precision = precision;
  o.train.lr = 0.05;
  o.train.momentum = 0.9;
  o.maxStreams = 1;
  o.target = "h200";
  auto c = compileModel(o);
  ASSERT_TRUE(c.hasValue()) << c.status().toString();
  CompileOptions o32 = o;
  o32.precision = Precision::FP32;
  auto c32 = compileModel(o32);
  ASSERT_TRUE(c32.hasValue()) << c32.status().toString();
  const Plan& plan = c->emitted.plan;
  const Plan& plan32 = c32->emitted.plan;
  auto cpu = createCpuBackend();
  auto cpu32 = createCpuBackend();
  auto gpu = makeGpuBackend(BackendOptions{});
  ASSERT_TRUE(gpu.hasValue()) << gpu.status().toString();
  for (Backend* b : {cpu.get(), gpu->get()}) {
    Status st = b->load(plan, InitData{c->emitted.data, {}});
    ASSERT_TRUE(st.isOk()) << st.toString();
  }
  ASSERT_TRUE(cpu32->load(plan32, InitData{c32->emitted.data, {}}).isOk());
  std::map<std::string, int> byName32;
  for (size_t i = 0; i < plan32.tensors.size(); ++i) byName32[plan32.tensors[i].name] = int(i);
  for (int step = 0; step < 3; ++step) {
    for (const char* name : {"input", "labels"}) {
      const PlanTensor& t = plan.tensors[size_t(plan.binding(name))];
      std::vector<uint8_t> bytes =
          t.type.dtype == DType::I64 ? indexBytes(t.type, hashName(t.name, uint64_t(step)), 10)
                                     : uniformBytes(t.type, hashName(t.name, uint64_t(step)), 0, 1);
      for (Backend* b : {cpu.get(), gpu->get()})
        ASSERT_TRUE(b->write(plan.binding(name), bytes.data()).isOk());
      ASSERT_EQ(plan32.tensors[size_t(plan32.binding(name))].type.dtype, t.type.dtype) << name;
      ASSERT_TRUE(cpu32->write(plan32.binding(name), bytes.data()).isOk());
    }
    for (Backend* b : {cpu.get(), gpu->get(), cpu32.get()}) {
      Status st = b->run("train");
      ASSERT_TRUE(st.isOk()) << st.toString();
    }
    for (int t : comparedTensors(plan)) {
      const PlanTensor& pt = plan.tensors[size_t(t)];
      if (pt.role == TensorRole::Input) continue;
      double tol = pt.name == "loss" ? 5e-2 : 2e-2;
      std::vector<uint8_t> want = readTensor(*cpu, plan, t);
      auto same = byName32.find(pt.name);
      // (The eval program does not run here: its results keep whatever each backend started with.)
      bool trained = pt.name.rfind("eval/", 0) != 0;
      if (trained && pt.type.dtype == DType::F32 && same != byName32.end() &&
          plan32.tensors[size_t(same->second)].type == pt.type)
        tol = std::max(tol, 4 * relativeDistance(want, readTensor(*cpu32, plan32, same->second)));
      EXPECT_TRUE(sameValues(pt, readTensor(**gpu, plan, t), want, tol))
          << "step " << step << ": " << pt.name << " (bound " << tol << ")";
    }
  }
}

/// LeNet-5 (samples/lenet5.onnx) trains three steps on CUDA as on the CPU, in bf16 and in fp16
/// with loss scaling (the scale, its good-step count and the momentum buffers are compared too).
TEST(CudaMixedPrecision, LeNet5TrainingStepsMatchTheCpu) {
  HGP_REQUIRE_CUDA();
  for (Precision precision : {Precision::BF16, Precision::FP16}) {
    SCOPED_TRACE(precisionName(precision));
    trainLeNet5(precision);
  }
}

/// An op whose CUDA executor is f32 only refuses a 16-bit plan at load, naming the op.
TEST(CudaMixedPrecision, UnsupportedOpIsRefusedAtLoad) {
  HGP_REQUIRE_CUDA();
  if (cpuStandIn()) GTEST_SKIP() << "the CPU stand-in runs every op in 16 bits";
  Graph g("softmax-bf16");
  Value* x = addValue(g, "x", TensorRole::Param, f32({2, 5}));
  g.addOutput(op1(g, OpKind::Softmax, {x}, attrs({{"axis", int64_t(1)}})));
  PassContext ctx;
  ctx.precision = Precision::BF16;
  ASSERT_TRUE(runPipeline(g, {"mixed-precision"}, ctx).isOk());
  auto e = emit(g, bindOutputs(g, {}), "bf16");
  ASSERT_TRUE(e.has_value());
  auto b = makeGpuBackend(BackendOptions{});
  ASSERT_TRUE(b.hasValue());
  Status st = (*b)->load(e->plan, InitData{e->data, {}});
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("Softmax"), std::string::npos) << st.toString();
}

} // namespace
} // namespace hgp::gputest
