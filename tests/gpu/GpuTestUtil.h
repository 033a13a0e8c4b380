// GpuTestUtil.h - helpers for the GPU op suite: build small IR graphs, differentiate them, emit a
// plan, run it on the CPU reference backend and on the CUDA backend, and compare.
//
// Every test starts with HGP_REQUIRE_CUDA(), which skips the test (with the reason) when no CUDA
// backend can be created: no GPU, no driver, no cuDNN, or a build without CUDA. Test discovery
// runs no GPU code. Setting HGP_GPU_TEST_CPU_STANDIN=1 lets the CPU backend stand in for the GPU,
// which checks the suite's own plumbing on a machine without one (every comparison then passes
// trivially; it proves nothing about the CUDA executors).
//
// runAndCompare loads one plan on the CPU backend and on CUDA backends in eager mode and in graph
// mode (captured on the second run of each staging slot, replayed after), feeds every backend the
// same bytes before each run, and compares after each run every persistent tensor (parameters,
// state, inputs) and every tensor the plan binds (outputs, gradients). f32 tensors compare by
// max|a - b| / max(max|b|, 1e-30) <= tol (NaN and infinities must match exactly); other dtypes,
// and f32 with tol 0, compare bit for bit.
#pragma once

#include "ir/Printer.h"
#include "compiler/plan/PlanEmitter.h"
#include "passes/Pass.h"
#include "runtime/Backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace hgp::gputest {

/// The path of `relative` (e.g. "samples/lenet5.onnx") in the source tree: under
/// $HGP_SOURCE_DIR (tests/gpu/device_run.sh sets it to the copy of the repository on the GPU
/// machine), else the tree this was built from, else the working directory; "" when none has it.
/// A bundle packed from one checkout runs where that checkout's path does not exist.
inline std::string sourceFile(const std::string& relative) {
  std::vector<std::string> roots;
  if (const char* env = std::getenv("HGP_SOURCE_DIR")) roots.push_back(env);
  roots.push_back(HGP_SOURCE_DIR);
  roots.push_back(".");
  for (const std::string& r : roots)
    if (std::ifstream(r + "/" + relative).good()) return r + "/" + relative;
  return "";
}

inline bool cpuStandIn() {
  const char* v = std::getenv("HGP_GPU_TEST_CPU_STANDIN");
  return v && std::string(v) == "1";
}

/// Creates a CUDA backend (or the CPU stand-in).
inline Expected<std::unique_ptr<Backend>> makeGpuBackend(const BackendOptions& o) {
  if (cpuStandIn()) return createCpuBackend();
  return createCudaBackend(o);
}

/// Why the CUDA backend cannot be used, or "" when it can (tried once per process).
inline const std::string& cudaUnusableReason() {
  static const std::string reason = [] {
    auto b = makeGpuBackend(BackendOptions{});
    return b.hasValue() ? std::string() : b.status().toString();
  }();
  return reason;
}

#define HGP_REQUIRE_CUDA()                                                                         \
  do {                                                                                             \
    if (!::hgp::gputest::cudaUnusableReason().empty())                                             \
      GTEST_SKIP() << "no usable CUDA backend: " << ::hgp::gputest::cudaUnusableReason();          \
  } while (0)

// ---- Building graphs -----------------------------------------------------------------------

inline uint64_t hashName(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (char c : s) h = (h ^ uint8_t(c)) * 1099511628211ull;
  return h;
}

