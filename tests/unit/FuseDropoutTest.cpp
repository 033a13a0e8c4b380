// Dropout and DropoutBwd inside FusedElementwise (docs/fusion.md, "Dropout in fused chains"):
// the fuse-elementwise pass folds a classifier's Relu -> Dropout and DropoutBwd -> ReluBwd into one
// step each, the program text and its type and shape rules accept the i64 counter exactly where a
// dropout reads it, and the fused results are the unfused ones bit for bit over several
// iterations (a new mask each, the same mask fused and unfused) on the CPU and in the generated
// kernel emulated on the host, vector and scalar paths, at sizes that are no multiple of 4 or 8.
#include "FusedKernelEmulator.h"

#include "compiler/codegen/GenerateKernels.h"
#include "compiler/codegen/Nvrtc.h"
#include "ir/OpInfo.h"
#include "ir/Printer.h"

#include <gtest/gtest.h>

namespace hgp {
namespace {

using namespace fusiontest;

/// The iterations the tests run: consecutive steps and one past 2^32 (the counter's high word).
const int64_t kIters[] = {0, 1, 2, (int64_t(1) << 33) + 5};

TEST(FuseDropout, ClassifierEpilogueAndItsGradientBecomeOneStepEach) {
  // Softmax (not fusible; Sigmoid and Gelu now are) stands in for the Gemms around the
  // classifier's Relu -> Dropout.
  AttrMap exact;
  exact.setInt("axis", 1);
  Graph g("classifier");
  TensorType t{DType::F32, {8, 64}};
  Value* a = *g.addGraphValue("a", TensorRole::Input, t);
  Value* b = *g.addGraphValue("b", TensorRole::Input, t);
  Value* iter = *g.addGraphValue("iter", TensorRole::State, {DType::I64, {}});
  Value* y = node(g, OpKind::Relu, {node(g, OpKind::Softmax, {a}, exact)});
  Value* z = node(g, OpKind::Dropout, {y, iter}, dropout(0.5, 42, 3));
  Value* dz = node(g, OpKind::Softmax, {b}, exact);
  Value* dy = node(g, OpKind::ReluBwd, {node(g, OpKind::DropoutBwd, {dz, iter}, dropout(0.5, 42, 3)), y});
  g.addOutput(node(g, OpKind::Softmax, {z}, exact));
  g.addOutput(node(g, OpKind::Softmax, {dy}, exact));
  ASSERT_TRUE(fuse(g).isOk()) << printGraph(g);
  EXPECT_EQ(countOps(g, OpKind::Dropout), 0) << printGraph(g);
  EXPECT_EQ(countOps(g, OpKind::DropoutBwd), 0);
  EXPECT_EQ(countOps(g, OpKind::Relu), 0);
  EXPECT_EQ(countOps(g, OpKind::ReluBwd), 0);
  auto fused = fusedNodes(g);
  ASSERT_EQ(fused.size(), 2u) << printGraph(g);
  // Forward: y is also a result (the backward's ReluBwd reads it); the counter is input %1.
  EXPECT_EQ(fused[0]->attrs().getString("program"), "Relu f32 %0; Dropout f32 %2 %1 ratio=0.5 seed=42 key=3");
  EXPECT_EQ(fused[0]->attrs().getInts("results"), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(fused[0]->input(1), iter);
  EXPECT_EQ(fused[1]->attrs().getString("program"),
            "DropoutBwd f32 %0 %1 ratio=0.5 seed=42 key=3; ReluBwd f32 %3 %2");
  EXPECT_EQ(fused[1]->input(1), iter);
  EXPECT_EQ(fused[1]->numOutputs(), 1u);
  EXPECT_TRUE(verifyGraph(g).isOk());
}

TEST(FuseDropout, DropoutWithoutACounterStaysOut) {
  Graph g("out");
  TensorType t{DType::F32, {4, 8}};
  Value* a = *g.addGraphValue("a", TensorRole::Input, t);
  Value* y = node(g, OpKind::Relu, {a});
  Value* z = node(g, OpKind::Dropout, {y}, dropout(0.5, 1, 2)); // no counter: a copy
  g.addOutput(z);
  ASSERT_TRUE(fuse(g).isOk());
  EXPECT_EQ(countOps(g, OpKind::Dropout), 1) << printGraph(g);
  EXPECT_EQ(countOps(g, OpKind::FusedElementwise), 0) << printGraph(g);
}

TEST(FuseDropout, ProgramTextAndTypeRulesAcceptTheCounterExactlyWhereADropoutReadsIt) {
  AttrMap a;
  a.setInts("results", {2});
  auto parse = [&](const std::string& text, int numInputs) {
    a.setString("program", text);
    return parseFusedProgram(a, numInputs);
  };
  const std::vector<DType> xc{DType::BF16, DType::I64};
  // The ratio reads back as the same double and prints short.
  auto p = parse("Dropout bf16 %0 %1 ratio=0.1 seed=-5 key=9223372036854775807", 2);
  ASSERT_TRUE(p.hasValue()) << p.status().toString();
  EXPECT_EQ(p->instrs[0].ratio, 0.1);
  EXPECT_EQ(p->instrs[0].seed, -5);
  EXPECT_EQ(p->instrs[0].key, INT64_MAX);
  EXPECT_EQ(p->text(), "Dropout bf16 %0 %1 ratio=0.1 seed=-5 key=9223372036854775807");
  EXPECT_TRUE(checkFusedTypes(*p, xc).hasValue());
  // Attributes: all three, numbers, ratio in [0, 1), not on other ops.
  EXPECT_FALSE(parse("Dropout bf16 %0 %1 ratio=0.5 seed=1", 2).hasValue());
  EXPECT_FALSE(parse("Dropout bf16 %0 %1 ratio=1 seed=1 key=2", 2).hasValue());
  EXPECT_FALSE(parse("Dropout bf16 %0 %1 ratio=-0.1 seed=1 key=2", 2).hasValue());
  EXPECT_FALSE(parse("Dropout bf16 %0 %1 ratio=0.5 seed=1x key=2", 2).hasValue());
  EXPECT_FALSE(parse("Dropout bf16 %0 %1 ratio=0.5 seed=1 key=2 key=3", 2).hasValue());
  EXPECT_FALSE(parse("Dropout bf16 %0 ratio=0.5 seed=1 key=2", 2).hasValue());
  EXPECT_FALSE(parse("Relu bf16 %0 seed=1", 2).hasValue());
  // The counter: an i64 input, read only as a dropout's second operand, never a result.
  auto types = [&](const std::string& text, std::vector<DType> in, std::vector<int64_t> results) {
    a.setInts("results", results);
    auto q = parse(text, int(in.size()));
    return q.hasValue() && checkFusedTypes(*q, in).hasValue();
  };
  EXPECT_TRUE(types("Relu bf16 %0; DropoutBwd bf16 %2 %1 ratio=0.5 seed=1 key=2", xc, {3}));
  EXPECT_FALSE(types("Dropout bf16 %0 %0 ratio=0.5 seed=1 key=2", xc, {2}));    // a float counter
  EXPECT_FALSE(types("Relu bf16 %0; Dropout bf16 %0 %2 ratio=0.5 seed=1 key=2", xc, {3})); // a value
  EXPECT_FALSE(types("Dropout bf16 %1 %1 ratio=0.5 seed=1 key=2", xc, {2}));    // counter as value
  EXPECT_FALSE(types("Add bf16 %0 %1", xc, {2}));                               // i64 in an Add
  EXPECT_FALSE(types("Relu bf16 %0", xc, {2}));                                 // unused i64 input
  EXPECT_FALSE(types("Dropout bf16 %0 %1 ratio=0.5 seed=1 key=2", xc, {1}));    // counter result
  EXPECT_FALSE(types("Dropout bf16 %0 %1 ratio=0.5 seed=1 key=2", {DType::BF16, DType::I32}, {2}));
  // The shape rule: float operands of one shape, the counter a scalar.
  a.setString("program", "Dropout f32 %0 %1 ratio=0.5 seed=1 key=2");
  a.setInts("results", {2});
  std::vector<TensorType> out;
  TensorType x{DType::F32, {3, 5}};
  EXPECT_TRUE(inferTypes(OpKind::FusedElementwise, a, {x, {DType::I64, {}}}, 1, out).isOk());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape, x.shape);
  EXPECT_FALSE(inferTypes(OpKind::FusedElementwise, a, {x, {DType::I64, {1}}}, 1, out).isOk());
  EXPECT_FALSE(inferTypes(OpKind::FusedElementwise, a, {x, {DType::I64, {3, 5}}}, 1, out).isOk());
  EXPECT_FALSE(inferTypes(OpKind::FusedElementwise, a, {x, {DType::F32, {}}}, 1, out).isOk());
}

/// The plan of buildDropoutChain in dtype d, fused or not.
std::optional<EmittedPlan> dropoutPlan(DType d, const Shape& shape, bool fused) {
  Graph g(fused ? "fused" : "plain");
  auto bindings = buildDropoutChain(g, d, shape);
  if (fused) {
    EXPECT_TRUE(fuse(g).isOk());
    EXPECT_EQ(countOps(g, OpKind::Dropout) + countOps(g, OpKind::DropoutBwd), 0) << printGraph(g);
  }
  return emitStep(g, bindings);
}

/// How many elements of an f32 tensor are exactly zero.
int64_t zeros(const std::vector<uint8_t>& bytes) {
  int64_t n = 0;
  for (size_t i = 0; i < bytes.size(); i += 4) {
    float f;
    std::memcpy(&f, bytes.data() + i, 4);
    n += f == 0.f;
  }
  return n;
}

TEST(FuseDropout, CpuFusedEqualsUnfusedBitForBitOverIterations) {
  for (DType d : {DType::F32, DType::BF16, DType::F16})
    for (Shape shape : {Shape{2, 3, 5, 7}, Shape{3, 1001}}) {
      SCOPED_TRACE(std::string(dtypeName(d)) + " " + shapeToString(shape));
      auto plain = dropoutPlan(d, shape, false), fused = dropoutPlan(d, shape, true);
      ASSERT_TRUE(plain && fused);
      std::map<std::string, std::vector<uint8_t>> previous;
      for (int64_t iter : kIters) {
        SCOPED_TRACE("iter " + std::to_string(iter));
        auto bp = createCpuBackend(), bf = createCpuBackend();
        auto want = runStep(*bp, *plain, 5, iter), got = runStep(*bf, *fused, 5, iter);
        ASSERT_EQ(want.size(), 4u);
        for (const auto& [name, bytes] : want) EXPECT_TRUE(bytes == got[name]) << name << " differs";
        // A real mask: about half of the positive half of a dropped (out.0), a new one each step;
        // ratio 0 is the identity at every step.
        int64_t n = numElements(shape), z = zeros(got["out.0"]);
        EXPECT_GT(z, n / 2 + n / 8) << "too few dropped";
        EXPECT_LT(z, n - n / 8) << "too many dropped";
        if (!previous.empty()) {
          EXPECT_FALSE(got["out.0"] == previous["out.0"]) << "the mask did not change";
          EXPECT_FALSE(got["out.1"] == previous["out.1"]);
          EXPECT_TRUE(got["out.3"] == previous["out.3"]);
        }
        previous = got;
      }
    }
}

TEST(FusedKernelCodegen, DropoutKernelEmulatedOnTheHostMatchesTheCpu) {
  if (!haveHostCompiler()) GTEST_SKIP() << "no host C++ compiler";
  KernelEmulator emu;
  // 210 and 8002: no multiple of 4 or 8 (a scalar tail after the vectors; 8002 also wraps the
  // grid-stride loop of 768 threads); 7: scalar only; 512: vectors only.
  for (DType d : {DType::F32, DType::BF16})
    for (Shape shape : {Shape{2, 3, 5, 7}, Shape{2, 4001}, Shape{7}, Shape{4, 8, 16}})
      for (int64_t iter : {kIters[1], kIters[3]}) {
        SCOPED_TRACE(std::string(dtypeName(d)) + " " + shapeToString(shape) + " iter " + std::to_string(iter));
        auto e = dropoutPlan(d, shape, true);
        ASSERT_TRUE(e);
        auto cpu = createCpuBackend();
        ASSERT_FALSE(runStep(*cpu, *e, 9, iter).empty());
        EXPECT_GE(emu.checkSteps(*e, *cpu), 2);
      }
}

TEST(FusedKernelCodegen, NvrtcCompilesTheDropoutKernels) {
  if (Status st = loadNvrtc(); !st) GTEST_SKIP() << st.message();
  for (int arch : {90, 75})
    for (DType d : {DType::F32, DType::BF16}) {
      auto e = dropoutPlan(d, {4, 8, 16}, true);
      ASSERT_TRUE(e);
      Status st = generateFusedKernels(e->plan, arch, true);
      ASSERT_TRUE(st.isOk()) << "sm_" << arch << ": " << st.toString();
      bool philox = false;
      for (const PlanKernel& k : e->plan.kernels) philox = philox || k.source.find("philox(") != std::string::npos;
      EXPECT_TRUE(philox);
    }
}

} // namespace
} // namespace hgp
