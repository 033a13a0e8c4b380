// FusedTestGraphs.h - graphs for the fusion tests (unit: FuseElementwiseTest.cpp, GPU:
// tests/gpu/CudaFusedElementwiseTest.cpp): a chain that uses every op the fused-kernel generator supports,
// in f32, bf16 or f16, the activations' chain, a squeeze-excitation backward with a broadcast
// gate, and helpers to emit and run a graph's plan on a backend.
#pragma once

#include "compiler/plan/PlanEmitter.h"
#include "passes/Pass.h"
#include "runtime/Backend.h"
#include "runtime/plan/Half.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

namespace hgp::fusiontest {

/// Runs fuse-elementwise alone on `g`.
inline Status fuse(Graph& g) {
  PassContext ctx;
  return runPipeline(g, {"fuse-elementwise"}, ctx);
}

/// The FusedElementwise nodes of `g`, in graph order.
inline std::vector<const Node*> fusedNodes(const Graph& g) {
  std::vector<const Node*> out;
  for (const Node* n : g.nodes())
    if (n->op() == OpKind::FusedElementwise) out.push_back(n);
  return out;
}

inline Value* node(Graph& g, OpKind op, std::vector<Value*> in, AttrMap a = {}) {
  auto n = g.addNode(op, std::move(in), std::move(a));
  EXPECT_TRUE(n.hasValue()) << opName(op) << ": " << n.status().toString();
  return n.hasValue() ? (*n)->output(0) : nullptr;
}

inline AttrMap alpha(double v) {
  AttrMap a;
  a.setFloat("alpha", v);
  return a;
}

inline AttrMap bounds(double lo, double hi) {
  AttrMap a;
  a.setFloat("min", lo);
  a.setFloat("max", hi);
  return a;
}

inline Value* cast(Graph& g, Value* v, DType to) {
  if (v->dtype() == to) return v;
  AttrMap a;
  a.setString("to", dtypeName(to));
  return node(g, OpKind::Cast, {v}, a);
}

/// Inputs a, b, c (f32; the feeds keep c in [0.5, 1.5)), every fusible op once or more in dtype
/// `d`, results "out.0" (f32), "out.1" (an intermediate also used inside the chain, dtype d),
/// "out.2" and "out.3" (dtype d). Every node is fusible, so the pass makes one FusedElementwise of it all.
inline std::map<std::string, std::string> buildChain(Graph& g, DType d, const Shape& shape) {
  TensorType t{DType::F32, shape};
  Value* a = *g.addGraphValue("a", TensorRole::Input, t);
  Value* b = *g.addGraphValue("b", TensorRole::Input, t);
  Value* c = *g.addGraphValue("c", TensorRole::Input, t);
  Value *A = cast(g, a, d), *B = cast(g, b, d), *C = cast(g, c, d);
  Value* s = node(g, OpKind::Sum, {A, B, C});
  Value* r = node(g, OpKind::ReluBwd, {A, s});
  Value* x = node(g, OpKind::Add, {r, B});
  Value* u = node(g, OpKind::Relu, {x});
  Value* l = node(g, OpKind::LeakyRelu, {x}, alpha(0.1));
  Value* m = node(g, OpKind::Mul, {l, B});
  Value* e = node(g, OpKind::Sub, {m, u});
  Value* f = node(g, OpKind::Scale, {e}, alpha(0.3));
  Value* h = node(g, OpKind::Neg, {f});
  Value* k = node(g, OpKind::Clip, {h}, bounds(-0.25, 0.35));
  Value* kb = node(g, OpKind::ClipBwd, {A, h}, bounds(-0.25, 0.35));
  Value* lb = node(g, OpKind::LeakyReluBwd, {kb, e}, alpha(0.1));
  Value* q = node(g, OpKind::Div, {node(g, OpKind::Add, {lb, k}), C});
  Value* y = cast(g, q, DType::F32);
  AttrMap upper; // a Clip bounded on one side only
  upper.setFloat("max", 0.2);
  Value* k2 = node(g, OpKind::Clip, {h}, upper);
  g.addOutput(y);
  g.addOutput(x);
  g.addOutput(k);
  g.addOutput(k2);
  return {{"out.0", y->name()}, {"out.1", x->name()}, {"out.2", k->name()}, {"out.3", k2->name()}};
}

/// The activations and their gradients, every one once or more in dtype `d`, over inputs a, b
/// (f32, [-1, 1)) and c (f32, [0.5, 1.5)): "out.0" = SiLU, Tanh, HardSigmoid and HardSwish (of
/// about 4a, so that every piece of them is hit) added up; "out.1" = Exp, Log, Sqrt, Reciprocal
/// (of s/4 + c > 0) and Erf added up; "out.2" = the four gradients (of dY = s b) added up; "out.3" = s =
/// sigmoid(a), also read inside. Every node reads a value of the chain started by the Sigmoid, so
/// the pass makes one FusedElementwise of it all (and, in 16 bits, leaves the Casts of b and c).
inline std::map<std::string, std::string> buildActivationChain(Graph& g, DType d, const Shape& shape) {
  TensorType t{DType::F32, shape};
  Value* a = *g.addGraphValue("a", TensorRole::Input, t);
  Value* b = *g.addGraphValue("b", TensorRole::Input, t);
  Value* c = *g.addGraphValue("c", TensorRole::Input, t);
  Value *A = cast(g, a, d), *B = cast(g, b, d), *C = cast(g, c, d);
  AttrMap hard = alpha(0.2), torchHard = alpha(1.0 / 6);
  hard.setFloat("beta", 0.5);
  torchHard.setFloat("beta", 0.5);
  Value* s = node(g, OpKind::Sigmoid, {A});
  Value* silu = node(g, OpKind::Mul, {A, s});
  Value* th = node(g, OpKind::Tanh, {silu});
  Value* a4 = node(g, OpKind::Scale, {node(g, OpKind::Sub, {node(g, OpKind::Add, {A, s}), s})}, alpha(4.0));
  Value* hs = node(g, OpKind::HardSigmoid, {a4}, hard);
  Value* hw = node(g, OpKind::HardSwish, {a4});
  Value* y0 = node(g, OpKind::Sum, {silu, th, hs, hw});
  // A chain value first: a node joins the group of its first operand's producer, and in 16
  // bits B and C are Casts of groups of their own.
  Value* bs = node(g, OpKind::Mul, {s, B});
  Value* pos = node(g, OpKind::Add, {node(g, OpKind::Scale, {s}, alpha(0.25)), C});
  Value* y1 = node(g, OpKind::Sum, {node(g, OpKind::Exp, {bs}), node(g, OpKind::Log, {pos}),
                                    node(g, OpKind::Sqrt, {pos}), node(g, OpKind::Reciprocal, {pos}),
                                    node(g, OpKind::Erf, {bs})});
  Value* y2 = node(g, OpKind::Sum, {node(g, OpKind::SigmoidBwd, {bs, s}), node(g, OpKind::TanhBwd, {bs, th}),
                                    node(g, OpKind::HardSigmoidBwd, {bs, a4}, torchHard),
                                    node(g, OpKind::HardSwishBwd, {bs, a4})});
  for (Value* v : {y0, y1, y2, s}) g.addOutput(v);
  return {{"out.0", y0->name()}, {"out.1", y1->name()}, {"out.2", y2->name()}, {"out.3", s->name()}};
}

/// GELU in both forms and both gradients in dtype `d` over inputs a, b (f32, [-1, 1)): with
/// x = 4a, "out.0" = Gelu(x) + Gelu_tanh(x); "out.1" = GeluBwd(dy, x) + GeluBwd_tanh(dy, x) with
/// dy = x b (a chain value first, so that every node joins the chain of the Scale).
inline std::map<std::string, std::string> buildGeluChain(Graph& g, DType d, const Shape& shape) {
  TensorType t{DType::F32, shape};
  Value* a = *g.addGraphValue("a", TensorRole::Input, t);
  Value* b = *g.addGraphValue("b", TensorRole::Input, t);
  Value *A = cast(g, a, d), *B = cast(g, b, d);
  AttrMap erf, tanh;
  erf.setString("approximate", "none");
  tanh.setString("approximate", "tanh");
  Value* x = node(g, OpKind::Scale, {A}, alpha(4.0));
  Value* y0 = node(g, OpKind::Sum, {node(g, OpKind::Gelu, {x}, erf), node(g, OpKind::Gelu, {x}, tanh)});
  Value* dy = node(g, OpKind::Mul, {x, B});
  Value* y1 = node(g, OpKind::Sum, {node(g, OpKind::GeluBwd, {dy, x}, erf), node(g, OpKind::GeluBwd, {dy, x}, tanh)});
  g.addOutput(y0);
  g.addOutput(y1);
  return {{"out.0", y0->name()}, {"out.1", y1->name()}};
}

/// ConvNeXt's per-channel operands in dtype `d`, over f32 inputs a, b (the full shape) and "gate"
/// (per channel): channels-last (`nhwc`, full = [N,H,W,C]) the first pointwise layer's bias [C]
/// and its GELU, "out.0" = Gelu(a + gate); channels-first the layer scale [C,1,1] and the
/// residual, "out.0" = a * gate + b, and its gradient's product "out.1" = b * gate. The
/// per-channel operand broadcasts along the batch too (FusedOperandMap's m), so the pass makes one
/// step of each chain.
inline std::map<std::string, std::string> buildPerChannel(Graph& g, DType d, const Shape& full, bool nhwc) {
  TensorType t{DType::F32, full};
  Value* a = *g.addGraphValue("a", TensorRole::Input, t);
  Value* b = *g.addGraphValue("b", TensorRole::Input, t);
  Shape ch = nhwc ? Shape{full[3]} : Shape{full[1], 1, 1};
  Value* gate = *g.addGraphValue("gate", TensorRole::Input, {DType::F32, ch});
  Value *A = cast(g, a, d), *B = cast(g, b, d), *G = cast(g, gate, d);
  Value *y0, *y1;
  if (nhwc) {
    AttrMap erf;
    erf.setString("approximate", "none");
    y0 = node(g, OpKind::Gelu, {node(g, OpKind::Add, {A, G})}, erf);
    y1 = node(g, OpKind::Mul, {y0, B});
  } else {
    y0 = node(g, OpKind::Add, {node(g, OpKind::Mul, {A, G}), B});
    y1 = node(g, OpKind::Mul, {B, G});
  }
  g.addOutput(y0);
  g.addOutput(y1);
  return {{"out.0", y0->name()}, {"out.1", y1->name()}};
}

/// The gate's shape for a [N,C,H,W] tensor (channels-last: [N,H,W,C] and [N,1,1,C]).
inline Shape gateShape(const Shape& full, bool nhwc) {
  return nhwc ? Shape{full[0], 1, 1, full[3]} : Shape{full[0], full[1], 1, 1};
}

/// A squeeze-excitation block's backward after a SiLU, as autodiff writes it, in dtype `d` over
/// f32 inputs a (dY of the gated tensor), b (the SiLU's input x), c (the pooling gradient, already
/// spread over the plane) and "gate" (in gateShape): s = sigmoid(x) and h = x * s (the forward
/// values the backward reads), dh = Sum(dY * gate, c), dx = Sum(dh * s, SigmoidBwd(dh * x, s))
/// ("out.0"), and the gate's gradient before its ReduceSum, dY * h ("out.1"). In f32 the pass
/// makes two FusedElementwise steps: the SiLU with dY * h (dY is an input here, so that Mul may
/// join h's group; results s and dY * h), and dh..dx with the broadcast gate (result dx).
/// With `pooled`, c is the pooled gradient itself (in gateShape) and the backward spreads it with
/// a GlobalAveragePoolBwd, as autodiff writes it; the pass then folds that in too (one step).
inline std::map<std::string, std::string> buildSeBackward(Graph& g, DType d, const Shape& full, bool nhwc,
                                                          bool pooled = false) {
  TensorType t{DType::F32, full};
  Value* a = *g.addGraphValue("a", TensorRole::Input, t);
  Value* b = *g.addGraphValue("b", TensorRole::Input, t);
  Value* c = *g.addGraphValue("c", TensorRole::Input, pooled ? TensorType{DType::F32, gateShape(full, nhwc)} : t);
  Value* gate = *g.addGraphValue("gate", TensorRole::Input, {DType::F32, gateShape(full, nhwc)});
  Value *dy = cast(g, a, d), *x = cast(g, b, d), *dgap = cast(g, c, d), *G = cast(g, gate, d);
  if (pooled) {
    AttrMap spread;
    spread.setInts("x_shape", nhwc ? std::vector<int64_t>{full[0], full[3], full[1], full[2]}
                                   : std::vector<int64_t>(full.begin(), full.end()));
    if (nhwc) spread.setString("layout", "nhwc");
    dgap = node(g, OpKind::GlobalAveragePoolBwd, {dgap}, spread);
  }
  Value* s = node(g, OpKind::Sigmoid, {x});
  Value* h = node(g, OpKind::Mul, {x, s});
  Value* dh = node(g, OpKind::Sum, {node(g, OpKind::Mul, {dy, G}), dgap});
  Value* dx = node(g, OpKind::Sum, {node(g, OpKind::Mul, {dh, s}),
                                    node(g, OpKind::SigmoidBwd, {node(g, OpKind::Mul, {dh, x}), s})});
  Value* dgate = node(g, OpKind::Mul, {dy, h});
  g.addOutput(dx);
  g.addOutput(dgate);
  return {{"out.0", dx->name()}, {"out.1", dgate->name()}};
}

inline AttrMap dropout(double ratio, int64_t seed, int64_t key) {
  AttrMap a;
  a.setFloat("ratio", ratio);
  a.setInt("seed", seed);
  a.setInt("key", key);
  return a;
}

/// A classifier's dropout chains in dtype `d`, over inputs a, b (f32, cast to d) and the i64
/// scalar input "iter": the forward epilogue y = Relu(A), "out.0" = Dropout(y, iter); the backward
/// "out.1" = ReluBwd(DropoutBwd(B, iter), y) (the same site: the same mask); "out.2" = Dropout of
/// A + y at another site (ratio 0.3, another key); "out.3" = Dropout(y, iter) with ratio 0 (a
/// copy). The fuse-elementwise pass makes two FusedElementwise steps, forward and backward, that
/// hold all four dropouts.
inline std::map<std::string, std::string> buildDropoutChain(Graph& g, DType d, const Shape& shape) {
  TensorType t{DType::F32, shape};
  Value* a = *g.addGraphValue("a", TensorRole::Input, t);
  Value* b = *g.addGraphValue("b", TensorRole::Input, t);
  Value* iter = *g.addGraphValue("iter", TensorRole::Input, {DType::I64, {}});
  Value *A = cast(g, a, d), *B = cast(g, b, d);
  Value* y = node(g, OpKind::Relu, {A});
  Value* z = node(g, OpKind::Dropout, {y, iter}, dropout(0.5, 1234, 7));
  Value* dx = node(g, OpKind::ReluBwd, {node(g, OpKind::DropoutBwd, {B, iter}, dropout(0.5, 1234, 7)), y});
  Value* w = node(g, OpKind::Dropout, {node(g, OpKind::Add, {A, y}), iter}, dropout(0.3, 1234, 11));
  Value* q = node(g, OpKind::Dropout, {y, iter}, dropout(0.0, 1234, 13));
  std::map<std::string, std::string> out;
  int k = 0;
  for (Value* v : {z, dx, w, q}) {
    Value* r = cast(g, v, DType::F32);
    g.addOutput(r);
    out["out." + std::to_string(k++)] = r->name();
  }
  return out;
}

inline int countOps(const Graph& g, OpKind op) {
  int n = 0;
  for (const Node* x : g.nodes()) n += x->op() == op;
  return n;
}

inline std::optional<EmittedPlan> emitStep(const Graph& g,
                                           std::map<std::string, std::string> bindings) {
  EmitOptions eo;
  eo.modelName = g.name();
  eo.meta.setString("precision", "fp32");
  auto e = emitPlan({ProgramSource{"step", &g, std::move(bindings)}}, eo);
  EXPECT_TRUE(e.hasValue()) << e.status().toString();
  if (!e.hasValue()) return std::nullopt;
  return std::move(*e);
}

/// Feeds a, b uniform in [-1, 1) and c in [0.5, 1.5), with specials (0, -0, 1e-40 subnormal,
/// values on bf16/f16 rounding ties) sprinkled in; keyed by seed.
inline std::vector<float> feed(const std::string& name, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed * 1000003 + std::hash<std::string>()(name));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float x = u(rng);
    if (name == "c") x = 1.0f + 0.5f * x;
    else if (i % 17 == 3) x = 0.f;
    else if (i % 17 == 5) x = -0.f;
    else if (i % 17 == 7) x = 1.00390625f; // 1 + 2^-8: a bf16 tie
    else if (i % 17 == 11) x = 1e-40f;
    v[size_t(i)] = x;
  }
  return v;
}