/// Uniform f32 values in [lo, hi).
inline std::vector<uint8_t> uniformBytes(const TensorType& t, uint64_t seed, double lo = -1,
                                         double hi = 1) {
  std::vector<uint8_t> b(size_t(t.bytes()));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u{float(lo), float(hi)};
  for (int64_t i = 0; i < t.numElements(); ++i) {
    float v = u(rng);
    std::memcpy(b.data() + 4 * i, &v, 4);
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

// ---- Running and comparing -----------------------------------------------------------------

/// The bytes written into tensor `t` before run `run`.
using Feeder = std::function<std::vector<uint8_t>(const PlanTensor& t, int run)>;

/// Uniform [-1, 1) for f32, [0, 10) for i64, keyed by name and run.
inline std::vector<uint8_t> defaultFeed(const PlanTensor& t, int run) {
  uint64_t seed = hashName(t.name, uint64_t(run) * 7919 + 1);
  if (t.type.dtype == DType::I64) return indexBytes(t.type, seed, 10);
  return uniformBytes(t.type, seed);
}

struct RunSpec {
  int runs = 5; ///< Graph mode: eager, capture slot 1, capture slot 0, replay both.
  double tol = 1e-5;
  std::map<std::string, double> tolByName;    ///< Per-tensor overrides, by tensor name.
  std::map<std::string, double> tolByBinding; ///< Per-tensor overrides, by binding ("loss").
  /// Which tensors are written before every run: by default every input and parameter.
  std::function<bool(const PlanTensor&)> fed = [](const PlanTensor& t) {
    return t.role == TensorRole::Input || t.role == TensorRole::Param;
  };
  Feeder feed = defaultFeed;
  bool eager = true, graph = true; ///< Which CUDA modes to run.
  bool deterministic = false;
  /// When set, the "loss" binding of differentiate() is compared with the bound that the
  /// per-element check of its terms implies: |loss - ref| <= lossTolOfTerms * sum_k max|out.k| *
  /// sum|r_k|. The test loss sums terms of random sign, so relative to itself it cancels and
  /// amplifies a last-place difference in a 16-bit result that the check of out.k already accepts.
  double lossTolOfTerms = 0;
};

/// Whether `got` matches `want` for tensor t within tol; the message says where it does not.
inline ::testing::AssertionResult sameValues(const PlanTensor& t, const std::vector<uint8_t>& got,
                                             const std::vector<uint8_t>& want, double tol) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  if (t.type.dtype != DType::F32 || tol == 0) {
    if (std::memcmp(got.data(), want.data(), got.size()) == 0) return ::testing::AssertionSuccess();
    int64_t es = dtypeSize(t.type.dtype);
    for (size_t i = 0; i < got.size(); i += size_t(es))
      if (std::memcmp(got.data() + i, want.data() + i, size_t(es)) != 0) {
        auto r = ::testing::AssertionFailure() << "not bit-identical at element " << i / size_t(es);
        if (t.type.dtype == DType::F32) {
          float a, b;
          std::memcpy(&a, got.data() + i, 4);
          std::memcpy(&b, want.data() + i, 4);
          r << ": got " << a << ", expected " << b;
        } else if (t.type.dtype == DType::I64) {
          int64_t a, b;
          std::memcpy(&a, got.data() + i, 8);
          std::memcpy(&b, want.data() + i, 8);
          r << ": got " << a << ", expected " << b;
        }
        return r;
      }
  }
  const float* a = reinterpret_cast<const float*>(got.data());
  const float* b = reinterpret_cast<const float*>(want.data());
  int64_t n = t.type.numElements(), worst = -1;
  double maxDiff = 0, maxRef = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool special = !std::isfinite(a[i]) || !std::isfinite(b[i]);
    if (special) {
      bool same = (std::isnan(a[i]) && std::isnan(b[i])) || a[i] == b[i];
      if (!same)
        return ::testing::AssertionFailure()
               << "element " << i << ": got " << a[i] << ", expected " << b[i];
      continue;
    }
    double d = std::fabs(double(a[i]) - double(b[i]));
    if (d > maxDiff) maxDiff = d, worst = i;
    maxRef = std::max(maxRef, std::fabs(double(b[i])));
  }
  double rel = maxDiff / std::max(maxRef, 1e-30);
  if (rel <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "relative error " << rel << " > " << tol << " (worst element " << worst << ": got "
         << a[worst] << ", expected " << b[worst] << "; max |expected| " << maxRef << ")";
}

/// The tensors a comparison reads: every persistent one and every bound one.
inline std::vector<int> comparedTensors(const Plan& plan) {
  std::set<int> ids;
  for (size_t i = 0; i < plan.tensors.size(); ++i)
    if (plan.tensors[i].storage == StorageClass::Persistent) ids.insert(int(i));
  for (const auto& [name, idx] : plan.bindings) ids.insert(idx);
  return {ids.begin(), ids.end()};
}

inline std::vector<uint8_t> readTensor(Backend& b, const Plan& plan, int t) {
  std::vector<uint8_t> out(size_t(plan.tensors[size_t(t)].bytes()));
  Status st = b.read(t, out.data());
  EXPECT_TRUE(st.isOk()) << st.toString();
  return out;
}

inline double maxAbsF32(const std::vector<uint8_t>& bytes) {
  double m = 0;
  for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
    float v;
    std::memcpy(&v, bytes.data() + i, 4);
    m = std::max(m, double(std::fabs(v)));
  }
  return m;
}

