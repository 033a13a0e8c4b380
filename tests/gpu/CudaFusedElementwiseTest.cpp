// CudaFusedElementwiseTest.cpp - the NVRTC-compiled FusedElementwise kernels (compiler/codegen,
// runtime/cuda/FusedOps.cpp) against the CPU reference and against the unfused CUDA ops, in
// f32, bf16 and f16, eager and captured in a CUDA graph.
//
// The chain (tests/unit/FusedTestGraphs.h) uses every op the generator supports. Both comparisons
// are bit for bit (tolerance 0) in every precision: the fused kernel performs the unfused ops'
// IEEE float operations (no contraction, --fmad=false) and rounds each 16-bit intermediate where
// the unfused graph stored it, with the same round-to-nearest-even conversions (docs/fusion.md).
// Shapes: 210 elements (no vector path: the scalar loop only) and 512 (vector path).
//
// The dropout chains (buildDropoutChain: Relu -> Dropout, DropoutBwd -> ReluBwd, a second site and
// a ratio-0 copy) are compared the same ways, over several iterations: the fused kernel must draw
// the unfused Dropout kernel's mask bit for bit, a new one for each value of the counter, also
// when a captured graph is replayed (the counter is read on the device).
//
// The activations' chain and the squeeze-excitation backward (issue 19) are compared below with
// the bounds stated there: CUDA's math functions are not glibc's.
#include "tests/gpu/GpuTestUtil.h"
#include "tests/unit/FusedTestGraphs.h"

#include "compiler/codegen/GenerateKernels.h"

#include <cuda_runtime.h>

#include <cstdio>

