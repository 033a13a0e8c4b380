// Tests of the fuse-elementwise pass (passes/FuseElementwise.cpp), the FusedElementwise CPU
// executor and program text (runtime/plan/FusedProgram.h), and the CUDA kernel generator with
// NVRTC (compiler/codegen): what is fused and what must not be, bit-identical results of fused
// and unfused plans on the CPU in f32, bf16 and f16, and generated source that NVRTC compiles to
// an sm_90 cubin (skipped where NVRTC cannot be loaded).
#include "FusedKernelEmulator.h"

#include "compiler/codegen/FusedKernelSource.h"
#include "compiler/codegen/GenerateKernels.h"
#include "compiler/codegen/Nvrtc.h"
#include "ir/Printer.h"
#include "runtime/plan/FusedProgram.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

namespace hgp {
namespace {

using namespace fusiontest;

const Node* onlyFused(const Graph& g) {
  for (const Node* n : g.nodes())
    if (n->op() == OpKind::FusedElementwise) return n;
  return nullptr;
}

TEST(FuseElementwise, FusesAWholeChainAndKeepsOutsideUsesAsResults) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    Graph g("chain");
    buildChain(g, d, {2, 3, 5, 7});
    size_t before = g.nodes().size();
    ASSERT_TRUE(fuse(g).isOk()) << printGraph(g);
    // A node joins one group (its first producer's); the Casts of b and c (in 16 bits), which
    // start groups of their own, are left alone and then join the group that reads them.
    int casts = 0;
    ASSERT_EQ(g.nodes().size(), 1u) << printGraph(g);
    EXPECT_EQ(countOps(g, OpKind::Cast), 0);
    const Node* f = onlyFused(g);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->numInputs(), 3u);  // a, b, c (or their casts)
    EXPECT_EQ(f->numOutputs(), 4u); // out.0, out.1 (also used inside), out.2, out.3
    auto p = parseFusedProgram(f->attrs(), int(f->numInputs()));
    ASSERT_TRUE(p.hasValue()) << p.status().toString();
    EXPECT_EQ(p->instrs.size(), before - size_t(casts));
    // The program text parses back to itself.
    AttrMap again;
    p->store(again);
    EXPECT_EQ(again.getString("program"), f->attrs().getString("program"));
  }
}

TEST(FuseElementwise, AddReluInResidualFormAndSumReluBwd) {
  Graph g("resid");
  TensorType t{DType::BF16, {4, 8, 3, 3}};
  Value* a = *g.addGraphValue("a", TensorRole::Input, t);
  Value* b = *g.addGraphValue("b", TensorRole::Input, t);
  Value* y = node(g, OpKind::Relu, {node(g, OpKind::Add, {a, b})});
  Value* dx = node(g, OpKind::ReluBwd, {node(g, OpKind::Sum, {a, b, y}), y});
  g.addOutput(y);
  g.addOutput(dx);
  ASSERT_TRUE(fuse(g).isOk());
  ASSERT_EQ(g.nodes().size(), 1u) << printGraph(g);
  EXPECT_EQ(g.nodes()[0]->attrs().getString("program"),
            "Add bf16 %0 %1; Relu bf16 %2; Sum bf16 %0 %1 %3; ReluBwd bf16 %4 %3");
  EXPECT_EQ(g.nodes()[0]->numOutputs(), 2u);
}