/// The relative tolerance of the "loss" binding under RunSpec::lossTolOfTerms, from the
/// reference backend's values of the terms out.k and their weights r<k>.
inline double lossTolFromTerms(Backend& ref, const Plan& plan, double tolOfTerms) {
  double bound = 0;
  for (int k = 0;; ++k) {
    int out = plan.binding("out." + std::to_string(k)), r = -1;
    if (out < 0) break;
    for (size_t i = 0; i < plan.tensors.size(); ++i)
      if (plan.tensors[i].name == "r" + std::to_string(k)) r = int(i);
    if (r < 0 || plan.tensors[size_t(out)].type.dtype != DType::F32) continue;
    std::vector<uint8_t> w = readTensor(ref, plan, r);
    double sumR = 0;
    for (size_t i = 0; i + 4 <= w.size(); i += 4) {
      float v;
      std::memcpy(&v, w.data() + i, 4);
      sumR += std::fabs(v);
    }
    bound += maxAbsF32(readTensor(ref, plan, out)) * sumR;
  }
  double loss = maxAbsF32(readTensor(ref, plan, plan.binding("loss")));
  return tolOfTerms * bound / std::max(loss, 1e-30);
}

/// Runs `e` on the CPU backend and on the CUDA backend in the modes `spec` asks for, and compares
/// after every run.
inline void runAndCompare(const EmittedPlan& e, const RunSpec& spec = {}) {
  const Plan& plan = e.plan;
  InitData init{e.data, {}};
  struct Target {
    std::string name;
    std::unique_ptr<Backend> backend;
  };
  std::vector<Target> targets;
  targets.push_back({"cpu", createCpuBackend()});
  for (int mode = 0; mode < 2; ++mode) {
    if ((mode == 0 && !spec.eager) || (mode == 1 && !spec.graph)) continue;
    BackendOptions o;
    o.eager = mode == 0;
    o.deterministic = spec.deterministic;
    auto b = makeGpuBackend(o);
    ASSERT_TRUE(b.hasValue()) << b.status().toString();
    targets.push_back({mode == 0 ? "cuda-eager" : "cuda-graph", std::move(*b)});
  }
  for (auto& t : targets) {
    Status st = t.backend->load(plan, init);
    ASSERT_TRUE(st.isOk()) << t.name << ": " << st.toString();
  }
  std::vector<int> compared = comparedTensors(plan);
  for (int run = 0; run < spec.runs; ++run) {
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      const PlanTensor& pt = plan.tensors[i];
      if (pt.storage != StorageClass::Persistent || !spec.fed(pt)) continue;
      std::vector<uint8_t> bytes = spec.feed(pt, run);
      ASSERT_EQ(bytes.size(), size_t(pt.bytes())) << pt.name;
      for (auto& t : targets) {
        Status st = t.backend->write(int(i), bytes.data());
        ASSERT_TRUE(st.isOk()) << t.name << ": " << st.toString();
      }
    }
    for (auto& t : targets) {
      Status st = t.backend->run("step");
      ASSERT_TRUE(st.isOk()) << t.name << " run " << run << ": " << st.toString();
    }
    for (int id : compared) {
      const PlanTensor& pt = plan.tensors[size_t(id)];
      std::vector<uint8_t> want = readTensor(*targets[0].backend, plan, id);
      auto it = spec.tolByName.find(pt.name);
      double tol = it != spec.tolByName.end() ? it->second : spec.tol;
      for (const auto& [binding, btol] : spec.tolByBinding)
        if (plan.binding(binding) == id) tol = btol;
      if (spec.lossTolOfTerms > 0 && plan.binding("loss") == id)
        tol = lossTolFromTerms(*targets[0].backend, plan, spec.lossTolOfTerms);
      for (size_t k = 1; k < targets.size(); ++k)
        EXPECT_TRUE(sameValues(pt, readTensor(*targets[k].backend, plan, id), want, tol))
            << "tensor '" << pt.name << "' " << typeToString(pt.type) << " on " << targets[k].name
            << " after run " << run;
    }
  }
}