namespace hgp::gputest {
namespace {

using namespace fusiontest;

/// The SM architecture to compile for: the device's (sm_90 under the CPU stand-in).
int deviceArch() {
  if (cpuStandIn()) return 90;
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return 90;
  return p.major * 10 + p.minor;
}

std::optional<EmittedPlan> chainPlan(DType d, const Shape& shape, bool fused) {
  Graph g(fused ? "fused" : "plain");
  auto bindings = buildChain(g, d, shape);
  if (fused) {
    PassContext ctx;
    Status st = runPipeline(g, {"fuse-elementwise"}, ctx);
    EXPECT_TRUE(st.isOk()) << st.toString();
    EXPECT_EQ(countOps(g, OpKind::FusedElementwise), 1);
  }
  auto e = emitStep(g, bindings);
  if (!e) return e;
  Status st = generateFusedKernels(e->plan, deviceArch(), /*required=*/true);
  EXPECT_TRUE(st.isOk()) << st.toString();
  if (!st) return std::nullopt;
  return e;
}

RunSpec exactSpec() {
  RunSpec s;
  s.tol = 0;
  s.feed = [](const PlanTensor& t, int run) {
    std::vector<float> v = feed(t.name, t.type.numElements(), uint64_t(run) + 1);
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  return s;
}

TEST(CudaFusedElementwise, FusedKernelMatchesTheCpuReferenceBitForBit) {
  HGP_REQUIRE_CUDA();
  for (DType d : {DType::F32, DType::BF16, DType::F16})
    for (Shape shape : {Shape{2, 3, 5, 7}, Shape{4, 8, 16}}) {
      SCOPED_TRACE(std::string(dtypeName(d)) + " " + shapeToString(shape));
      auto e = chainPlan(d, shape, true);
      ASSERT_TRUE(e);
      ASSERT_EQ(e->plan.kernels.size(), 1u);
      runAndCompare(*e, exactSpec());
    }
}

TEST(CudaFusedElementwise, FusedKernelMatchesTheUnfusedCudaOpsBitForBit) {
  HGP_REQUIRE_CUDA();
  for (DType d : {DType::F32, DType::BF16, DType::F16})
    for (Shape shape : {Shape{2, 3, 5, 7}, Shape{4, 8, 16}, Shape{3, 64, 33, 17}}) {
      SCOPED_TRACE(std::string(dtypeName(d)) + " " + shapeToString(shape));
      auto plain = chainPlan(d, shape, false), fused = chainPlan(d, shape, true);
      ASSERT_TRUE(plain && fused);
      for (uint64_t seed : {1, 2}) {
        BackendOptions o;
        o.eager = true;
        auto a = makeGpuBackend(o), b = makeGpuBackend(o);
        ASSERT_TRUE(a.hasValue() && b.hasValue());
        auto want = runStep(**a, *plain, seed), got = runStep(**b, *fused, seed);
        ASSERT_EQ(want.size(), 4u);
        for (const auto& [name, bytes] : want) EXPECT_TRUE(bytes == got[name]) << name << " differs";
      }
    }
}

std::optional<EmittedPlan> dropoutChainPlan(DType d, const Shape& shape, bool fused) {
  Graph g(fused ? "fused" : "plain");
  auto bindings = buildDropoutChain(g, d, shape);
  if (fused) {
    PassContext ctx;
    Status st = runPipeline(g, {"fuse-elementwise"}, ctx);
    EXPECT_TRUE(st.isOk()) << st.toString();
    EXPECT_EQ(countOps(g, OpKind::Dropout) + countOps(g, OpKind::DropoutBwd), 0);
  }
  auto e = emitStep(g, bindings);
  if (!e) return e;
  Status st = generateFusedKernels(e->plan, deviceArch(), /*required=*/true);
  EXPECT_TRUE(st.isOk()) << st.toString();
  if (!st) return std::nullopt;
  return e;
}

/// The counter values of the dropout tests' runs: steps 0, 1, 2, and one past 2^32.
int64_t dropoutIter(int run) { return run == 3 ? (int64_t(1) << 33) + 5 : run; }

TEST(CudaFusedElementwise, DropoutChainsMatchTheUnfusedCudaOpsBitForBit) {
  HGP_REQUIRE_CUDA();
  // 210 and 3003: a scalar tail after the vectors; 3 x 64 x 33 x 17: many blocks.
  for (DType d : {DType::F32, DType::BF16})
    for (Shape shape : {Shape{2, 3, 5, 7}, Shape{3, 1001}, Shape{3, 64, 33, 17}}) {
      SCOPED_TRACE(std::string(dtypeName(d)) + " " + shapeToString(shape));
      auto plain = dropoutChainPlan(d, shape, false), fused = dropoutChainPlan(d, shape, true);
      ASSERT_TRUE(plain && fused);
      ASSERT_GE(fused->plan.kernels.size(), 1u);
      std::vector<uint8_t> previous;
      for (int run = 0; run < 4; ++run) {
        int64_t iter = dropoutIter(run);
        SCOPED_TRACE("iter " + std::to_string(iter));
        BackendOptions o;
        o.eager = true;
        auto a = makeGpuBackend(o), b = makeGpuBackend(o);
        ASSERT_TRUE(a.hasValue() && b.hasValue());
        auto want = runStep(**a, *plain, 3, iter), got = runStep(**b, *fused, 3, iter);
        ASSERT_EQ(want.size(), 4u);
        for (const auto& [name, bytes] : want) EXPECT_TRUE(bytes == got[name]) << name << " differs";
        if (!previous.empty()) EXPECT_FALSE(got["out.0"] == previous) << "the mask did not change";
        previous = got["out.0"];
      }
    }
}

TEST(CudaFusedElementwise, DropoutKernelMatchesTheCpuReferenceEagerAndReplayed) {
  HGP_REQUIRE_CUDA();
  RunSpec spec = exactSpec();
  // Runs: eager, capture slot 1, capture slot 0, replay both; each with its own counter value.
  spec.feed = [](const PlanTensor& t, int run) {
    if (t.type.dtype == DType::I64) {
      int64_t iter = dropoutIter(run % 4);
      std::vector<uint8_t> b(8);
      std::memcpy(b.data(), &iter, 8);
      return b;
    }
    std::vector<float> v = feed(t.name, t.type.numElements(), 1);
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  for (DType d : {DType::F32, DType::BF16})
    for (Shape shape : {Shape{2, 3, 5, 7}, Shape{4, 8, 16}}) {
      SCOPED_TRACE(std::string(dtypeName(d)) + " " + shapeToString(shape));
      auto e = dropoutChainPlan(d, shape, true);
      ASSERT_TRUE(e);
      runAndCompare(*e, spec);
    }
}

// ---- Activations and the squeeze-excitation gate (issue 19) ------------------------------------
//
// Fused against unfused CUDA: bit for bit. The generated kernel calls the unfused executors'
// functions (expf, tanhf, erff, logf) and both are compiled with --fmad=false
// (runtime/CMakeLists.txt, compiler/codegen/Nvrtc.cpp), which holds when the NVRTC the executable
// loads is of the CUDA release that built it. Fused CUDA against the CPU: CUDA's expf, tanhf and
// erff are within 2 ulp of the exact value, logf within 1, glibc's within 1, so each element
// agrees within a few float32 ulp; a 16-bit value near a rounding boundary may then round the
// other way, and carry that unit into the values computed from it. The bound, relative to the
// tensor's largest magnitude: 1e-6 in f32 (8 ulp), 2^-7 in bf16, 2^-10 in f16 (two units of the
// format's last place).

/// got and want, tensors of dtype d, as floats.
std::vector<float> asFloats(DType d, const std::vector<uint8_t>& bytes) {
  size_t n = bytes.size() / (d == DType::F32 ? 4 : 2);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    if (d == DType::F32) {
      std::memcpy(&v[i], bytes.data() + 4 * i, 4);
      continue;
    }
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    v[i] = d == DType::BF16 ? bf16ToFloat(h) : halfToFloat(h);
  }
  return v;
}

template <typename Build>
std::optional<EmittedPlan> builtPlan(Build build, bool fused) {
  Graph g(fused ? "fused" : "plain");
  auto bindings = build(g);
  if (fused) {
    PassContext ctx;
    Status st = runPipeline(g, {"fuse-elementwise"}, ctx);
    EXPECT_TRUE(st.isOk()) << st.toString();
    EXPECT_GE(countOps(g, OpKind::FusedElementwise), 1);
  }
  auto e = emitStep(g, bindings);
  if (!e) return e;
  Status st = generateFusedKernels(e->plan, deviceArch(), /*required=*/true);
  EXPECT_TRUE(st.isOk()) << st.toString();
  if (!st) return std::nullopt;
  return e;
}

template <typename Build> void checkActivationPlans(Build build, DType d) {
  auto plain = builtPlan(build, false), fused = builtPlan(build, true);
  ASSERT_TRUE(plain && fused);
  double tol = d == DType::F32 ? 1e-6 : d == DType::BF16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -10);
  for (uint64_t seed : {1, 2}) {
    BackendOptions o;
    o.eager = true;
    auto a = makeGpuBackend(o), b = makeGpuBackend(o);
    ASSERT_TRUE(a.hasValue() && b.hasValue());
    auto cpu = createCpuBackend();
    auto unfused = runStep(**a, *plain, seed), got = runStep(**b, *fused, seed);
    auto want = runStep(*cpu, *fused, seed);
    ASSERT_FALSE(want.empty());
    for (const auto& [name, bytes] : want) {
      EXPECT_TRUE(unfused[name] == got[name]) << name << ": fused and unfused CUDA differ";
      std::vector<float> g = asFloats(d, got[name]), w = asFloats(d, bytes);
      ASSERT_EQ(g.size(), w.size());
      double top = 1e-30, worst = 0;
      for (float x : w) top = std::max(top, double(std::fabs(x)));
      for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::fabs(double(g[i]) - w[i]));
      EXPECT_LE(worst / top, tol) << name << ": CUDA against the CPU";
      std::printf("%s %s: CUDA against the CPU %.3g of the largest magnitude (bound %.3g)\n",
                  dtypeName(d), name.c_str(), worst / top, tol);
    }
  }
}

TEST(CudaFusedElementwise, ActivationsMatchUnfusedCudaBitForBitAndTheCpuWithinUlps) {
  HGP_REQUIRE_CUDA();
  for (DType d : {DType::F32, DType::BF16, DType::F16})
    for (Shape shape : {Shape{2, 3, 5, 7}, Shape{3, 64, 33, 17}}) {
      SCOPED_TRACE(std::string(dtypeName(d)) + " " + shapeToString(shape));
      checkActivationPlans([&](Graph& g) { return buildActivationChain(g, d, shape); }, d);
    }
}

TEST(CudaFusedElementwise, SqueezeExcitationGateMatchesUnfusedCudaAndTheCpu) {
  HGP_REQUIRE_CUDA();
  for (DType d : {DType::F32, DType::BF16})
    for (bool nhwc : {false, true})
      for (Shape full : {Shape{4, 24, 7, 7}, Shape{3, 12, 14, 12}}) {
        Shape phys = nhwc ? Shape{full[0], full[2], full[3], full[1]} : full;
        SCOPED_TRACE(std::string(dtypeName(d)) + " " + shapeToString(phys) + (nhwc ? " nhwc" : ""));
        checkActivationPlans([&](Graph& g) { return buildSeBackward(g, d, phys, nhwc); }, d);
      }
}

TEST(CudaFusedElementwise, GeluPoolingGradientAndPerChannelOperandsMatchUnfusedCudaAndTheCpu) {
  // Gelu in both forms (erfcf, expf, tanhf: the bounds above), the squeeze-excitation backward
  // with its GlobalAveragePoolBwd folded in (both layouts), ConvNeXt's per-channel bias and
  // layer scale (operands broadcast along the batch too).
  HGP_REQUIRE_CUDA();
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    for (Shape shape : {Shape{2, 3, 5, 7}, Shape{3, 64, 33, 17}}) {
      SCOPED_TRACE(std::string(dtypeName(d)) + " gelu " + shapeToString(shape));
      checkActivationPlans([&](Graph& g) { return buildGeluChain(g, d, shape); }, d);
    }
    for (bool nhwc : {false, true})
      for (Shape full : {Shape{4, 24, 7, 7}, Shape{3, 12, 14, 12}}) {
        Shape phys = nhwc ? Shape{full[0], full[2], full[3], full[1]} : full;
        SCOPED_TRACE(std::string(dtypeName(d)) + " " + shapeToString(phys) + (nhwc ? " nhwc" : ""));
        checkActivationPlans([&](Graph& g) { return buildSeBackward(g, d, phys, nhwc, /*pooled=*/true); }, d);
        checkActivationPlans([&](Graph& g) { return buildPerChannel(g, d, phys, nhwc); }, d);
      }
  }
}

TEST(CudaFusedElementwise, ACubinForAnotherArchitectureIsRefusedAtLoad) {
  HGP_REQUIRE_CUDA();
  if (cpuStandIn()) GTEST_SKIP() << "the CPU stand-in loads no kernels";
  Graph g("fused");
  auto bindings = buildChain(g, DType::F32, {4, 8, 16});
  PassContext ctx;
  ASSERT_TRUE(runPipeline(g, {"fuse-elementwise"}, ctx).isOk());
  auto e = emitStep(g, bindings);
  ASSERT_TRUE(e);
  int other = deviceArch() == 80 ? 90 : 80;
  ASSERT_TRUE(generateFusedKernels(e->plan, other, true).isOk());
  auto b = makeGpuBackend({});
  ASSERT_TRUE(b.hasValue());
  Status st = (*b)->load(e->plan, InitData{e->data, {}});
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("sm_" + std::to_string(other)), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("sm_" + std::to_string(deviceArch())), std::string::npos)
      << st.message();
}

} // namespace
} // namespace hgp::gputest