TEST(FuseElementwise, NeverMakesACycle) {
  // s = a + b; g = softmax(s) (not fusible); t = s * g. Fusing Mul into Add's group would need
  // the group before and after the Softmax.
  Graph g("cycle");
  TensorType t{DType::F32, {2, 16}};
  Value* a = *g.addGraphValue("a", TensorRole::Input, t);
  Value* b = *g.addGraphValue("b", TensorRole::Input, t);
  Value* s = node(g, OpKind::Add, {a, b});
  AttrMap exact;
  exact.setInt("axis", 1);
  Value* sg = node(g, OpKind::Softmax, {s}, exact);
  Value* m = node(g, OpKind::Mul, {s, sg});
  g.addOutput(node(g, OpKind::Relu, {m}));
  ASSERT_TRUE(fuse(g).isOk()) << printGraph(g);
  // Add stays alone; Mul and Relu fuse after the Softmax.
  EXPECT_EQ(countOps(g, OpKind::Add), 1) << printGraph(g);
  EXPECT_EQ(countOps(g, OpKind::FusedElementwise), 1) << printGraph(g);
  EXPECT_TRUE(verifyGraph(g).isOk());
}

TEST(FuseElementwise, SideEffectOpsBroadcastsAndCarriesStayOut) {
  Graph g("barriers");
  TensorType t{DType::F32, {2, 3, 4}};
  Value* a = *g.addGraphValue("a", TensorRole::Input, t);
  Value* w = *g.addGraphValue("w", TensorRole::State, t);
  Value* bias = *g.addGraphValue("bias", TensorRole::Input, {DType::F32, {4}});
  // An Add that broadcasts a lower-rank operand (a bias) is fused: the bias is a per-channel
  // input of the step (fusedOperandMap pads it to [1,1,4], element i % 4).
  Value* x = node(g, OpKind::Add, {a, bias});
  Value* r = node(g, OpKind::Relu, {x});
  // The value the finiteness check reads is also a result of the group.
  Value* s = node(g, OpKind::Mul, {r, a});
  Value* ok = node(g, OpKind::CheckFinite, {s});
  Value* y = node(g, OpKind::Neg, {s});
  // A carried result stays an op of its own.
  Value* next = node(g, OpKind::Add, {w, y});
  g.addCarry(w, next);
  g.addOutput(ok);
  g.addOutput(y);
  ASSERT_TRUE(fuse(g).isOk()) << printGraph(g);
  EXPECT_EQ(countOps(g, OpKind::CheckFinite), 1);
  EXPECT_EQ(countOps(g, OpKind::Add), 1) << printGraph(g); // the carried one
  const Node* f = onlyFused(g);
  ASSERT_NE(f, nullptr) << printGraph(g);
  EXPECT_EQ(f->attrs().getString("program"), "Add f32 %0 %1; Relu f32 %2; Mul f32 %3 %0; Neg f32 %4");
  EXPECT_EQ(f->input(1)->name(), "bias");
  EXPECT_EQ(f->numOutputs(), 2u); // s for CheckFinite, y for the carry and the output
  EXPECT_TRUE(verifyGraph(g).isOk());
}

TEST(FuseElementwise, CpuFusedAndUnfusedAreBitIdentical) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    for (Shape shape : {Shape{2, 3, 5, 7}, Shape{4, 8, 16}}) {
      Graph plain("plain"), fused("fused");
      auto bp = buildChain(plain, d, shape);
      auto bf = buildChain(fused, d, shape);
      ASSERT_TRUE(fuse(fused).isOk());
      ASSERT_EQ(countOps(fused, OpKind::FusedElementwise), 1);
      auto ep = emitStep(plain, bp), ef = emitStep(fused, bf);
      ASSERT_TRUE(ep && ef);
      for (uint64_t seed : {1, 2}) {
        auto bpl = createCpuBackend(), bfu = createCpuBackend();
        auto want = runStep(*bpl, *ep, seed), got = runStep(*bfu, *ef, seed);
        ASSERT_EQ(want.size(), 4u);
        for (const auto& [name, bytes] : want)
          EXPECT_TRUE(bytes == got[name]) << dtypeName(d) << " " << shapeToString(shape) << " "
                                          << name << " differs";
      }
    }
  }
}

