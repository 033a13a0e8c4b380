// Tests of fusion beyond the ResNet block (issue 19): the activations and their gradients as
// FusedElementwise instructions (SiLU = x * sigmoid(x), HardSwish, HardSigmoid, Tanh, Erf, Exp,
// Log, Sqrt, Reciprocal, Gelu in both forms), the pooling gradient GlobalAveragePoolBwd, and
// squeeze-excitation's broadcast gate ([N,C,1,1], channels-last
// [N,1,1,C]) as an input of a fused step. What the pass fuses; the CPU executor of the fused step
// against the unfused CPU ops (bit for bit: it evaluates the executors' float formulas and
// rounds where they stored); the generated kernel emulated on the host against the CPU (bit for
// bit: both call glibc's functions); SiLU against a float64 reference (within 4 ulp in f32, one
// unit of the 16-bit format in bf16 and f16); and NVRTC compiling it all.
#include "FusedKernelEmulator.h"

#include "compiler/codegen/GenerateKernels.h"
#include "compiler/codegen/Nvrtc.h"
#include "ir/Printer.h"
#include "runtime/plan/FusedProgram.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <optional>

namespace hgp {
namespace {

using namespace fusiontest;

TEST(FuseActivations, EveryActivationIsAnInstruction) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    Graph g("act");
    buildActivationChain(g, d, {2, 3, 5, 7});
    ASSERT_TRUE(fuse(g).isOk()) << printGraph(g);
    // In 16 bits the Casts of b and c start no chain of their own; each then joins the group
    // that reads it (a producer left alone), so one step holds everything.
    ASSERT_EQ(g.nodes().size(), 1u) << printGraph(g);
    const Node* f = fusedNodes(g).at(0);
    auto p = parseFusedProgram(f->attrs(), int(f->numInputs()));
    ASSERT_TRUE(p.hasValue()) << p.status().toString();
    std::string text = p->text();
    for (const char* op : {"Sigmoid ", "Tanh ", "HardSwish ", "Erf ", "Exp ", "Log ", "Sqrt ",
                           "Reciprocal ", "SigmoidBwd ", "TanhBwd ", "HardSwishBwd "})
      EXPECT_NE(text.find(op), std::string::npos) << op;
    // HardSigmoid carries alpha and beta (FusedAlpha, FusedBeta), printed as exact float32s.
    EXPECT_NE(text.find("HardSigmoid " + std::string(dtypeName(d)) + " %"), std::string::npos);
    EXPECT_NE(text.find("alpha=0.200000003 beta=0.5"), std::string::npos) << text;
    EXPECT_NE(text.find("alpha=0.166666672 beta=0.5"), std::string::npos) << text;
    AttrMap again;
    p->store(again);
    EXPECT_EQ(again.getString("program"), f->attrs().getString("program"));
  }
  AttrMap a;
  a.setString("program", "HardSigmoid f32 %0 alpha=0.2");
  a.setInts("results", {1});
  EXPECT_FALSE(parseFusedProgram(a, 1).hasValue()); // beta is required
}

TEST(FuseActivations, EveryFusibleOpHasACpuAndACudaForm) {
  // A program of one instruction per Fusible op of the table, over f32 inputs (a dropout: its
  // i64 counter), must parse, evaluate to a number on the CPU and generate CUDA source.
  for (int k = 0; k < kNumOps; ++k) {
    OpKind op = OpKind(k);
    if (!opHas(op, OpFlag::Fusible)) continue;
    SCOPED_TRACE(opName(op));
    int n = opTraits(op).maxInputs > 0 ? opTraits(op).maxInputs : 2;
    std::string text = std::string(opName(op)) + (op == OpKind::Cast ? " bf16" : " f32");
    std::vector<DType> in;
    for (int i = 0; i < n; ++i) {
      text += " %" + std::to_string(i);
      in.push_back(isFusedDropout(op) && i == 1 ? DType::I64 : DType::F32);
    }
    if (opHas(op, OpFlag::FusedAlpha)) text += " alpha=0.25";
    if (opHas(op, OpFlag::FusedBeta)) text += " beta=0.5";
    if (opHas(op, OpFlag::FusedBounds)) text += " min=-1 max=1";
    if (isFusedDropout(op)) text += " ratio=0.5 seed=1 key=2";
    if (opHas(op, OpFlag::FusedApprox)) text += " approximate=tanh";
    if (opHas(op, OpFlag::FusedCount)) text += " count=4";
    AttrMap a;
    a.setString("program", text);
    a.setInts("results", {n});
    auto p = parseFusedProgram(a, n);
    ASSERT_TRUE(p.hasValue()) << text << ": " << p.status().toString();
    float args[4] = {0.75f, 0.5f, 0.25f, 0.125f};
    EXPECT_FALSE(std::isnan(evalFusedInstr(p->instrs[0], args))) << text;
    auto src = fusedKernelSource(*p, in, 90);
    EXPECT_TRUE(src.hasValue()) << text << ": " << src.status().toString();
  }
}

