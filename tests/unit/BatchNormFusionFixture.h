// BatchNormFusionFixture.h - what the fuse-batch-norm tests share (FuseBatchNormTest.cpp,
// FuseBatchNormActivationTest.cpp): small training graphs around a BatchNorm, prepared with
// autodiff and optionally the fusion passes, and a run of their plan on the CPU backend, so that
// a fused graph can be compared with the unfused one.
#pragma once

#include "compiler/plan/PlanEmitter.h"
#include "ir/Printer.h"
#include "passes/Pass.h"
#include "passes/Pipeline.h"
#include "runtime/Backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <random>

namespace hgp::bnfusion {

using Params = std::vector<Value*>;
using Builder = std::function<std::vector<Value*>(Graph&, const Params&)>;

inline TensorType f32(Shape s) {
  return {DType::F32, std::move(s)};
}

inline std::shared_ptr<TensorData> uniform(const TensorType& t, uint64_t seed, float lo = -1,
                                           float hi = 1) {
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

inline Value* param(Graph& g, const std::string& name, TensorType t, uint64_t seed) {
  auto v = g.addGraphValue(name, TensorRole::Param, t, uniform(t, seed));
  EXPECT_TRUE(v.hasValue()) << v.status().toString();
  return *v;
}

inline Value* op1(Graph& g, OpKind op, std::vector<Value*> in, AttrMap a = {}) {
  auto n = g.addNode(op, std::move(in), std::move(a), opName(op));
  EXPECT_TRUE(n.hasValue()) << n.status().toString();
  return (*n)->output(0);
}

inline AttrMap eps() {
  AttrMap a;
  a.setFloat("epsilon", 1e-5);
  return a;
}

inline Value* bnTrain(Graph& g, Value* x, Value* scale, Value* bias) {
  return op1(g, OpKind::BatchNormTrain, {x, scale, bias}, eps());
}

/// A graph over params x[N,C,H,W], scale[C], bias[C] and s[N,C,H,W] (the residual), built by
/// `body`, with loss = sum_k sum(out_k * r_k) and its backward pass (autodiff), in `precision`
/// (the mixed-precision pass first for bf16/f16, results cast back to f32), and fused when
/// `fuse`. Bindings: "loss", "out.k" and "grad.<param>".
struct Prepared {
  std::unique_ptr<Graph> g;
  std::map<std::string, std::string> bindings;
  PassContext ctx;
};

inline Prepared prepare(const Builder& body, Precision precision, bool fuse,
                        Shape x = {4, 3, 5, 6}) {
  Prepared p;
  p.g = std::make_unique<Graph>("fuse");
  Graph& g = *p.g;
  int64_t c = x[1];
  Params ps = {param(g, "x", f32(x), 1), param(g, "scale", f32({c}), 2),
               param(g, "bias", f32({c}), 3), param(g, "s", f32(x), 4)};
  std::vector<Value*> outs = body(g, ps);
  p.ctx.precision = precision;
  if (isMixedPrecision(precision)) {
    for (Value* v : outs) g.addOutput(v);
    Status st = runPipeline(g, {"mixed-precision"}, p.ctx);
    EXPECT_TRUE(st.isOk()) << st.toString();
    outs.clear();
    for (Value* v : g.outputs()) {
      AttrMap a;
      a.setString("to", "f32");
      outs.push_back(v->dtype() == DType::F32 ? v : op1(g, OpKind::Cast, {v}, a));
    }
    g.mutableOutputs().clear();
  }
  std::vector<Value*> terms;
  for (size_t k = 0; k < outs.size(); ++k) {
    auto r = g.addGraphValue("r" + std::to_string(k), TensorRole::Const, outs[k]->type(),
                             uniform(outs[k]->type(), 10 + k));
    Value* prod = op1(g, OpKind::Mul, {outs[k], *r});
    AttrMap ra;
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < prod->rank(); ++i) axes.push_back(i);
    ra.setInts("axes", axes);
    ra.setInt("keepdims", 0);
    terms.push_back(op1(g, OpKind::ReduceSum, {prod}, ra));
  }
  Value* loss = terms.size() == 1 ? terms[0] : op1(g, OpKind::Sum, terms);
  g.addOutput(loss);
  p.bindings["loss"] = loss->name();
  for (size_t k = 0; k < outs.size(); ++k) {
    g.addOutput(outs[k]);
    p.bindings["out." + std::to_string(k)] = outs[k]->name();
  }
  std::vector<std::string> passes = {"autodiff"};
  if (fuse) passes.insert(passes.end(), {"fuse-batch-norm", "fuse-gradient-sums"});
  Status st = runPipeline(g, passes, p.ctx);
  EXPECT_TRUE(st.isOk()) << st.toString() << "\n" << printGraph(g);
  for (auto& [v, grad] : p.ctx.paramGrads) {
    g.addOutput(grad);
    p.bindings["grad." + v->name()] = grad->name();
  }
  return p;
}

inline size_t count(const Graph& g, OpKind op) {
  return size_t(std::count_if(g.nodes().begin(), g.nodes().end(),
                              [&](const Node* n) { return n->op() == op; }));
}

inline const Node* find(const Graph& g, OpKind op) {
  for (const Node* n : g.nodes())
    if (n->op() == op) return n;
  return nullptr;
}

/// Runs the plan of `p` on the CPU backend (parameters as initialized) and returns every bound
/// tensor's bytes.
inline std::map<std::string, std::vector<uint8_t>> runOnCpu(const Prepared& p) {
  EmitOptions eo;
  eo.modelName = "fuse";
  auto e = emitPlan({ProgramSource{"step", p.g.get(), p.bindings}}, eo);
  EXPECT_TRUE(e.hasValue()) << e.status().toString();
  if (!e.hasValue()) return {};
  auto b = createCpuBackend();
  Status st = b->load(e->plan, InitData{e->data, {}});
  EXPECT_TRUE(st.isOk()) << st.toString();
  st = b->run("step");
  EXPECT_TRUE(st.isOk()) << st.toString();
  std::map<std::string, std::vector<uint8_t>> out;
  for (const auto& [name, idx] : e->plan.bindings) {
    std::vector<uint8_t>& bytes = out[name];
    bytes.resize(size_t(e->plan.tensors[size_t(idx)].bytes()));
    EXPECT_TRUE(b->read(idx, bytes.data()).isOk());
  }
  return out;
}

} // namespace hgp::bnfusion