/// Runs plan `ea` on backend `a` and plan `eb` on `b`, `runs` times each (fed alike), and
/// expects every compared tensor to be bit-identical after every run. The two plans have the same
/// tensors and differ only in how their steps are scheduled.
inline void expectBitIdentical(const EmittedPlan& ea, const EmittedPlan& eb,
                               const BackendOptions& oa, const BackendOptions& ob,
                               const RunSpec& spec) {
  const Plan& plan = ea.plan;
  ASSERT_EQ(ea.plan.tensors.size(), eb.plan.tensors.size());
  {
    // Both backends must run the same algorithms, and two backends that each time them can pick
    // differently: a first backend times them and saves its choices in the tuning cache, which
    // the two compared backends then read.
    auto warm = makeGpuBackend(oa);
    ASSERT_TRUE(warm.hasValue());
    Status st = (*warm)->load(ea.plan, InitData{ea.data, {}});
    if (st) st = (*warm)->run("step");
    ASSERT_TRUE(st.isOk()) << st.toString();
  }
  auto a = makeGpuBackend(oa), b = makeGpuBackend(ob);
  ASSERT_TRUE(a.hasValue() && b.hasValue());
  Status st = (*a)->load(ea.plan, InitData{ea.data, {}});
  ASSERT_TRUE(st.isOk()) << st.toString();
  st = (*b)->load(eb.plan, InitData{eb.data, {}});
  ASSERT_TRUE(st.isOk()) << st.toString();
  std::vector<int> compared = comparedTensors(plan);
  for (int run = 0; run < spec.runs; ++run) {
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      const PlanTensor& pt = plan.tensors[i];
      if (pt.storage != StorageClass::Persistent || !spec.fed(pt)) continue;
      std::vector<uint8_t> bytes = spec.feed(pt, run);
      for (Backend* x : {a->get(), b->get()}) ASSERT_TRUE(x->write(int(i), bytes.data()).isOk());
    }
    for (Backend* x : {a->get(), b->get()}) {
      Status st = x->run("step");
      ASSERT_TRUE(st.isOk()) << st.toString();
    }
    for (int id : compared) {
      const PlanTensor& pt = plan.tensors[size_t(id)];
      EXPECT_TRUE(sameValues(pt, readTensor(**a, plan, id), readTensor(**b, plan, id), 0))
          << "tensor '" << pt.name << "' after run " << run;
    }
  }
}

/// The same with one plan for both backends.
inline void expectBitIdentical(const EmittedPlan& e, const BackendOptions& oa,
                               const BackendOptions& ob, const RunSpec& spec) {
  expectBitIdentical(e, e, oa, ob, spec);
}

} // namespace hgp::gputest