TEST(FuseActivations, SiluChainIsOneStepAndTheGatedMulStaysOut) {
  // x -> SiLU -> h; the gate g = sigmoid(GlobalAveragePool(h)) depends on h, so the gated Mul
  // h * g cannot join h's group (that would be a cycle through the pool).
  Graph g("silu");
  Value* x = *g.addGraphValue("x", TensorRole::Input, {DType::F32, {2, 8, 5, 5}});
  Value* s = node(g, OpKind::Sigmoid, {x});
  Value* h = node(g, OpKind::Mul, {x, s});
  Value* gate = node(g, OpKind::Sigmoid, {node(g, OpKind::GlobalAveragePool, {h})});
  Value* y = node(g, OpKind::Mul, {h, gate});
  for (Value* v : {y, s, h}) g.addOutput(v);
  ASSERT_TRUE(fuse(g).isOk()) << printGraph(g);
  auto f = fusedNodes(g);
  ASSERT_EQ(f.size(), 1u) << printGraph(g);
  EXPECT_EQ(f[0]->attrs().getString("program"), "Sigmoid f32 %0; Mul f32 %0 %1");
  EXPECT_EQ(f[0]->numOutputs(), 2u); // s and h, which the backward pass reads
  EXPECT_EQ(countOps(g, OpKind::Mul), 1);     // the gated Mul
  EXPECT_EQ(countOps(g, OpKind::Sigmoid), 1); // the gate's, on [2,8,1,1]: another shape
  EXPECT_TRUE(verifyGraph(g).isOk());
}

TEST(FuseActivations, SqueezeExcitationBackwardIsOneStepWithABroadcastGate) {
  for (bool nhwc : {false, true}) {
    SCOPED_TRACE(nhwc ? "nhwc" : "nchw");
    Shape full = nhwc ? Shape{2, 5, 5, 8} : Shape{2, 8, 5, 5};
    Graph g("se");
    buildSeBackward(g, DType::F32, full, nhwc);
    ASSERT_TRUE(fuse(g).isOk()) << printGraph(g);
    EXPECT_TRUE(verifyGraph(g).isOk());
    auto f = fusedNodes(g);
    ASSERT_EQ(f.size(), 2u) << printGraph(g);
    EXPECT_EQ(g.nodes().size(), 2u) << printGraph(g);
    const Node* se = f[0]->attrs().getString("program").rfind("Sigmoid", 0) == 0 ? f[1] : f[0];
    // Inputs dY, gate, the pooling gradient, s, x; the gate read in its own shape.
    EXPECT_EQ(se->attrs().getString("program"),
              "Mul f32 %0 %1; Sum f32 %5 %2; Mul f32 %6 %3; Mul f32 %6 %4; SigmoidBwd f32 %8 %3; "
              "Sum f32 %7 %9") << printGraph(g);
    ASSERT_EQ(se->numInputs(), 5u);
    EXPECT_EQ(se->input(1)->shape(), gateShape(full, nhwc));
    EXPECT_EQ(se->numOutputs(), 1u);
    auto m = fusedOperandMap(se->input(1)->shape(), full);
    ASSERT_TRUE(m.hasValue());
    EXPECT_EQ(m->bk, nhwc ? 200 : 25);
    EXPECT_EQ(m->k, nhwc ? 8 : 1);
  }
}

