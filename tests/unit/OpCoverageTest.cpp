// OpCoverageTest.cpp - the CPU backend executes every op of the op table (runtime/plan/OpList.def),
// or the skip list below says why not (Glow's OperatorTest and its backend skip list). The cases
// (tests/gpu/OpCoverageCases.h) run two steps each on the CPU backend; an op counts as executed
// when a program holding it ran without error. The values are the CPU executors' own tests'
// business (tests/unit/Cpu*Test.cpp, against closed forms, finite differences and PyTorch); this
// test makes sure that no op of the table is left without an executor that runs, and the table's
// properties agree with the switch lists they replaced.
#include "runtime/Backend.h"
#include "runtime/plan/Layout.h"
#include "tests/gpu/OpCoverageCases.h"

#include <gtest/gtest.h>

namespace hgp {
namespace {

using namespace gputest;

/// Ops the CPU backend does not execute, with the reason. Empty: the CPU backend is the
/// reference, and every op has a CPU executor.
const coverage::SkipList kCpuSkips = {};

TEST(OpCoverage, CpuBackendExecutesEveryOpOfTheTable) {
  std::set<OpKind> ran;
  for (const coverage::Case& c : coverage::cases()) {
    SCOPED_TRACE(c.name);
    std::optional<EmittedPlan> e = c.make();
    ASSERT_TRUE(e.has_value());
    const Plan& plan = e->plan;
    std::unique_ptr<Backend> b = createCpuBackend();
    Status st = b->load(plan, InitData{e->data, {}});
    ASSERT_TRUE(st.isOk()) << st.toString();
    bool ok = true;
    for (int run = 0; run < 2 && ok; ++run) {
      for (size_t i = 0; i < plan.tensors.size(); ++i) {
        const PlanTensor& t = plan.tensors[i];
        if (t.storage != StorageClass::Persistent || t.role != TensorRole::Input) continue;
        std::vector<uint8_t> bytes = defaultFeed(t, run);
        ASSERT_TRUE(b->write(int(i), bytes.data()).isOk()) << t.name;
      }
      st = b->run(c.program);
      EXPECT_TRUE(st.isOk()) << "run " << run << ": " << st.toString();
      ok = st.isOk();
    }
    if (!ok) continue;
    std::set<OpKind> ops = coverage::opsOf(plan, c.program);
    EXPECT_FALSE(ops.empty()) << "the plan has no program " << c.program;
    ran.insert(ops.begin(), ops.end());
  }
  coverage::expectCovered(ran, kCpuSkips, "CPU");
}

/// The Props column keeps the facts the hand-kept switch lists held: spot checks of each kind,
/// so that a property dropped from an entry is noticed here and not as a slower plan.
TEST(OpCoverage, OpPropertiesComeFromTheTable) {
  EXPECT_TRUE(opHas(OpKind::Conv, OpFlag::CudaHalf));
  EXPECT_TRUE(opHas(OpKind::FusedElementwise, OpFlag::CudaHalf));
  EXPECT_FALSE(opHas(OpKind::SoftmaxCrossEntropy, OpFlag::CudaHalf));
  EXPECT_FALSE(opHas(OpKind::SgdUpdate, OpFlag::CudaHalf));
  EXPECT_TRUE(opHas(OpKind::SgdUpdate, OpFlag::Optimizer));
  EXPECT_TRUE(opHas(OpKind::AdamUpdate, OpFlag::Optimizer));
  EXPECT_FALSE(opHas(OpKind::BnRunningUpdate, OpFlag::Optimizer));
  EXPECT_TRUE(opHas(OpKind::GlobalAveragePoolBwd, OpFlag::ChannelsLast));
  EXPECT_FALSE(opHas(OpKind::ConvTranspose, OpFlag::ChannelsLast));
  EXPECT_TRUE(
      layoutOf(OpKind::Conv, coverage::attrsOf({{"layout", std::string("nhwc")}})).hasValue());
  EXPECT_FALSE(
      layoutOf(OpKind::Gemm, coverage::attrsOf({{"layout", std::string("nhwc")}})).hasValue());
  EXPECT_TRUE(opHas(OpKind::Sum, OpFlag::LayoutFree));
  EXPECT_FALSE(opHas(OpKind::Cast, OpFlag::LayoutFree));
  EXPECT_TRUE(opHas(OpKind::Cast, OpFlag::Fusible));
  EXPECT_TRUE(opHas(OpKind::Sigmoid, OpFlag::Fusible));
  EXPECT_TRUE(opHas(OpKind::Gelu, OpFlag::Fusible));
  EXPECT_FALSE(opHas(OpKind::Softmax, OpFlag::Fusible));
  EXPECT_TRUE(opHas(OpKind::HardSigmoid, OpFlag::FusedBeta));
  EXPECT_TRUE(opHas(OpKind::Mul, OpFlag::FusedBroadcast));
  EXPECT_FALSE(opHas(OpKind::Relu, OpFlag::FusedBroadcast));
  EXPECT_TRUE(opHas(OpKind::Scale, OpFlag::FusedAlpha));
  EXPECT_TRUE(opHas(OpKind::ClipBwd, OpFlag::FusedBounds));
  EXPECT_EQ(opTraits(OpKind::ConvBwdFilter).batchRule(), BatchRule::Accumulate);
  EXPECT_EQ(opTraits(OpKind::Div).batchRule(), BatchRule::Broadcast);
  EXPECT_EQ(opTraits(OpKind::Split).batchRule(), BatchRule::Axis);
  EXPECT_EQ(opTraits(OpKind::LRNBwd).batchRule(), BatchRule::All);
  EXPECT_EQ(opTraits(OpKind::Gemm).batchRule(), BatchRule::None);
  EXPECT_EQ(opTraits(OpKind::BatchNormBwd).precisionRule(), PrecisionRule::LowFirst2);
  EXPECT_EQ(opTraits(OpKind::AllReduce).precisionRule(), PrecisionRule::F32);
  EXPECT_EQ(opTraits(OpKind::Relu).precisionRule(), PrecisionRule::Low);
  EXPECT_EQ(opTraits(OpKind::AdamUpdate).inPlaceInput(0), 0);
  EXPECT_EQ(opTraits(OpKind::AdamUpdate).inPlaceInput(2), 6);
  EXPECT_EQ(opTraits(OpKind::SgdUpdate).inPlaceInput(1), 5);
  EXPECT_EQ(opTraits(OpKind::MetricsLog).inPlaceInput(1), -1);
  EXPECT_EQ(opTraits(OpKind::LossScaleUpdate).inPlaceInput(1), 1);
  EXPECT_EQ(opTraits(OpKind::Conv).inPlaceInput(0), -1);
}

} // namespace
} // namespace hgp
