// Gradient checks of every differentiable op's rule: the autodiff pass builds the backward graph,
// the CPU backend runs it, and central finite differences of the forward program are the
// reference. The reference backend computes in float32 only, so the checks run in float32 with
// tolerances sized for that (the PyTorch parity tests pin the gradients down far more tightly).
#include "ir/Printer.h"
#include "compiler/plan/PlanEmitter.h"
#include "passes/Pass.h"
#include "runtime/Backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

namespace hgp {
namespace {

using Builder = std::function<Expected<Value*>(Graph&, const std::vector<Value*>&)>;

std::shared_ptr<TensorData> randomData(const TensorType& t, std::mt19937& rng, double lo = -1,
                                       double hi = 1) {
  auto d = std::make_shared<TensorData>();
  d->type = t;
  d->bytes.resize(size_t(t.bytes()));
  std::uniform_real_distribution<float> u{float(lo), float(hi)};
  float* f = reinterpret_cast<float*>(d->bytes.data());
  for (int64_t i = 0; i < t.numElements(); ++i) f[i] = u(rng);
  return d;
}

std::shared_ptr<TensorData> labelData(int64_t n, int64_t classes) {
  auto d = std::make_shared<TensorData>();
  d->type = {DType::I64, {n}};
  d->bytes.resize(size_t(8 * n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = (i * 7 + 3) % classes;
    std::memcpy(d->bytes.data() + 8 * i, &v, 8);
  }
  return d;
}

Expected<Value*> op1(Graph& g, OpKind op, std::vector<Value*> ins, AttrMap a = {}) {
  HGP_ASSIGN_OR_RETURN(Node * n, g.addNode(op, std::move(ins), std::move(a)));
  return n->output(0);
}

/// Builds params -> op -> sum(out * R) as the loss, differentiates, and compares every
/// parameter's gradient with central differences at a sample of elements.
void checkGradients(const std::string& what, std::vector<TensorType> paramTypes, const Builder& build,
                    double eps = 1e-3, double tol = 1e-2, double lo = -1, double hi = 1) {
  SCOPED_TRACE(what);
  std::mt19937 rng(1234);
  Graph g(what);
  std::vector<Value*> params;
  for (size_t i = 0; i < paramTypes.size(); ++i)
    params.push_back(*g.addGraphValue("p" + std::to_string(i), TensorRole::Param, paramTypes[i],
                                      randomData(paramTypes[i], rng, lo, hi)));
  auto out = build(g, params);
  ASSERT_TRUE(out.hasValue()) << out.status().toString();
  Value* r = *g.addGraphValue("r", TensorRole::Const, (*out)->type(), randomData((*out)->type(), rng));
  Value* prod = *op1(g, OpKind::Mul, {*out, r});
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < prod->rank(); ++i) axes.push_back(i);
  AttrMap ra;
  ra.setInts("axes", axes);
  ra.setInt("keepdims", 0);
  Value* loss = *op1(g, OpKind::ReduceSum, {prod}, ra);
  g.addOutput(loss);

  PassContext ctx;
  Status st = runPipeline(g, {"autodiff"}, ctx);
  ASSERT_TRUE(st.isOk()) << st.toString();
  ProgramSource prog{"forward", &g, {{"loss", loss->name()}}};
  std::map<Value*, std::string> gradName;
  for (auto& [p, grad] : ctx.paramGrads) {
    g.addOutput(grad);
    prog.bindings["grad." + p->name()] = grad->name();
  }
  auto emitted = emitPlan({prog}, EmitOptions{});
  ASSERT_TRUE(emitted.hasValue()) << emitted.status().toString();
  const Plan& plan = emitted->plan;
  auto backend = createCpuBackend();
  ASSERT_TRUE(backend->load(plan, InitData{emitted->data, {}}).isOk());
  ASSERT_TRUE(backend->run("forward").isOk());

  auto lossAt = [&]() {
    float l = 0;
    EXPECT_TRUE(backend->run("forward").isOk());
    EXPECT_TRUE(backend->read(plan.binding("loss"), &l).isOk());
    return double(l);
  };
  for (Value* p : params) {
    int pi = plan.findTensor(p->name());
    int gi = plan.binding("grad." + p->name());
    ASSERT_GE(gi, 0) << "no gradient for " << p->name() << "\n" << printGraph(g);
    int64_t n = p->type().numElements();
    std::vector<float> value(static_cast<size_t>(n)), grad(static_cast<size_t>(n));
    ASSERT_TRUE(backend->read(pi, value.data()).isOk());
    ASSERT_TRUE(backend->read(gi, grad.data()).isOk());
    std::vector<int64_t> sample;
    for (int64_t i = 0; i < std::min<int64_t>(n, 24); ++i) sample.push_back((i * 7919) % n);
    for (int64_t i : sample) {
      float orig = value[size_t(i)];
      value[size_t(i)] = orig + float(eps);
      ASSERT_TRUE(backend->write(pi, value.data()).isOk());
      double up = lossAt();
      value[size_t(i)] = orig - float(eps);
      ASSERT_TRUE(backend->write(pi, value.data()).isOk());
      double down = lossAt();
      value[size_t(i)] = orig;
      ASSERT_TRUE(backend->write(pi, value.data()).isOk());
      double fd = (up - down) / (2 * eps);
      EXPECT_NEAR(grad[size_t(i)], fd, tol * (1 + std::fabs(fd)))
          << p->name() << "[" << i << "] of " << shapeToString(p->shape());
    }
  }
}

AttrMap convAttrs(std::vector<int64_t> strides, std::vector<int64_t> pads, std::vector<int64_t> dil,
                  int64_t group) {
  AttrMap a;
  a.setInts("strides", strides);
  a.setInts("pads", pads);
  a.setInts("dilations", dil);
  a.setInt("group", group);
  return a;
}

TEST(AutodiffTest, Conv2dGroupsDilationAsymmetricPads) {
  checkGradients("conv2d", {{DType::F32, {2, 4, 7, 6}}, {DType::F32, {6, 2, 3, 3}}, {DType::F32, {6}}},
                 [](Graph& g, const std::vector<Value*>& p) {
                   return op1(g, OpKind::Conv, {p[0], p[1], p[2]},
                              convAttrs({2, 1}, {1, 0, 2, 1}, {1, 2}, 2));
                 });
}

TEST(AutodiffTest, Conv1dAnd3d) {
  checkGradients("conv1d", {{DType::F32, {2, 3, 9}}, {DType::F32, {4, 3, 3}}},
                 [](Graph& g, const std::vector<Value*>& p) {
                   return op1(g, OpKind::Conv, {p[0], p[1]}, convAttrs({2}, {1, 1}, {1}, 1));
                 });
  checkGradients("conv3d", {{DType::F32, {1, 2, 4, 5, 4}}, {DType::F32, {3, 2, 2, 3, 2}}},
                 [](Graph& g, const std::vector<Value*>& p) {
                   return op1(g, OpKind::Conv, {p[0], p[1]},
                              convAttrs({1, 2, 1}, {0, 1, 1, 1, 0, 0}, {1, 1, 1}, 1));
                 });
}

TEST(AutodiffTest, DepthwiseConv) {
  checkGradients("depthwise", {{DType::F32, {2, 3, 6, 6}}, {DType::F32, {3, 1, 3, 3}}},
                 [](Graph& g, const std::vector<Value*>& p) {
                   return op1(g, OpKind::Conv, {p[0], p[1]}, convAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 3));
                 });
}

TEST(AutodiffTest, ConvTranspose) {
  checkGradients("convtranspose",
                 {{DType::F32, {2, 4, 4, 3}}, {DType::F32, {4, 3, 3, 3}}, {DType::F32, {6}}},
                 [](Graph& g, const std::vector<Value*>& p) {
                   AttrMap a = convAttrs({2, 2}, {1, 0, 0, 1}, {1, 1}, 2);
                   a.setInts("output_padding", {1, 0});
                   return op1(g, OpKind::ConvTranspose, {p[0], p[1], p[2]}, a);
                 });
}

TEST(AutodiffTest, BatchNormTrainingAndFrozen) {
  checkGradients("bn-train", {{DType::F32, {4, 3, 3, 2}}, {DType::F32, {3}}, {DType::F32, {3}}},
                 [](Graph& g, const std::vector<Value*>& p) -> Expected<Value*> {
                   AttrMap a;
                   a.setFloat("epsilon", 1e-5);
                   HGP_ASSIGN_OR_RETURN(Node * n, g.addNode(OpKind::BatchNormTrain, {p[0], p[1], p[2]}, a));
                   return n->output(0);
                 }, 1e-3, 2e-2);
  checkGradients("bn-frozen",
                 {{DType::F32, {2, 3, 2, 2}}, {DType::F32, {3}}, {DType::F32, {3}}},
                 [](Graph& g, const std::vector<Value*>& p) -> Expected<Value*> {
                   std::mt19937 rng(5);
                   TensorType c{DType::F32, {3}};
                   HGP_ASSIGN_OR_RETURN(Value * mean, g.addGraphValue("mean", TensorRole::State, c, randomData(c, rng)));
                   HGP_ASSIGN_OR_RETURN(Value * var, g.addGraphValue("var", TensorRole::State, c, randomData(c, rng, 0.5, 2)));
                   AttrMap a;
                   a.setFloat("epsilon", 1e-5);
                   return op1(g, OpKind::BatchNorm, {p[0], p[1], p[2], mean, var}, a);
                 });
}

TEST(AutodiffTest, LRN) {
  checkGradients("lrn", {{DType::F32, {2, 5, 3, 3}}}, [](Graph& g, const std::vector<Value*>& p) {
    AttrMap a;
    a.setInt("size", 3);
    a.setFloat("alpha", 1e-2);
    a.setFloat("beta", 0.75);
    a.setFloat("bias", 1.0);
    return op1(g, OpKind::LRN, {p[0]}, a);
  });
}

TEST(AutodiffTest, Activations) {
  struct Case {
    OpKind op;
    AttrMap attrs;
  };
  AttrMap leaky, clip, hsig, scale;
  leaky.setFloat("alpha", 0.1);
  clip.setFloat("min", -0.5);
  clip.setFloat("max", 0.6);
  hsig.setFloat("alpha", 0.2);
  hsig.setFloat("beta", 0.5);
  scale.setFloat("alpha", -1.5);
  std::vector<Case> cases = {{OpKind::Relu, {}},      {OpKind::LeakyRelu, leaky},
                             {OpKind::Clip, clip},     {OpKind::Sigmoid, {}},
                             {OpKind::Tanh, {}},       {OpKind::HardSigmoid, hsig},
                             {OpKind::HardSwish, {}},  {OpKind::Neg, {}},
                             {OpKind::Scale, scale},   {OpKind::Silu, {}}};
  for (const Case& c : cases)
    checkGradients(opName(c.op), {{DType::F32, {3, 4, 5}}},
                   [&](Graph& g, const std::vector<Value*>& p) { return op1(g, c.op, {p[0]}, c.attrs); },
                   1e-3, 1e-2, -4, 4);
}

TEST(AutodiffTest, ModernActivations) {
  AttrMap exact, tanhForm;
  exact.setString("approximate", "none");
  tanhForm.setString("approximate", "tanh");
  for (const AttrMap& a : {exact, tanhForm})
    checkGradients("gelu-" + a.getString("approximate"), {{DType::F32, {3, 4, 5}}},
                   [&](Graph& g, const std::vector<Value*>& p) { return op1(g, OpKind::Gelu, {p[0]}, a); },
                   1e-3, 1e-2, -4, 4);
  for (OpKind op : {OpKind::Erf, OpKind::Exp})
    checkGradients(opName(op), {{DType::F32, {3, 4, 5}}},
                   [&](Graph& g, const std::vector<Value*>& p) { return op1(g, op, {p[0]}); },
                   1e-3, 1e-2, -2, 2);
  // Log, Sqrt and Reciprocal on positive inputs, away from their poles.
  for (OpKind op : {OpKind::Log, OpKind::Sqrt, OpKind::Reciprocal})
    checkGradients(opName(op), {{DType::F32, {3, 4, 5}}},
                   [&](Graph& g, const std::vector<Value*>& p) { return op1(g, op, {p[0]}); },
                   1e-3, 1e-2, 0.5, 3);
}

TEST(AutodiffTest, LayerNormOverTrailingDims) {
  // ConvNeXt's channels-last LayerNorm (axis = last) and a LayerNorm over two dims.
  for (int64_t axis : {3, 2}) {
    Shape x{2, 3, 4, 5}, inner(x.begin() + axis, x.end());
    checkGradients("layernorm-axis" + std::to_string(axis),
                   {{DType::F32, x}, {DType::F32, inner}, {DType::F32, inner}},
                   [&](Graph& g, const std::vector<Value*>& p) {
                     AttrMap a;
                     a.setInt("axis", axis);
                     a.setFloat("epsilon", 1e-5);
                     return op1(g, OpKind::LayerNorm, {p[0], p[1], p[2]}, a);
                   },
                   1e-3, 2e-2);
  }
}

AttrMap poolAttrs(std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> pads, bool ceil) {
  AttrMap a;
  a.setInts("kernel_shape", k);
  a.setInts("strides", s);
  a.setInts("pads", pads);
  a.setInt("ceil_mode", ceil);
  return a;
}

TEST(AutodiffTest, Pools) {
  checkGradients("maxpool", {{DType::F32, {2, 3, 7, 6}}}, [](Graph& g, const std::vector<Value*>& p) {
    return op1(g, OpKind::MaxPool, {p[0]}, poolAttrs({3, 2}, {2, 2}, {1, 0, 1, 1}, true));
  });
  for (int include = 0; include < 2; ++include)
    checkGradients("avgpool", {{DType::F32, {2, 3, 7, 6}}}, [&](Graph& g, const std::vector<Value*>& p) {
      AttrMap a = poolAttrs({3, 3}, {2, 2}, {1, 1, 1, 0}, true);
      a.setInt("count_include_pad", include);
      return op1(g, OpKind::AveragePool, {p[0]}, a);
    });
  checkGradients("gap", {{DType::F32, {2, 3, 4, 5}}}, [](Graph& g, const std::vector<Value*>& p) {
    return op1(g, OpKind::GlobalAveragePool, {p[0]});
  });
}

TEST(AutodiffTest, GemmAllTransposes) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      Shape a = ta ? Shape{5, 3} : Shape{3, 5}, b = tb ? Shape{4, 5} : Shape{5, 4};
      checkGradients("gemm", {{DType::F32, a}, {DType::F32, b}, {DType::F32, {4}}},
                     [&](Graph& g, const std::vector<Value*>& p) {
                       AttrMap at;
                       at.setInt("transA", ta);
                       at.setInt("transB", tb);
                       at.setFloat("alpha", 0.7);
                       at.setFloat("beta", 1.3);
                       return op1(g, OpKind::Gemm, {p[0], p[1], p[2]}, at);
                     });
    }
}