/// SiLU's backward as autodiff writes it before the gradient Sum, over inputs a (dh), b (x) and
/// c (s): "out.0" = dh * s, "out.1" = SigmoidBwd(dh * x, s) (a BatchNormBwd adds them up).
std::map<std::string, std::string> buildSiluBackward(Graph& g) {
  TensorType t{DType::F32, {2, 8, 7, 7}};
  Value* dh = *g.addGraphValue("a", TensorRole::Input, t);
  Value* x = *g.addGraphValue("b", TensorRole::Input, t);
  Value* s = *g.addGraphValue("c", TensorRole::Input, t);
  Value* d1 = node(g, OpKind::Mul, {dh, s});
  Value* d3 = node(g, OpKind::SigmoidBwd, {node(g, OpKind::Mul, {dh, x}), s});
  g.addOutput(d1);
  g.addOutput(d3);
  return {{"out.0", d1->name()}, {"out.1", d3->name()}};
}

TEST(FuseActivations, SiblingsJoinSiluBackwardIsOneStep) {
  // dh * s has no producer in a chain; it joins its sibling dh * x's group, so dh is read once.
  Graph g("silu-bwd");
  buildSiluBackward(g);
  ASSERT_TRUE(fuse(g).isOk()) << printGraph(g);
  ASSERT_EQ(g.nodes().size(), 1u) << printGraph(g);
  EXPECT_EQ(g.nodes()[0]->attrs().getString("program"),
            "Mul f32 %0 %1; Mul f32 %0 %2; SigmoidBwd f32 %4 %1");
  EXPECT_EQ(g.nodes()[0]->attrs().getInts("results"), (std::vector<int64_t>{3, 5}));
  EXPECT_TRUE(verifyGraph(g).isOk());
}

TEST(FuseActivations, BroadcastRules) {
  EXPECT_FALSE(fusedOperandMap({2, 1, 5, 1}, {2, 8, 5, 5}).hasValue()); // two runs, no lead
  EXPECT_FALSE(fusedOperandMap({1, 8, 1, 5, 1}, {2, 8, 5, 5, 3}).hasValue()); // three runs
  EXPECT_FALSE(fusedOperandMap({2, 8, 5, 2}, {2, 8, 5, 5}).hasValue()); // not a 1
  EXPECT_FALSE(fusedOperandMap({1, 2, 8, 5, 5}, {2, 8, 5, 5}).hasValue()); // a higher rank
  auto m = fusedOperandMap({2, 1, 1, 1}, {2, 8, 5, 5}); // stochastic depth's per-sample noise
  ASSERT_TRUE(m.hasValue());
  EXPECT_EQ(m->index(399), 1);
  // Per-channel operands, broadcast along the batch too: every element against a reference.
  const Shape out{3, 4, 2, 5};
  for (Shape in : {Shape{1, 4, 5, 5}, Shape{4, 1, 1}, Shape{5}, Shape{1, 4, 2, 1}, Shape{2, 5},
                   Shape{3, 4, 1, 1}, Shape{1, 1, 1, 1}}) {
    if (in == Shape{1, 4, 5, 5}) {
      EXPECT_FALSE(fusedOperandMap(in, out).hasValue());
      continue;
    }
    auto pm = fusedOperandMap(in, out);
    ASSERT_TRUE(pm.hasValue()) << shapeToString(in) << ": " << pm.status().toString();
    Shape p(out.size() - in.size(), 1);
    p.insert(p.end(), in.begin(), in.end());
    for (int64_t i = 0; i < numElements(out); ++i) {
      int64_t rest = i, at = 0, stride = 1;
      for (size_t j = out.size(); j-- > 0;) { // numpy: the index in p of element i of out
        int64_t d = rest % out[j];
        rest /= out[j];
        at += (p[j] == 1 ? 0 : d) * stride;
        stride *= p[j];
      }
      ASSERT_EQ(pm->index(i), at) << shapeToString(in) << " element " << i;
    }
  }
  // Only FusedBroadcast ops may read a broadcast input, and it is never a result.
  AttrMap a;
  a.setString("program", "Mul f32 %0 %1; Relu f32 %1");
  a.setInts("results", {2});
  auto p = parseFusedProgram(a, 2);
  ASSERT_TRUE(p.hasValue());
  std::vector<FusedOperandMap> maps(2);
  maps[1] = *fusedOperandMap({2, 8, 1, 1}, {2, 8, 5, 5});
  EXPECT_FALSE(checkFusedBroadcasts(*p, maps).isOk());
  a.setString("program", "Mul f32 %0 %1");
  auto q = parseFusedProgram(a, 2);
  ASSERT_TRUE(q.hasValue());
  EXPECT_TRUE(checkFusedBroadcasts(*q, maps).isOk());
  // A Relu over a broadcast operand is not fused: only the broadcasting ops read one.
  Graph g("relu-of-gate");
  Value* x = *g.addGraphValue("x", TensorRole::Input, {DType::F32, {2, 8, 5, 5}});
  Value* gate = *g.addGraphValue("gate", TensorRole::Input, {DType::F32, {2, 8, 1, 1}});
  Value* y = node(g, OpKind::Relu, {node(g, OpKind::Mul, {x, gate})});
  g.addOutput(node(g, OpKind::Add, {y, node(g, OpKind::Relu, {gate})}));
  ASSERT_TRUE(fuse(g).isOk());
  EXPECT_EQ(countOps(g, OpKind::FusedElementwise), 1) << printGraph(g);
  EXPECT_EQ(countOps(g, OpKind::Relu), 1) << printGraph(g); // the gate's
  EXPECT_TRUE(verifyGraph(g).isOk());
}