TEST(FuseElementwise, ProgramErrorsAreClean) {
  AttrMap a;
  a.setString("program", "Add f32 %0 %5");
  a.setInts("results", {2});
  EXPECT_FALSE(parseFusedProgram(a, 2).hasValue());
  a.setString("program", "Conv f32 %0 %1");
  EXPECT_FALSE(parseFusedProgram(a, 2).hasValue());
  a.setString("program", "Add bf16 %0 %1");
  auto p = parseFusedProgram(a, 2);
  ASSERT_TRUE(p.hasValue());
  EXPECT_FALSE(checkFusedTypes(*p, {DType::F32, DType::BF16}).hasValue());
}

TEST(FusedKernelCodegen, NvrtcCompilesEveryOpToAnSm90Cubin) {
  if (Status st = loadNvrtc(); !st) GTEST_SKIP() << st.message();
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    Graph g("chain");
    auto b = buildChain(g, d, {4, 8, 16});
    ASSERT_TRUE(fuse(g).isOk());
    auto e = emitStep(g, b);
    ASSERT_TRUE(e);
    ASSERT_TRUE(generateFusedKernels(e->plan, 90, true).isOk());
    ASSERT_EQ(e->plan.kernels.size(), 1u);
    const PlanKernel& k = e->plan.kernels[0];
    EXPECT_EQ(k.arch, 90);
    // An ELF image (the cubin) with the entry point in it.
    ASSERT_GT(k.cubin.size(), 4u);
    EXPECT_EQ(std::memcmp(k.cubin.data(), "\x7f" "ELF", 4), 0);
    EXPECT_NE(std::string(k.cubin.begin(), k.cubin.end()).find(kFusedEntry), std::string::npos);
    for (const char* op : {"__fadd_rn", "__fsub_rn", "__fmul_rn", "relu(", "clip(", " / "})
      EXPECT_NE(k.source.find(op), std::string::npos) << op;
    // The plan text keeps the kernel and parses back to the same plan.
    std::string text = printPlan(e->plan);
    auto back = parsePlan(text);
    ASSERT_TRUE(back.hasValue()) << back.status().toString();
    ASSERT_EQ(back->kernels.size(), 1u);
    EXPECT_EQ(back->kernels[0].cubin, k.cubin);
    EXPECT_EQ(back->kernels[0].source, k.source);
    EXPECT_EQ(printPlan(*back), text);
  }
  // Other targets (software bf16 rounding below sm_80; CUDA 13's NVRTC has no sm_70).
  for (int arch : {75, 80, 89}) {
    Graph g("chain");
    auto b = buildChain(g, DType::BF16, {4, 8, 16});
    ASSERT_TRUE(fuse(g).isOk());
    auto e = emitStep(g, b);
    ASSERT_TRUE(e);
    Status st = generateFusedKernels(e->plan, arch, true);
    EXPECT_TRUE(st.isOk()) << "sm_" << arch << ": " << st.toString();
  }
}

// ---- The generated kernel, emulated on the host (FusedKernelEmulator.h) -----------------------

TEST(FusedKernelCodegen, GeneratedKernelEmulatedOnTheHostMatchesTheCpu) {
  if (!haveHostCompiler()) GTEST_SKIP() << "no host C++ compiler";
  KernelEmulator emu;
  for (DType d : {DType::F32, DType::BF16, DType::F16})
    for (Shape shape : {Shape{2, 3, 5, 7}, Shape{4, 8, 16}}) {
      SCOPED_TRACE(std::string(dtypeName(d)) + " " + shapeToString(shape));
      Graph g("fused");
      auto bindings = buildChain(g, d, shape);
      ASSERT_TRUE(fuse(g).isOk());
      auto e = emitStep(g, bindings);
      ASSERT_TRUE(e);
      // The CPU runs the fused plan; its step's operands and results are the reference.
      auto cpu = createCpuBackend();
      ASSERT_FALSE(runStep(*cpu, *e, 3).empty());
      EXPECT_EQ(emu.checkSteps(*e, *cpu), 1);
    }
}

} // namespace
} // namespace hgp