TEST(AutodiffTest, MatMulBroadcastAndVectors) {
  checkGradients("matmul-batched", {{DType::F32, {2, 1, 3, 4}}, {DType::F32, {3, 4, 2}}},
                 [](Graph& g, const std::vector<Value*>& p) { return op1(g, OpKind::MatMul, {p[0], p[1]}); });
  checkGradients("matmul-vec", {{DType::F32, {4}}, {DType::F32, {2, 4, 3}}},
                 [](Graph& g, const std::vector<Value*>& p) { return op1(g, OpKind::MatMul, {p[0], p[1]}); });
  checkGradients("matmul-mat-vec", {{DType::F32, {3, 4}}, {DType::F32, {4}}},
                 [](Graph& g, const std::vector<Value*>& p) { return op1(g, OpKind::MatMul, {p[0], p[1]}); });
}

TEST(AutodiffTest, BroadcastingArithmetic) {
  for (OpKind op : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div})
    checkGradients(opName(op), {{DType::F32, {2, 3, 4}}, {DType::F32, {3, 1}}},
                   [&](Graph& g, const std::vector<Value*>& p) { return op1(g, op, {p[0], p[1]}); },
                   1e-3, 1e-2, 0.5, 2.0);
  checkGradients("sum", {{DType::F32, {2, 3}}, {DType::F32, {3}}, {DType::F32, {2, 1}}},
                 [](Graph& g, const std::vector<Value*>& p) { return op1(g, OpKind::Sum, {p[0], p[1], p[2]}); });
}