/// Plain and fused plans of `build` in dtype d, run on the CPU with two seeds: every binding
/// bit-identical. The fused plan's steps are also run emulated on the host (bit-identical too).
template <typename Build>
void expectFusedMatchesUnfused(Build build, int wantFused, KernelEmulator* emu) {
  Graph plain("plain"), fused("fused");
  auto bp = build(plain), bf = build(fused);
  ASSERT_TRUE(fuse(fused).isOk());
  ASSERT_EQ(countOps(fused, OpKind::FusedElementwise), wantFused) << printGraph(fused);
  auto ep = emitStep(plain, bp), ef = emitStep(fused, bf);
  ASSERT_TRUE(ep && ef);
  for (uint64_t seed : {1, 2}) {
    auto bpl = createCpuBackend(), bfu = createCpuBackend();
    auto want = runStep(*bpl, *ep, seed), got = runStep(*bfu, *ef, seed);
    ASSERT_FALSE(want.empty());
    for (const auto& [name, bytes] : want) EXPECT_TRUE(bytes == got[name]) << name << " differs";
    if (emu) {
      EXPECT_EQ(emu->checkSteps(*ef, *bfu), wantFused);
    }
  }
}

TEST(FuseActivations, CpuFusedAndUnfusedAreBitIdenticalAndTheKernelEmulationAgrees) {
  std::optional<KernelEmulator> emu;
  if (haveHostCompiler()) emu.emplace();
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtypeName(d));
    // 210 elements: the scalar path only; 2 x 8 x 7 x 7: vectors that cross gate planes; NHWC
    // with 12 channels: vectors that cross gate rows.
    if (d == DType::F32) expectFusedMatchesUnfused(buildSiluBackward, 1, emu ? &*emu : nullptr);
    for (Shape shape : {Shape{2, 3, 5, 7}, Shape{4, 8, 16}})
      expectFusedMatchesUnfused([&](Graph& g) { return buildActivationChain(g, d, shape); }, 1,
                                emu ? &*emu : nullptr);
    for (bool nhwc : {false, true})
      for (Shape full : {Shape{2, 8, 7, 7}, Shape{3, 3, 4, 12}}) {
        SCOPED_TRACE(shapeToString(full) + (nhwc ? " nhwc" : " nchw"));
        // In 16 bits the Casts start groups of their own, so the count is not 2 there.
        Graph probe("probe");
        buildSeBackward(probe, d, full, nhwc);
        ASSERT_TRUE(fuse(probe).isOk());
        EXPECT_EQ(countOps(probe, OpKind::SigmoidBwd) + countOps(probe, OpKind::Sigmoid), 0);
        expectFusedMatchesUnfused([&](Graph& g) { return buildSeBackward(g, d, full, nhwc); },
                                  countOps(probe, OpKind::FusedElementwise), emu ? &*emu : nullptr);
      }
  }
}

