// OpCoverageCases.h - one suite of plans that, together, run every op of the op table
// (runtime/plan/OpList.def), for the op coverage tests of both backends (Glow's OperatorTest
// with its backend skip list): tests/unit/OpCoverageTest.cpp on the CPU backend and
// tests/gpu/CudaOpCoverageTest.cpp on the CUDA backend against the CPU.
//
// A case is a small graph of one op family, differentiated so that its gradient ops run too
// (TestGraphs.h), or a whole compiled LeNet-5 training step: those bring the ops that only the
// compiler's passes make (the optimizer updates, the learning-rate schedule and step counter, the
// metrics ring, fused elementwise programs, mixed precision's casts and loss scaling, ImageInput).
// Each test collects the ops of the programs it ran without error and expects every op of the
// table to be among them or on that backend's skip list with its reason, and no skipped op to
// have run: an op added to the table without a case fails both tests until it has one.
#pragma once

#include "compiler/codegen/GenerateKernels.h"
#include "tests/gpu/TestGraphs.h"
#include "tools/hgpc/Compile.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace hgp::gputest::coverage {

struct Case {
  std::string name;
  std::string program = "step"; ///< The program the tests run ("train" for compiled cases).
  /// A compiled bf16/fp16 step: 16-bit results differ from the CPU's by rounding, so the CUDA
  /// test compares the loss only (tests/gpu/CudaMixedPrecisionTest.cpp holds those to bounds).
  bool mixedPrecision = false;
  /// Builds the plan; nullopt (with a test failure recorded) when it cannot.
  std::function<std::optional<EmittedPlan>()> make;
};

/// The ops a backend does not execute, each with the reason.
using SkipList = std::vector<std::pair<OpKind, std::string>>;

