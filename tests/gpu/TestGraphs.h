// TestGraphs.h - builds small IR graphs for the op tests: graph values with seeded data, nodes,
// a test loss with autodiff, and a one-program plan. The GPU op suite (GpuTestUtil.h) and the op
// coverage tests (OpCoverageCases.h) on both backends build their cases with it.
#pragma once

#include "ir/Printer.h"
#include "compiler/plan/PlanEmitter.h"
#include "passes/Pass.h"
#include "runtime/plan/Half.h"
#include "runtime/plan/Precision.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace hgp::gputest {


inline uint64_t hashName(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (char c : s) h = (h ^ uint8_t(c)) * 1099511628211ull;
  return h;
}

/// Uniform values in [lo, hi), stored in t's dtype: f32, or bf16 and f16 rounded to nearest (before
/// 2026-12-03 they were written as f32 whatever the dtype, past the end of a 16-bit buffer).
inline std::vector<uint8_t> uniformBytes(const TensorType& t, uint64_t seed, double lo = -1,
                                         double hi = 1) {
  std::vector<uint8_t> b(size_t(t.bytes()));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u{float(lo), float(hi)};
  bool half = t.dtype == DType::BF16 || t.dtype == DType::F16; // else f32
  for (int64_t i = 0; i < t.numElements(); ++i) {
    float v = u(rng);
    if (half) storeHalf(t.dtype, reinterpret_cast<uint16_t*>(b.data()), i, v);
    else std::memcpy(b.data() + 4 * i, &v, 4);
  }
  return b;
}

/// i64 values in [0, bound).
inline std::vector<uint8_t> indexBytes(const TensorType& t, uint64_t seed, int64_t bound) {
  std::vector<uint8_t> b(size_t(t.bytes()));
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    int64_t v = int64_t(rng() % uint64_t(bound));
    std::memcpy(b.data() + 8 * i, &v, 8);
  }
  return b;
}

inline std::shared_ptr<TensorData> dataOf(const TensorType& t, std::vector<uint8_t> bytes) {
  auto d = std::make_shared<TensorData>();
  d->type = t;
  d->bytes = std::move(bytes);
  return d;
}

inline std::shared_ptr<TensorData> scalarI64(int64_t v) {
  std::vector<uint8_t> b(8);
  std::memcpy(b.data(), &v, 8);
  return dataOf({DType::I64, {}}, b);
}

inline std::shared_ptr<TensorData> filled(const TensorType& t, float v) {
  std::vector<uint8_t> b(size_t(t.bytes()));
  for (int64_t i = 0; i < t.numElements(); ++i) std::memcpy(b.data() + 4 * i, &v, 4);
  return dataOf(t, b);
}

/// A graph-level value; parameters and states get random (or given) initial data.
inline Value* addValue(Graph& g, const std::string& name, TensorRole role, TensorType t,
                       std::shared_ptr<TensorData> data = nullptr) {
  if (!data && (role == TensorRole::Param || role == TensorRole::Const) && t.dtype == DType::F32)
    data = dataOf(t, uniformBytes(t, hashName(name, 99)));
  auto v = g.addGraphValue(name, role, std::move(t), std::move(data));
  EXPECT_TRUE(v.hasValue()) << v.status().toString();
  return v.hasValue() ? *v : nullptr;
}

inline Node* addNode(Graph& g, OpKind op, std::vector<Value*> ins, AttrMap a = {},
                     int outputs = -1) {
  auto n = g.addNode(op, std::move(ins), std::move(a), "", outputs);
  EXPECT_TRUE(n.hasValue()) << opName(op) << ": " << n.status().toString();
  return n.hasValue() ? *n : nullptr;
}

inline Value* op1(Graph& g, OpKind op, std::vector<Value*> ins, AttrMap a = {}) {
  Node* n = addNode(g, op, std::move(ins), std::move(a));
  return n ? n->output(0) : nullptr;
}

/// Makes every value in `outs` a graph output bound as "out.<k>".
inline std::map<std::string, std::string> bindOutputs(Graph& g, const std::vector<Value*>& outs) {
  std::map<std::string, std::string> b;
  for (size_t k = 0; k < outs.size(); ++k) {
    g.addOutput(outs[k]);
    b["out." + std::to_string(k)] = outs[k]->name();
  }
  return b;
}

/// Adds loss = sum_k sum(outs[k] * R_k) over the first `lossTerms` f32 outputs, runs autodiff,
/// and binds the loss, every output ("out.<k>") and every parameter gradient ("grad.<param>").
inline std::map<std::string, std::string> differentiate(Graph& g, const std::vector<Value*>& outs,
                                                        size_t lossTerms = SIZE_MAX) {
  std::vector<Value*> terms;
  for (size_t k = 0; k < outs.size() && k < lossTerms; ++k) {
    Value* y = outs[k];
    if (y->dtype() != DType::F32) continue;
    Value* r = addValue(g, "r" + std::to_string(k), TensorRole::Const, y->type());
    Value* prod = op1(g, OpKind::Mul, {y, r});
    AttrMap ra;
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < prod->rank(); ++i) axes.push_back(i);
    ra.setInts("axes", axes);
    ra.setInt("keepdims", 0);
    terms.push_back(op1(g, OpKind::ReduceSum, {prod}, ra));
  }
  Value* loss = terms.size() == 1 ? terms[0] : op1(g, OpKind::Sum, terms);
  g.addOutput(loss); // autodiff wants the loss first
  std::map<std::string, std::string> b = bindOutputs(g, outs);
  b["loss"] = loss->name();
  PassContext ctx;
  Status st = runPipeline(g, {"autodiff"}, ctx);
  EXPECT_TRUE(st.isOk()) << st.toString() << "\n" << printGraph(g);
  for (auto& [p, grad] : ctx.paramGrads) {
    g.addOutput(grad);
    b["grad." + p->name()] = grad->name();
  }
  return b;
}

/// The precision whose activations are `low`: fp32 for F32 (no TF32), bf16, fp16.
inline Precision precisionStoring(DType low) {
  return low == DType::BF16 ? Precision::BF16 : low == DType::F16 ? Precision::FP16 : Precision::FP32;
}

/// Emits a one-program plan ("step"). precision: "fp32" (no TF32) or "tf32".
inline std::optional<EmittedPlan> emit(const Graph& g, std::map<std::string, std::string> bindings,
                                       const std::string& precision = "fp32") {
  EmitOptions eo;
  eo.modelName = g.name();
  eo.meta.setString("precision", precision);
  auto e = emitPlan({ProgramSource{"step", &g, std::move(bindings)}}, eo);
  EXPECT_TRUE(e.hasValue()) << e.status().toString() << "\n" << printGraph(g);
  if (!e.hasValue()) return std::nullopt;
  return std::move(*e);
}

/// The bytes written into tensor `t` before run `run`.
using Feeder = std::function<std::vector<uint8_t>(const PlanTensor& t, int run)>;

/// Uniform [-1, 1) for f32, [0, 10) for i64, any byte for u8 (pixels, flip flags), keyed by name
/// and run.
inline std::vector<uint8_t> defaultFeed(const PlanTensor& t, int run) {
  uint64_t seed = hashName(t.name, uint64_t(run) * 7919 + 1);
  if (t.type.dtype == DType::I64) return indexBytes(t.type, seed, 10);
  if (t.type.dtype == DType::U8) {
    std::vector<uint8_t> b(size_t(t.bytes()));
    std::mt19937_64 rng(seed);
    for (uint8_t& v : b) v = uint8_t(rng());
    return b;
  }
  return uniformBytes(t.type, seed);
}

} // namespace hgp::gputest
