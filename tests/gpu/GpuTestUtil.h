// GpuTestUtil.h - helpers for the GPU op suite: build small IR graphs, differentiate them, emit a
// plan (TestGraphs.h), run it on the CPU reference backend and on the CUDA backend, and compare.
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

#include "runtime/Backend.h"
#include "tests/gpu/TestGraphs.h"

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

/// HGP_GPU_TEST_VERBOSE=1 makes the tests' CUDA backends print their choices (algorithms, fused
/// engines) to stderr, which CTest's --output-on-failure shows beside a failure.
inline bool verboseBackends() {
  const char* v = std::getenv("HGP_GPU_TEST_VERBOSE");
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

// ---- Running and comparing -----------------------------------------------------------------

struct RunSpec {
  std::string program = "step"; ///< The program each run runs.
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
  /// cuDNN's fused convolution engines (BackendOptions::cudnnFusion); off, hgpc's kernels run
  /// every epilogue and channel sum.
  bool cudnnFusion = true;
  /// When set, the "loss" binding of differentiate() is compared with the bound that the
  /// per-element check of its terms implies: |loss - ref| <= lossTolOfTerms * sum_k max|out.k| *
  /// sum|r_k|. The test loss sums terms of random sign, so relative to itself it cancels and
  /// amplifies a last-place difference in a 16-bit result that the check of out.k already accepts.
  double lossTolOfTerms = 0;
  /// A binding that is a ReLU's result, whose zeros are the ReLU's mask. In a run where a
  /// target's mask differs from the reference's only at elements within kinkRel * max|reference|
  /// of zero, a rounding difference at the kink (the one excuse for a larger gradient error),
  /// that run's gradients are not held to `tol` on that target: the binding itself still is,
  /// and the flipped elements are printed with both values. A mask difference farther from zero
  /// is compared as usual, and every target must compare at least one run in full.
  std::string kinkBinding;
  double kinkRel = 0;
};

/// The elements of two f32 ReLU results where exactly one is zero, as "[i] got G, want W" in
/// `text`; false when a nonzero value there is farther than `bound` from zero (not a kink).
inline bool kinkFlips(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                      double bound, std::string& text) {
  bool near = true;
  for (size_t i = 0; i + 4 <= std::min(got.size(), want.size()); i += 4) {
    float g, w;
    std::memcpy(&g, got.data() + i, 4);
    std::memcpy(&w, want.data() + i, 4);
    if ((g == 0.f) == (w == 0.f)) continue;
    near = near && std::fabs(double(g) + double(w)) <= bound;
    text += " [" + std::to_string(i / 4) + "] got " + std::to_string(g) + ", want " +
            std::to_string(w) + ";";
  }
  return near;
}

/// Whether run's gradients on a target are excused by ReLU flips at the kink of binding `name`
/// (RunSpec::kinkBinding): prints the flips and returns true when there are some and all are near.
inline bool excusedByKink(const Plan& plan, const std::string& name, double rel,
                          const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                          const std::string& where) {
  if (name.empty() || plan.binding(name) < 0) return false;
  std::string flips;
  double bound = 0;
  for (size_t i = 0; i + 4 <= want.size(); i += 4) {
    float w;
    std::memcpy(&w, want.data() + i, 4);
    bound = std::max(bound, rel * std::fabs(double(w)));
  }
  if (!kinkFlips(got, want, bound, flips) || flips.empty()) return false;
  std::printf("note: %s: ReLU '%s' flipped at its kink (within %g of zero):%s gradients not "
              "compared in this run\n", where.c_str(), name.c_str(), bound, flips.c_str());
  return true;
}

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
    o.cudnnFusion = spec.cudnnFusion;
    o.verbose = verboseBackends();
    auto b = makeGpuBackend(o);
    ASSERT_TRUE(b.hasValue()) << b.status().toString();
    targets.push_back({mode == 0 ? "cuda-eager" : "cuda-graph", std::move(*b)});
  }
  for (auto& t : targets) {
    Status st = t.backend->load(plan, init);
    ASSERT_TRUE(st.isOk()) << t.name << ": " << st.toString();
  }
  std::vector<int> compared = comparedTensors(plan);
  std::vector<int> fullRuns(targets.size(), 0);
  int kink = spec.kinkBinding.empty() ? -1 : plan.binding(spec.kinkBinding);
  std::set<int> grads; // what a flip excuses: the gradients differentiate() bound
  for (const auto& [name, idx] : plan.bindings)
    if (name.rfind("grad.", 0) == 0) grads.insert(idx);
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
      Status st = t.backend->run(spec.program);
      ASSERT_TRUE(st.isOk()) << t.name << " run " << run << ": " << st.toString();
    }
    std::vector<bool> excused(targets.size(), false);
    for (size_t k = 1; k < targets.size() && kink >= 0; ++k)
      excused[k] = excusedByKink(plan, spec.kinkBinding, spec.kinkRel,
                                 readTensor(*targets[k].backend, plan, kink),
                                 readTensor(*targets[0].backend, plan, kink),
                                 targets[k].name + " after run " + std::to_string(run));
    for (size_t k = 1; k < targets.size(); ++k) fullRuns[k] += excused[k] ? 0 : 1;
    for (int id : compared) {
      const PlanTensor& pt = plan.tensors[size_t(id)];
      std::vector<uint8_t> want = readTensor(*targets[0].backend, plan, id);
      auto it = spec.tolByName.find(pt.name);
      double tol = it != spec.tolByName.end() ? it->second : spec.tol;
      for (const auto& [binding, btol] : spec.tolByBinding)
        if (plan.binding(binding) == id) tol = btol;
      if (spec.lossTolOfTerms > 0 && plan.binding("loss") == id)
        tol = lossTolFromTerms(*targets[0].backend, plan, spec.lossTolOfTerms);
      for (size_t k = 1; k < targets.size(); ++k) {
        if (excused[k] && grads.count(id)) continue;
        EXPECT_TRUE(sameValues(pt, readTensor(*targets[k].backend, plan, id), want, tol))
            << "tensor '" << pt.name << "' " << typeToString(pt.type) << " on " << targets[k].name
            << " after run " << run;
      }
    }
  }
  for (size_t k = 1; k < targets.size(); ++k)
    EXPECT_GT(fullRuns[k], 0) << targets[k].name << ": every run had a ReLU flip";
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