inline AttrMap attrsOf(std::initializer_list<std::pair<const char*, AttrValue>> kv) {
  AttrMap a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

using Builder = std::function<std::vector<Value*>(Graph&, const std::vector<Value*>&)>;

/// Parameters of the given shapes (f32), `build` over them, the test loss and autodiff.
inline Case graphCase(const std::string& name, std::vector<Shape> params, Builder build) {
  return {name, "step", false, [=]() -> std::optional<EmittedPlan> {
            Graph g(name);
            std::vector<Value*> ps;
            for (size_t i = 0; i < params.size(); ++i)
              ps.push_back(
                  addValue(g, "p" + std::to_string(i), TensorRole::Param, {DType::F32, params[i]}));
            std::vector<Value*> outs = build(g, ps);
            for (Value* v : outs)
              if (!v) return std::nullopt;
            return emit(g, differentiate(g, outs));
          }};
}

/// A graph whose outputs are bound as they are, without a loss (ops with no gradient).
inline Case plainCase(const std::string& name, std::function<std::vector<Value*>(Graph&)> build) {
  return {name, "step", false, [=]() -> std::optional<EmittedPlan> {
            Graph g(name);
            std::vector<Value*> outs = build(g);
            for (Value* v : outs)
              if (!v) return std::nullopt;
            return emit(g, bindOutputs(g, outs));
          }};
}

/// An elementwise chain and its gradient, fused by the fuse-elementwise pass, with the kernels
/// generated for sm_<arch> where NVRTC loads (the CPU backend runs the program without them).
inline Case fusedCase(int arch) {
  return {"fused-elementwise", "step", false, [=]() -> std::optional<EmittedPlan> {
            Graph g("fused-elementwise");
            TensorType t{DType::F32, {2, 3, 4}};
            Value* x = addValue(g, "p0", TensorRole::Param, t);
            Value* y = addValue(g, "p1", TensorRole::Param, t);
            Value* r = op1(g, OpKind::Relu, {op1(g, OpKind::Add, {x, y})});
            auto bindings = differentiate(g, {op1(g, OpKind::Mul, {r, x})});
            PassContext ctx;
            Status st = runPipeline(g, {"fuse-elementwise"}, ctx);
            EXPECT_TRUE(st.isOk()) << st.toString();
            std::optional<EmittedPlan> e = emit(g, bindings);
            if (!e) return e;
            st = generateFusedKernels(e->plan, arch, /*required=*/false);
            EXPECT_TRUE(st.isOk()) << st.toString();
            return e;
          }};
}

/// LeNet-5 (samples/lenet5.onnx) compiled for training at batch 8, one stream, no TF32.
inline Case lenetCase(const std::string& name, std::function<void(CompileOptions&)> tweak) {
  bool mixed = false;
  CompileOptions probe;
  tweak(probe);
  mixed = probe.precision == Precision::BF16 || probe.precision == Precision::FP16;
  return {name, "train", mixed, [=]() -> std::optional<EmittedPlan> {
            CompileOptions o;
            // $HGP_SOURCE_DIR first: on the GPU machine the build's own path does not exist.
            const char* root = std::getenv("HGP_SOURCE_DIR");
            o.modelPath = std::string(root ? root : HGP_SOURCE_DIR) + "/samples/lenet5.onnx";
            o.batch = 8;
            o.precision = Precision::FP32;
            o.maxStreams = 1;
            o.target = "h200";
            o.train.lr = 0.01;
            o.train.momentum = 0.9;
            tweak(o);
            auto c = compileModel(o);
            EXPECT_TRUE(c.hasValue()) << name << ": " << c.status().toString();
            if (!c.hasValue()) return std::nullopt;
            return std::move(c->emitted);
          }};
}

/// The cases; `arch` is the SM architecture fused kernels are generated for.
inline std::vector<Case> cases(int arch = 90) {
  using I = std::vector<int64_t>;
  auto A = [](std::initializer_list<std::pair<const char*, AttrValue>> kv) { return attrsOf(kv); };
  auto pool = [&](I k, I s, I pads) {
    return A({{"kernel_shape", k}, {"strides", s}, {"pads", pads}, {"ceil_mode", int64_t(0)}});
  };
  auto conv = [&](I strides, I pads, I dil, int64_t group) {
    return A({{"strides", strides}, {"pads", pads}, {"dilations", dil}, {"group", group}});
  };
  std::vector<Case> c;
  c.push_back(graphCase("conv", {{2, 4, 7, 6}, {6, 2, 3, 3}, {6}}, [=](Graph& g, auto& p) {
    return std::vector<Value*>{
        op1(g, OpKind::Conv, {p[0], p[1], p[2]}, conv({2, 1}, {1, 1, 1, 1}, {1, 2}, 2))};
  }));
  c.push_back(graphCase("convtranspose", {{2, 4, 4, 3}, {4, 3, 3, 3}, {6}}, [=](Graph& g, auto& p) {
    AttrMap a = conv({2, 2}, {1, 1, 1, 1}, {1, 1}, 2);
    a.setInts("output_padding", {1, 0});
    return std::vector<Value*>{op1(g, OpKind::ConvTranspose, {p[0], p[1], p[2]}, a)};
  }));
  c.push_back(graphCase("batchnorm-train", {{4, 3, 5, 7}, {3}, {3}}, [=](Graph& g, auto& p) {
    Node* bn = addNode(g, OpKind::BatchNormTrain, {p[0], p[1], p[2]}, A({{"epsilon", 1e-5}}));
    TensorType ch{DType::F32, {3}};
    Value* rm = addValue(g, "running_mean", TensorRole::State, ch);
    Value* rv = addValue(g, "running_var", TensorRole::State, ch, filled(ch, 1.f));
    Node* upd = addNode(g, OpKind::BnRunningUpdate, {rm, rv, bn->output(1), bn->output(2)},
                        A({{"momentum", 0.9}, {"unbiased", int64_t(1)}, {"count", int64_t(140)}}));
    g.addCarry(rm, upd->output(0));
    g.addCarry(rv, upd->output(1));
    return std::vector<Value*>{bn->output(0)};
  }));
  c.push_back(graphCase("batchnorm-inference", {{2, 3, 4, 4}, {3}, {3}}, [=](Graph& g, auto& p) {
    TensorType ch{DType::F32, {3}};
    Value* mean = addValue(g, "mean", TensorRole::State, ch, dataOf(ch, uniformBytes(ch, 5)));
    Value* var = addValue(g, "var", TensorRole::State, ch, dataOf(ch, uniformBytes(ch, 6, 0.5, 2)));
    return std::vector<Value*>{
        op1(g, OpKind::BatchNorm, {p[0], p[1], p[2], mean, var}, A({{"epsilon", 1e-5}}))};
  }));
  c.push_back(plainCase("bnstatsgrad", [=](Graph& g) {
    std::vector<Value*> ps;
    for (int i = 0; i < 4; ++i)
      ps.push_back(addValue(g, "p" + std::to_string(i), TensorRole::Param, {DType::F32, {5}}));
    Value* var = op1(g, OpKind::Mul, {ps[3], ps[3]}); // positive
    Node* n = addNode(g, OpKind::BnStatsGrad, {ps[0], ps[1], ps[2], var}, A({{"epsilon", 1e-5}}));
    return n ? n->outputs() : std::vector<Value*>{nullptr};
  }));
  c.push_back(graphCase("layernorm", {{2, 3, 4, 5}, {4, 5}, {4, 5}}, [=](Graph& g, auto& p) {
    Node* n = addNode(g, OpKind::LayerNorm, {p[0], p[1], p[2]},
                      A({{"axis", int64_t(2)}, {"epsilon", 1e-6}}));
    return std::vector<Value*>{n ? n->output(0) : nullptr};
  }));
  c.push_back(graphCase("lrn", {{2, 5, 3, 3}}, [=](Graph& g, auto& p) {
    return std::vector<Value*>{
        op1(g, OpKind::LRN, {p[0]},
            A({{"size", int64_t(3)}, {"alpha", 1e-2}, {"beta", 0.75}, {"bias", 1.0}}))};
  }));
  c.push_back(graphCase("activations", {{3, 4, 5}}, [=](Graph& g, auto& p) {
    Value* x = p[0];
    Value* pos = op1(g, OpKind::Sigmoid, {x}); // (0, 1): Log and Sqrt are defined there
    return std::vector<Value*>{op1(g, OpKind::Relu, {x}),
                               op1(g, OpKind::LeakyRelu, {x}, A({{"alpha", 0.1}})),
                               op1(g, OpKind::Clip, {x}, A({{"min", -0.5}, {"max", 0.6}})),
                               op1(g, OpKind::Tanh, {x}),
                               op1(g, OpKind::HardSigmoid, {x}, A({{"alpha", 0.2}, {"beta", 0.5}})),
                               op1(g, OpKind::HardSwish, {x}),
                               op1(g, OpKind::Silu, {x}),
                               op1(g, OpKind::Neg, {x}),
                               op1(g, OpKind::Scale, {x}, A({{"alpha", -1.5}})),
                               op1(g, OpKind::Gelu, {x}, A({{"approximate", std::string("none")}})),
                               op1(g, OpKind::Erf, {x}),
                               op1(g, OpKind::Log, {pos}),
                               op1(g, OpKind::Sqrt, {pos}),
                               op1(g, OpKind::Reciprocal, {op1(g, OpKind::Exp, {x})})};
  }));
  c.push_back(graphCase("pools", {{2, 3, 8, 8}}, [=](Graph& g, auto& p) {
    AttrMap avg = pool({3, 3}, {2, 2}, {1, 1, 1, 0});
    avg.setInt("count_include_pad", 0);
    return std::vector<Value*>{op1(g, OpKind::MaxPool, {p[0]}, pool({3, 3}, {2, 2}, {1, 1, 1, 1})),
                               op1(g, OpKind::AveragePool, {p[0]}, avg),
                               op1(g, OpKind::GlobalAveragePool, {p[0]})};
  }));
  c.push_back(graphCase(
      "gemm-matmul", {{3, 5}, {5, 4}, {4}, {2, 1, 3, 4}, {3, 4, 2}}, [=](Graph& g, auto& p) {
        return std::vector<Value*>{
            op1(g, OpKind::Gemm, {p[0], p[1], p[2]},
                A({{"transA", int64_t(0)}, {"transB", int64_t(0)}, {"alpha", 0.7}, {"beta", 1.3}})),
            op1(g, OpKind::MatMul, {p[3], p[4]})};
      }));
  c.push_back(graphCase("arithmetic", {{2, 3, 4}, {3, 1}, {2, 3, 4}}, [=](Graph& g, auto& p) {
    Value* away = op1(g, OpKind::Exp, {p[1]}); // a divisor away from zero
    return std::vector<Value*>{op1(g, OpKind::Add, {p[0], p[1]}), op1(g, OpKind::Sub, {p[0], p[1]}),
                               op1(g, OpKind::Mul, {p[0], p[1]}), op1(g, OpKind::Div, {p[0], away}),
                               op1(g, OpKind::Sum, {p[0], p[1], p[2]})};
  }));
  c.push_back(graphCase("data-movement", {{2, 3, 4}, {2, 1, 4}}, [=](Graph& g, auto& p) {
    Node* split =
        addNode(g, OpKind::Split, {p[0]}, A({{"axis", int64_t(1)}, {"split", I{1, 2}}}), 2);
    Value* t = op1(g, OpKind::Transpose, {p[0]}, A({{"perm", I{2, 0, 1}}}));
    return std::vector<Value*>{
        op1(g, OpKind::Concat, {p[0], p[1]}, A({{"axis", int64_t(1)}})),
        split ? split->output(1) : nullptr,
        op1(g, OpKind::Slice, {p[0]},
            A({{"starts", I{0, 0, 3}}, {"ends", I{2, 2, 0}}, {"steps", I{1, 1, -1}}})),
        op1(g, OpKind::Reshape, {t}, A({{"shape", I{4, 6}}})),
        op1(g, OpKind::Pad, {p[0]},
            A({{"pads", I{0, 1, 2, 0, 2, 1}}, {"mode", std::string("constant")}, {"value", 0.5}})),
        op1(g, OpKind::Expand, {p[1]}, A({{"shape", I{3, 2, 1, 4}}})),
        op1(g, OpKind::Cast, {op1(g, OpKind::Cast, {p[0]}, A({{"to", std::string("bf16")}}))},
            A({{"to", std::string("f32")}}))};
  }));
  c.push_back(graphCase("reductions-softmax", {{3, 4, 5}}, [=](Graph& g, auto& p) {
    return std::vector<Value*>{
        op1(g, OpKind::ReduceSum, {p[0]}, A({{"axes", I{0, 2}}, {"keepdims", int64_t(0)}})),
        op1(g, OpKind::ReduceMean, {p[0]}, A({{"axes", I{1}}, {"keepdims", int64_t(1)}})),
        op1(g, OpKind::Softmax, {p[0]}, A({{"axis", int64_t(1)}})),
        op1(g, OpKind::LogSoftmax, {p[0]}, A({{"axis", int64_t(2)}}))};
  }));
  c.push_back(graphCase("random", {{4, 16}}, [=](Graph& g, auto& p) {
    Value* it = addValue(g, "iter", TensorRole::State, {DType::I64, {}}, scalarI64(3));
    Value* mask = op1(g, OpKind::Bernoulli, {p[0], it},
                      A({{"p", 0.8}, {"seed", int64_t(3)}, {"key", int64_t(9)}}));
    return std::vector<Value*>{op1(g, OpKind::Dropout, {p[0], it},
                                   A({{"ratio", 0.3}, {"seed", int64_t(7)}, {"key", int64_t(11)}})),
                               op1(g, OpKind::Mul, {p[0], mask})};
  }));
  // Max, Min, the comparisons, Where and ReduceMax (with the gradient ops Max, Min and ReduceMax
  // route through: Equal, Greater, Less, Where, ReduceSum), RandomNormal.
  c.push_back(graphCase("selection", {{2, 3, 4}, {3, 1}, {2, 3, 4}}, [=](Graph& g, auto& p) {
    Value* it = addValue(g, "iter", TensorRole::State, {DType::I64, {}}, scalarI64(5));
    Value* gt = op1(g, OpKind::Greater, {p[0], p[2]});
    Value* lt = op1(g, OpKind::Less, {p[1], p[0]});
    Value* eq = op1(g, OpKind::Equal, {p[0], op1(g, OpKind::Max, {p[0], p[2]})});
    Value* normal = op1(g, OpKind::RandomNormal, {p[2], it},
                        A({{"mean", 0.5}, {"scale", 2.0}, {"seed", int64_t(3)}, {"key", int64_t(4)}}));
    return std::vector<Value*>{
        op1(g, OpKind::Max, {p[0], p[1]}), op1(g, OpKind::Min, {p[0], p[1]}),
        op1(g, OpKind::Where, {gt, p[0], p[1]}), op1(g, OpKind::Mul, {p[2], lt}),
        op1(g, OpKind::Mul, {p[0], eq}), op1(g, OpKind::Mul, {p[2], normal}),
        op1(g, OpKind::ReduceMax, {p[0]}, A({{"axes", I{1}}, {"keepdims", int64_t(0)}})),
        op1(g, OpKind::ReduceMax, {p[2]}, A({{"axes", I{0, 2}}, {"keepdims", int64_t(1)}}))};
  }));
  // The Casts of a graph boundary's bool: f32 -> bool -> f32.
  c.push_back(plainCase("bool-casts", [=](Graph& g) {
    Value* x = addValue(g, "x", TensorRole::Param, {DType::F32, {3, 5}});
    Value* b = op1(g, OpKind::Cast, {op1(g, OpKind::Sub, {x, x})}, A({{"to", std::string("bool")}}));
    Value* b2 = op1(g, OpKind::Cast, {x}, A({{"to", std::string("bool")}}));
    return std::vector<Value*>{b, op1(g, OpKind::Cast, {b2}, A({{"to", std::string("f32")}}))};
  }));
  c.push_back(graphCase("losses", {{4, 10}, {4, 10}}, [=](Graph& g, auto& p) {
    Value* labels = addValue(g, "labels", TensorRole::Input, {DType::I64, {4}}); // [0, 10)
    Value* hot = op1(g, OpKind::OneHot, {labels}, A({{"depth", int64_t(10)}}));
    return std::vector<Value*>{
        op1(g, OpKind::SoftmaxCrossEntropy, {p[0], labels}, A({{"label_smoothing", 0.1}})),
        op1(g, OpKind::MseLoss, {p[1], hot}), op1(g, OpKind::CountCorrect, {p[0], labels})};
  }));
  c.push_back(plainCase("allreduce-one-rank", [=](Graph& g) {
    std::vector<Value*> local;
    for (Shape s : {Shape{3, 5}, Shape{7}}) {
      Value* v =
          addValue(g, "p" + std::to_string(local.size()), TensorRole::Param, {DType::F32, s});
      local.push_back(op1(g, OpKind::Scale, {v}, A({{"alpha", 2.0}})));
    }
    Node* n =
        addNode(g, OpKind::AllReduce, local,
                A({{"reduce", std::string("avg")}, {"ranks", int64_t(2)}, {"bucket", int64_t(0)}}),
                int(local.size()));
    return n ? n->outputs() : std::vector<Value*>{nullptr};
  }));
  c.push_back(plainCase("device-batch", [=](Graph& g) {
    // Five 4 x 3 two-channel images; rows 4, 0, 4 with RandomCrop padding 1 and a flip of
    // p = 0.5 drawn on the device (--data-on-device).
    TensorType dt{DType::U8, {5, 4, 3, 2}}, rt{DType::I64, {3}}, drt{DType::I64, {4}};
    std::vector<uint8_t> px(size_t(dt.numElements()));
    for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(7 * i + 1);
    auto i64s = [](std::vector<int64_t> v) {
      std::vector<uint8_t> b(v.size() * 8);
      std::memcpy(b.data(), v.data(), b.size());
      return b;
    };
    double half = 0.5;
    int64_t halfBits = 0;
    std::memcpy(&halfBits, &half, 8);
    Value* data = addValue(g, "data", TensorRole::State, dt, dataOf(dt, px));
    Value* rows = addValue(g, "rows", TensorRole::State, rt, dataOf(rt, i64s({4, 0, 4})));
    Value* draw = addValue(g, "draw", TensorRole::State, drt, dataOf(drt, i64s({11, 2, 1, halfBits})));
    Node* n = addNode(g, OpKind::DeviceBatch, {data, rows, draw}, {}, 2);
    return n ? n->outputs() : std::vector<Value*>{nullptr};
  }));
  c.push_back(fusedCase(arch));
  c.push_back(lenetCase("lenet5-sgd", [](CompileOptions&) {}));
  // eps 1e-2: Adam's first update is lr x sign(g); a large eps keeps an element whose gradient
  // is within rounding of zero from flipping a whole lr between the backends.
  c.push_back(lenetCase("lenet5-adam", [](CompileOptions& o) {
    o.train.optimizer = "adam";
    o.train.eps = 1e-2;
    o.train.schedule = "cosine";
    o.train.tMax = 100;
  }));
  c.push_back(lenetCase("lenet5-fp16", [](CompileOptions& o) { o.precision = Precision::FP16; }));
  c.push_back(lenetCase("lenet5-bf16", [](CompileOptions& o) { o.precision = Precision::BF16; }));
  c.push_back(lenetCase("lenet5-pixels-u8", [](CompileOptions& o) { o.train.pixels = "u8"; }));
  return c;
}

/// The ops of `program` in `plan`.
inline std::set<OpKind> opsOf(const Plan& plan, const std::string& program) {
  std::set<OpKind> ops;
  if (const PlanProgram* p = plan.findProgram(program))
    for (const PlanStep& s : p->steps) ops.insert(s.op);
  return ops;
}

/// Expects every op of the table to be in `ran` or in `skips`, no op to be in both, and every
/// skip to give a reason. `backend` names the backend in the messages.
inline void expectCovered(const std::set<OpKind>& ran, const SkipList& skips,
                          const std::string& backend) {
  std::map<OpKind, std::string> skipped(skips.begin(), skips.end());
  for (int i = 0; i < kNumOps; ++i) {
    OpKind op = OpKind(i);
    auto it = skipped.find(op);
    if (it == skipped.end()) {
      EXPECT_TRUE(ran.count(op)) << opName(op) << " ran in no case on the " << backend
                                 << " backend: add a case to tests/gpu/OpCoverageCases.h, or "
                                    "put it on the skip list with the reason";
    } else {
      EXPECT_FALSE(it->second.empty()) << opName(op) << " is skipped without a reason";
      EXPECT_FALSE(ran.count(op)) << opName(op) << " is on the " << backend << " skip list ("
                                  << it->second << ") but ran: remove the skip";
    }
  }
}

} // namespace hgp::gputest::coverage