TEST(FuseActivations, GeluInBothFormsIsAnInstruction) {
  Graph g("gelu");
  buildGeluChain(g, DType::F32, {2, 3, 5, 7});
  ASSERT_TRUE(fuse(g).isOk()) << printGraph(g);
  ASSERT_EQ(g.nodes().size(), 1u) << printGraph(g);
  const Node* f = g.nodes()[0];
  EXPECT_EQ(f->attrs().getString("program"),
            "Scale f32 %0 alpha=4; Gelu f32 %2 approximate=none; Gelu f32 %2 approximate=tanh; "
            "Sum f32 %3 %4; Mul f32 %2 %1; GeluBwd f32 %6 %2 approximate=none; "
            "GeluBwd f32 %6 %2 approximate=tanh; Sum f32 %7 %8");
  auto p = parseFusedProgram(f->attrs(), int(f->numInputs()));
  ASSERT_TRUE(p.hasValue()) << p.status().toString();
  EXPECT_FALSE(p->instrs[1].tanhForm);
  EXPECT_TRUE(p->instrs[2].tanhForm);
  for (const char* bad : {"Gelu f32 %0", "Gelu f32 %0 approximate=exact",
                          "Gelu f32 %0 approximate=tanh approximate=none", "Relu f32 %0 approximate=tanh"}) {
    AttrMap a;
    a.setString("program", bad);
    a.setInts("results", {1});
    EXPECT_FALSE(parseFusedProgram(a, 1).hasValue()) << bad;
  }
}

TEST(FuseActivations, PoolingGradientJoinsTheSqueezeExcitationBackward) {
  // dh = Sum(dY * gate, GlobalAveragePoolBwd(dpool)): the spread gradient is an instruction over
  // the broadcast dpool, so the whole backward is one step and the spread is never written.
  for (bool nhwc : {false, true}) {
    SCOPED_TRACE(nhwc ? "nhwc" : "nchw");
    Shape full = nhwc ? Shape{2, 5, 5, 8} : Shape{2, 8, 5, 5};
    Graph g("se-pooled");
    buildSeBackward(g, DType::F32, full, nhwc, /*pooled=*/true);
    ASSERT_TRUE(fuse(g).isOk()) << printGraph(g);
    EXPECT_TRUE(verifyGraph(g).isOk());
    EXPECT_EQ(countOps(g, OpKind::GlobalAveragePoolBwd), 0) << printGraph(g);
    auto f = fusedNodes(g);
    ASSERT_EQ(f.size(), 2u) << printGraph(g);
    const Node* se = f[0]->attrs().getString("program").rfind("Sigmoid", 0) == 0 ? f[1] : f[0];
    std::string text = se->attrs().getString("program");
    EXPECT_NE(text.find("GlobalAveragePoolBwd f32 %0 count=25"), std::string::npos) << text;
    EXPECT_EQ(se->input(0)->name(), "c"); // dpool, read in its own shape
    EXPECT_EQ(se->input(0)->shape(), gateShape(full, nhwc));
  }
  AttrMap a; // the count is required and positive
  a.setInts("results", {1});
  for (const char* bad : {"GlobalAveragePoolBwd f32 %0", "GlobalAveragePoolBwd f32 %0 count=0",
                          "GlobalAveragePoolBwd f32 %0 count=4x"}) {
    a.setString("program", bad);
    EXPECT_FALSE(parseFusedProgram(a, 1).hasValue()) << bad;
  }
}