TEST(AutodiffTest, DataMovement) {
  checkGradients("concat", {{DType::F32, {2, 3, 2}}, {DType::F32, {2, 1, 2}}},
                 [](Graph& g, const std::vector<Value*>& p) {
                   AttrMap a;
                   a.setInt("axis", 1);
                   return op1(g, OpKind::Concat, {p[0], p[1]}, a);
                 });
  checkGradients("split-one-used", {{DType::F32, {2, 5}}},
                 [](Graph& g, const std::vector<Value*>& p) -> Expected<Value*> {
                   AttrMap a;
                   a.setInt("axis", 1);
                   a.setInts("split", {2, 3});
                   HGP_ASSIGN_OR_RETURN(Node * n, g.addNode(OpKind::Split, {p[0]}, a, "", 2));
                   return n->output(1);
                 });
  checkGradients("slice-negative-step", {{DType::F32, {4, 6}}},
                 [](Graph& g, const std::vector<Value*>& p) {
                   AttrMap a;
                   a.setInts("starts", {1, 5});
                   a.setInts("ends", {4, 0});
                   a.setInts("steps", {2, -2});
                   return op1(g, OpKind::Slice, {p[0]}, a);
                 });
  checkGradients("reshape-transpose", {{DType::F32, {2, 3, 4}}},
                 [](Graph& g, const std::vector<Value*>& p) -> Expected<Value*> {
                   AttrMap t;
                   t.setInts("perm", {2, 0, 1});
                   HGP_ASSIGN_OR_RETURN(Value * x, op1(g, OpKind::Transpose, {p[0]}, t));
                   AttrMap r;
                   r.setInts("shape", {4, 6});
                   return op1(g, OpKind::Reshape, {x}, r);
                 });
  for (const char* mode : {"constant", "reflect", "edge"})
    checkGradients(std::string("pad-") + mode, {{DType::F32, {2, 3, 4}}},
                   [&](Graph& g, const std::vector<Value*>& p) {
                     AttrMap a;
                     a.setInts("pads", {0, 1, 2, 0, 2, 1});
                     a.setString("mode", mode);
                     a.setFloat("value", 0.5);
                     return op1(g, OpKind::Pad, {p[0]}, a);
                   });
  checkGradients("expand", {{DType::F32, {3, 1}}}, [](Graph& g, const std::vector<Value*>& p) {
    AttrMap a;
    a.setInts("shape", {2, 3, 4});
    return op1(g, OpKind::Expand, {p[0]}, a);
  });
}