/// Runs program "step" of `e` on backend `b` once after feeding a, b, c (those the plan has) and
/// the i64 "iter" (when it has one) with `iter`; the bytes of every binding "out.k".
inline std::map<std::string, std::vector<uint8_t>> runStep(Backend& be, const EmittedPlan& e,
                                                           uint64_t seed, int64_t iter = 0) {
  std::map<std::string, std::vector<uint8_t>> out;
  const Plan& p = e.plan;
  Status st = be.load(p, InitData{e.data, {}});
  EXPECT_TRUE(st.isOk()) << st.toString();
  if (!st) return out;
  if (int t = p.findTensor("iter"); t >= 0) {
    EXPECT_TRUE(be.write(t, &iter).isOk());
  }
  for (const char* name : {"a", "b", "c", "gate"}) {
    int t = p.findTensor(name);
    if (t < 0) continue;
    std::vector<float> v = feed(name, p.tensors[size_t(t)].type.numElements(), seed);
    EXPECT_TRUE(be.write(t, v.data()).isOk());
  }
  st = be.run("step");
  EXPECT_TRUE(st.isOk()) << st.toString();
  for (const auto& [name, t] : p.bindings) {
    std::vector<uint8_t> bytes(size_t(p.tensors[size_t(t)].bytes()));
    EXPECT_TRUE(be.read(t, bytes.data()).isOk());
    out[name] = std::move(bytes);
  }
  return out;
}

} // namespace hgp::fusiontest