TEST(FuseActivations, GeluAndPoolingGradientCpuFusedMatchUnfusedAndTheKernelEmulationAgrees) {
  std::optional<KernelEmulator> emu;
  if (haveHostCompiler()) emu.emplace();
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtypeName(d));
    for (Shape shape : {Shape{2, 3, 5, 7}, Shape{4, 8, 16}}) {
      Graph probe("probe");
      buildGeluChain(probe, d, shape);
      ASSERT_TRUE(fuse(probe).isOk());
      EXPECT_EQ(countOps(probe, OpKind::Gelu) + countOps(probe, OpKind::GeluBwd), 0) << printGraph(probe);
      expectFusedMatchesUnfused([&](Graph& g) { return buildGeluChain(g, d, shape); },
                                countOps(probe, OpKind::FusedElementwise), emu ? &*emu : nullptr);
    }
    for (bool nhwc : {false, true})
      for (Shape full : {Shape{2, 8, 7, 7}, Shape{3, 3, 4, 12}}) {
        SCOPED_TRACE(shapeToString(full) + (nhwc ? " nhwc" : " nchw"));
        Graph probe("probe");
        buildSeBackward(probe, d, full, nhwc, true);
        ASSERT_TRUE(fuse(probe).isOk());
        EXPECT_EQ(countOps(probe, OpKind::GlobalAveragePoolBwd), 0) << printGraph(probe);
        expectFusedMatchesUnfused([&](Graph& g) { return buildSeBackward(g, d, full, nhwc, true); },
                                  countOps(probe, OpKind::FusedElementwise), emu ? &*emu : nullptr);
      }
  }
}

TEST(FuseActivations, PerChannelOperandsJoinAndMatchUnfused) {
  std::optional<KernelEmulator> emu;
  if (haveHostCompiler()) emu.emplace();
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtypeName(d));
    // 3 x 5 x 7 x 12 channels-last: vectors that cross the bias's rows; 2 x 6 x 7 x 7: vectors
    // that cross channel planes and images (the layer scale's index wraps at C).
    for (bool nhwc : {true, false}) {
      Shape full = nhwc ? Shape{3, 5, 7, 12} : Shape{2, 6, 7, 7};
      Graph probe("probe");
      buildPerChannel(probe, d, full, nhwc);
      ASSERT_TRUE(fuse(probe).isOk());
      EXPECT_EQ(countOps(probe, OpKind::Add) + countOps(probe, OpKind::Mul) + countOps(probe, OpKind::Gelu), 0)
          << printGraph(probe);
      expectFusedMatchesUnfused([&](Graph& g) { return buildPerChannel(g, d, full, nhwc); },
                                countOps(probe, OpKind::FusedElementwise), emu ? &*emu : nullptr);
    }
  }
}

/// SiLU of the feeds' a, fused, in dtype d, against float64: |got - x sigmoid(x)| within 4 ulp of
/// float32 (4 * 2^-23 relative; expf, the add, the division and the product each round once), or
/// in 16 bits within two unit roundoffs of the format (2^-7 bf16, 2^-10 f16, relative: the
/// roundings of s and of the product to 16 bits) plus those 4 float32 ulp, plus the format's
/// smallest subnormal near zero.
TEST(FuseActivations, SiluIsWithinAStatedUlpBoundOfFloat64) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    Shape shape{2, 8, 7, 7};
    Graph g("silu");
    Value* a = *g.addGraphValue("a", TensorRole::Input, {DType::F32, shape});
    Value* A = cast(g, a, d);
    Value* y = cast(g, node(g, OpKind::Mul, {A, node(g, OpKind::Sigmoid, {A})}), DType::F32);
    g.addOutput(y);
    ASSERT_TRUE(fuse(g).isOk());
    ASSERT_EQ(countOps(g, OpKind::FusedElementwise), 1) << printGraph(g);
    auto e = emitStep(g, {{"out.0", y->name()}});
    ASSERT_TRUE(e);
    auto cpu = createCpuBackend();
    auto out = runStep(*cpu, *e, 5);
    std::vector<float> x = feed("a", numElements(shape), 5), got(x.size());
    std::memcpy(got.data(), out["out.0"].data(), got.size() * 4);
    double f32ulps = 4 * std::ldexp(1.0, -23);
    double rel = d == DType::F32 ? f32ulps : (d == DType::BF16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -10)) + f32ulps;
    double tiny = d == DType::F32 ? 1.5e-45 : d == DType::BF16 ? 9.2e-41 : 6e-8;
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      double xi = d == DType::F32 ? x[i] : d == DType::BF16 ? bf16ToFloat(floatToBf16(x[i]))
                                                             : halfToFloat(floatToHalf(x[i]));
      double ref = xi / (1.0 + std::exp(-xi));
      double err = std::fabs(double(got[i]) - ref);
      EXPECT_LE(err, rel * std::fabs(ref) + tiny) << dtypeName(d) << " x=" << xi << " got " << got[i];
      if (std::fabs(ref) > 1e-3) worst = std::max(worst, err / std::fabs(ref));
    }
    std::printf("%s SiLU: worst relative error %.3g (bound %.3g)\n", dtypeName(d), worst, rel);
  }
}