TEST(AutodiffTest, ReductionsAndSoftmax) {
  for (OpKind op : {OpKind::ReduceMean, OpKind::ReduceSum})
    for (int keep = 0; keep < 2; ++keep)
      checkGradients(opName(op), {{DType::F32, {2, 3, 4}}}, [&](Graph& g, const std::vector<Value*>& p) {
        AttrMap a;
        a.setInts("axes", {0, 2});
        a.setInt("keepdims", keep);
        return op1(g, op, {p[0]}, a);
      });
  for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax})
    checkGradients(opName(op), {{DType::F32, {3, 5, 2}}}, [&](Graph& g, const std::vector<Value*>& p) {
      AttrMap a;
      a.setInt("axis", 1);
      return op1(g, op, {p[0]}, a);
    });
}

// Where, Max, Min and ReduceMax route the gradient; at random points (no ties, no decision within
// eps of flipping) central differences see exactly that routing.
TEST(AutodiffTest, SelectionOps) {
  for (OpKind op : {OpKind::Max, OpKind::Min})
    checkGradients(opName(op), {{DType::F32, {2, 3, 4}}, {DType::F32, {3, 1}}},
                   [&](Graph& g, const std::vector<Value*>& p) { return op1(g, op, {p[0], p[1]}); });
  // Where with a constant mask over [2, 3, 4], A broadcast from [3, 1], B full.
  checkGradients("where", {{DType::F32, {3, 1}}, {DType::F32, {2, 3, 4}}},
                 [](Graph& g, const std::vector<Value*>& p) -> Expected<Value*> {
                   TensorType mt{DType::F32, {2, 1, 4}};
                   auto m = std::make_shared<TensorData>();
                   m->type = mt;
                   m->bytes.resize(size_t(mt.bytes()));
                   float* f = reinterpret_cast<float*>(m->bytes.data());
                   for (int64_t i = 0; i < mt.numElements(); ++i) f[i] = float((i * 5 + 1) % 3 == 0);
                   HGP_ASSIGN_OR_RETURN(Value * c, g.addGraphValue("mask", TensorRole::Const, mt, m));
                   return op1(g, OpKind::Where, {c, p[0], p[1]});
                 });
  // Where with a mask computed from the parameters themselves (Greater), as torch.where(a > b, ...).
  checkGradients("where-greater", {{DType::F32, {4, 5}}, {DType::F32, {4, 5}}},
                 [](Graph& g, const std::vector<Value*>& p) -> Expected<Value*> {
                   HGP_ASSIGN_OR_RETURN(Value * c, op1(g, OpKind::Greater, {p[0], p[1]}));
                   HGP_ASSIGN_OR_RETURN(Value * sq, op1(g, OpKind::Mul, {p[1], p[1]}));
                   return op1(g, OpKind::Where, {c, p[0], sq});
                 });
  for (int keep = 0; keep < 2; ++keep)
    for (std::vector<int64_t> axes : {std::vector<int64_t>{1}, std::vector<int64_t>{0, 2}})
      checkGradients("reducemax", {{DType::F32, {3, 4, 5}}}, [&](Graph& g, const std::vector<Value*>& p) {
        AttrMap a;
        a.setInts("axes", axes);
        a.setInt("keepdims", keep);
        return op1(g, OpKind::ReduceMax, {p[0]}, a);
      });
}

TEST(AutodiffTest, DropoutUsesTheSameMaskBackward) {
  checkGradients("dropout", {{DType::F32, {4, 16}}}, [](Graph& g, const std::vector<Value*>& p) -> Expected<Value*> {
    auto it = std::make_shared<TensorData>();
    it->type = {DType::I64, {}};
    int64_t three = 3;
    it->bytes.assign(reinterpret_cast<uint8_t*>(&three), reinterpret_cast<uint8_t*>(&three) + 8);
    HGP_ASSIGN_OR_RETURN(Value * iter, g.addGraphValue("iter", TensorRole::State, it->type, it));
    AttrMap a;
    a.setFloat("ratio", 0.3);
    a.setInt("seed", 7);
    a.setInt("key", 1);
    return op1(g, OpKind::Dropout, {p[0], iter}, a);
  });
}

TEST(AutodiffTest, Losses) {
  checkGradients("cross-entropy", {{DType::F32, {4, 5}}}, [](Graph& g, const std::vector<Value*>& p) -> Expected<Value*> {
    HGP_ASSIGN_OR_RETURN(Value * labels, g.addGraphValue("labels", TensorRole::Const, {DType::I64, {4}}, labelData(4, 5)));
    AttrMap a;
    a.setFloat("label_smoothing", 0.1);
    return op1(g, OpKind::SoftmaxCrossEntropy, {p[0], labels}, a);
  }, 1e-2, 1e-2, -3, 3);
  checkGradients("mse", {{DType::F32, {4, 5}}}, [](Graph& g, const std::vector<Value*>& p) -> Expected<Value*> {
    HGP_ASSIGN_OR_RETURN(Value * labels, g.addGraphValue("labels", TensorRole::Const, {DType::I64, {4}}, labelData(4, 5)));
    AttrMap oh;
    oh.setInt("depth", 5);
    HGP_ASSIGN_OR_RETURN(Value * hot, op1(g, OpKind::OneHot, {labels}, oh));
    return op1(g, OpKind::MseLoss, {p[0], hot});
  }, 1e-2);
}

TEST(AutodiffTest, GradientsOfSharedValuesAddUp) {
  // x feeds two branches; its gradient is the sum of both.
  checkGradients("fan-out", {{DType::F32, {2, 3}}}, [](Graph& g, const std::vector<Value*>& p) -> Expected<Value*> {
    HGP_ASSIGN_OR_RETURN(Value * a, op1(g, OpKind::Tanh, {p[0]}));
    HGP_ASSIGN_OR_RETURN(Value * b, op1(g, OpKind::Mul, {p[0], p[0]}));
    return op1(g, OpKind::Add, {a, b});
  });
}

TEST(AutodiffTest, LossWithoutParametersIsAnError) {
  Graph g;
  Value* x = *g.addGraphValue("x", TensorRole::Input, {DType::F32, {2}});
  AttrMap a;
  a.setInts("axes", {0});
  a.setInt("keepdims", 0);
  g.addOutput(*op1(g, OpKind::ReduceSum, {x}, a));
  PassContext ctx;
  Status st = runPipeline(g, {"autodiff"}, ctx);
  EXPECT_EQ(st.code(), ErrorCode::InvalidModel);
}

} // namespace
} // namespace hgp