TEST(FuseActivations, NvrtcCompilesTheActivationsAndTheBroadcastGate) {
  if (Status st = loadNvrtc(); !st) GTEST_SKIP() << st.message();
  for (DType d : {DType::F32, DType::BF16}) {
    Graph g("act");
    auto b = buildActivationChain(g, d, {4, 8, 16});
    ASSERT_TRUE(fuse(g).isOk());
    auto e = emitStep(g, b);
    ASSERT_TRUE(e);
    Status st = generateFusedKernels(e->plan, 90, true);
    ASSERT_TRUE(st.isOk()) << st.toString();
    ASSERT_EQ(e->plan.kernels.size(), 1u);
    for (const char* fn : {"sigm(", "tanhf(", "erff(", "expf(", "logf(", "__fsqrt_rn(", "__frcp_rn(", "hsig(",
                           "hswish(", "hsigbwd(", "hswishbwd("})
      EXPECT_NE(e->plan.kernels[0].source.find(fn), std::string::npos) << fn;
  }
  for (bool nhwc : {false, true}) {
    Graph g("se");
    auto b = buildSeBackward(g, DType::BF16, nhwc ? Shape{4, 7, 7, 24} : Shape{4, 24, 7, 7}, nhwc);
    ASSERT_TRUE(fuse(g).isOk());
    auto e = emitStep(g, b);
    ASSERT_TRUE(e);
    Status st = generateFusedKernels(e->plan, 90, true);
    ASSERT_TRUE(st.isOk()) << st.toString();
    bool constants = false;
    for (const PlanKernel& k : e->plan.kernels)
      constants = constants || k.source.find(nhwc ? "% 1176ull" : "/ 49ull") != std::string::npos;
    EXPECT_TRUE(constants) << "the gate's index map is compiled in";
  }
  for (DType d : {DType::F32, DType::BF16}) { // Gelu's two forms, the pooling gradient's spread
    for (bool gelu : {true, false}) {
      Graph g("gelu");
      auto b = gelu ? buildGeluChain(g, d, {4, 8, 16}) : buildSeBackward(g, d, {4, 24, 7, 7}, false, true);
      ASSERT_TRUE(fuse(g).isOk());
      auto e = emitStep(g, b);
      ASSERT_TRUE(e);
      Status st = generateFusedKernels(e->plan, 90, true);
      ASSERT_TRUE(st.isOk()) << st.toString();
      std::string all;
      for (const PlanKernel& k : e->plan.kernels) all += k.source;
      for (const char* fn : {"gelu(v", "gelut(v", "gelubwd(v", "gelutbwd(v"})
        EXPECT_EQ(all.find(fn) != std::string::npos, gelu) << fn;
      EXPECT_EQ(all.find(" / 4.900000000e+01f") != std::string::npos, !gelu) << all;
    }
    for (bool nhwc : {true, false}) { // per-channel operands: the index wraps at C
      Graph g("per-channel");
      auto b = buildPerChannel(g, d, nhwc ? Shape{4, 7, 7, 24} : Shape{4, 24, 7, 7}, nhwc);
      ASSERT_TRUE(fuse(g).isOk());
      auto e = emitStep(g, b);
      ASSERT_TRUE(e);
      Status st = generateFusedKernels(e->plan, 90, true);
      ASSERT_TRUE(st.isOk()) << st.toString();
      std::string all;
      for (const PlanKernel& k : e->plan.kernels) all += k.source;
      EXPECT_NE(all.find(nhwc ? "% 24ull" : "/ 49ull % 24ull"), std::string::npos) << all;
    }
  }
}

} // namespace
} // namespace hgp
