// Tests of the CPU training-control executors (CheckFinite, CounterIncrement, LrSchedule,
// MetricsLog), with the in-place steps run on shared storage, and a sweep that hands every op
// in OpList.def operands outside its contract and expects a clean Internal error.
#include "CpuTestUtil.h"

#include <limits>
#include <numbers>

namespace hgp::cpu::test {
namespace {

TEST(CpuControlTest, CheckFiniteLooksAtEveryInput) {
  std::mt19937 rng(101);
  HostTensor a = randomTensor({100000}, rng), b = randomTensor({3, 3}, rng), ok = zeros({});
  ASSERT_OK(runOp(OpKind::CheckFinite, {}, {&a, &b}, {&ok}));
  EXPECT_EQ(ok[0], 1.f);
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    HostTensor b2 = b;
    b2[8] = bad;
    ASSERT_OK(runOp(OpKind::CheckFinite, {}, {&a, &b2}, {&ok}));
    EXPECT_EQ(ok[0], 0.f);
    HostTensor a2 = a;
    a2[77777] = bad;
    ASSERT_OK(runOp(OpKind::CheckFinite, {}, {&a2, &b}, {&ok}));
    EXPECT_EQ(ok[0], 0.f);
  }
}

TEST(CpuControlTest, CounterIncrementInPlace) {
  HostTensor c = scalarI64(41), yes = scalar(1), no = scalar(0);
  ASSERT_OK(runOp(OpKind::CounterIncrement, {}, {&c}, {&c}));
  EXPECT_EQ(c.i64()[0], 42);
  ASSERT_OK(runOp(OpKind::CounterIncrement, {}, {&c, &no}, {&c}));
  EXPECT_EQ(c.i64()[0], 42);
  ASSERT_OK(runOp(OpKind::CounterIncrement, {}, {&c, &yes}, {&c}));
  EXPECT_EQ(c.i64()[0], 43);
}

double lrAt(const AttrMap& a, int64_t iter) {
  HostTensor it = scalarI64(iter), lr = zeros({});
  Status s = runOp(OpKind::LrSchedule, a, {&it}, {&lr});
  EXPECT_TRUE(s.isOk()) << s.toString();
  return lr[0];
}

TEST(CpuControlTest, LrScheduleKinds) {
  AttrMap c;
  c.setFloat("base_lr", 0.1);
  EXPECT_FLOAT_EQ(lrAt(c, 12345), 0.1f);

  AttrMap step = c;
  step.setString("kind", "step");
  step.setInt("step_size", 10);
  step.setFloat("gamma", 0.5);
  EXPECT_FLOAT_EQ(lrAt(step, 9), 0.1f);
  EXPECT_FLOAT_EQ(lrAt(step, 10), 0.05f);
  EXPECT_FLOAT_EQ(lrAt(step, 35), 0.0125f);
  step.erase("gamma"); // default 0.1
  EXPECT_FLOAT_EQ(lrAt(step, 20), float(0.1 * 0.01));

  AttrMap ms = c;
  ms.setString("kind", "multistep");
  ms.setInts("milestones", {5, 8});
  ms.setFloat("gamma", 0.1);
  EXPECT_FLOAT_EQ(lrAt(ms, 4), 0.1f);
  EXPECT_FLOAT_EQ(lrAt(ms, 5), 0.01f);
  EXPECT_FLOAT_EQ(lrAt(ms, 7), 0.01f);
  EXPECT_FLOAT_EQ(lrAt(ms, 8), float(0.1 * 0.1 * 0.1));

  AttrMap cos = c;
  cos.setString("kind", "cosine");
  cos.setInt("t_max", 100);
  cos.setFloat("eta_min", 0.001);
  for (int64_t it : {0, 1, 50, 99, 100, 150}) {
    double t = double(std::min<int64_t>(it, 100)) / 100;
    EXPECT_FLOAT_EQ(lrAt(cos, it),
                    float(0.001 + (0.1 - 0.001) * (1 + std::cos(std::numbers::pi * t)) / 2));
  }
}

TEST(CpuControlTest, LrScheduleLinearWarmup) {
  AttrMap a;
  a.setFloat("base_lr", 0.2);
  a.setString("kind", "step");
  a.setInt("step_size", 3);
  a.setFloat("gamma", 0.5);
  a.setInt("warmup_steps", 4);
  a.setFloat("warmup_factor", 0.1);
  // torch LinearLR(start_factor=0.1, total_iters=4) chained with StepLR(3, 0.5).
  const double want[] = {0.2 * 0.1,
                         0.2 * (0.1 + 0.9 / 4),
                         0.2 * (0.1 + 0.9 * 2 / 4),
                         0.1 * (0.1 + 0.9 * 3 / 4),
                         0.1,
                         0.1,
                         0.05};
  for (int64_t it = 0; it < 7; ++it) EXPECT_FLOAT_EQ(lrAt(a, it), float(want[it])) << it;
  a.erase("warmup_factor"); // torch's default start_factor 1/3
  EXPECT_FLOAT_EQ(lrAt(a, 0), float(0.2 / 3));
}

TEST(CpuControlTest, MetricsLogWritesTheRingRowInPlace) {
  HostTensor ring = zeros({3, 4});
  HostTensor loss = scalar(2.5f), correct = scalar(17), ok = scalar(1), lr = scalar(0.01f);
  for (int64_t it : {0, 1, 2, 3, 7}) {
    HostTensor iter = scalarI64(it);
    loss[0] = float(it);
    ASSERT_OK(runOp(OpKind::MetricsLog, {}, {&ring, &iter, &loss, &correct, &ok, &lr}, {&ring}));
  }
  // Row 0 saw iterations 0 and 3, row 1 saw 1 and 7, row 2 saw 2.
  EXPECT_EQ(ring.values(), (std::vector<float>{3, 17, 1, 0.01f, 7, 17, 1, 0.01f, 2, 17, 1, 0.01f}));
  // A separate result buffer gets the whole ring with the one row replaced.
  HostTensor copy = zeros({3, 4}), iter = scalarI64(5);
  loss[0] = 5;
  ASSERT_OK(runOp(OpKind::MetricsLog, {}, {&ring, &iter, &loss, &correct, &ok, &lr}, {&copy}));
  EXPECT_EQ(copy.values(), (std::vector<float>{3, 17, 1, 0.01f, 7, 17, 1, 0.01f, 5, 17, 1, 0.01f}));
}

/// Every executor, handed no operands or operands of the wrong dtype, fails cleanly.
TEST(CpuControlTest, EveryOpRejectsOperandsOutsideItsContract) {
  for (int op = 0; op < kNumOps; ++op) {
    SCOPED_TRACE(opName(OpKind(op)));
    EXPECT_EQ(runOp(OpKind(op), {}, {}, {}).code(), ErrorCode::Internal);
    // Six u8 tensors of odd shapes with no attributes: never a valid call.
    std::vector<HostTensor> ts(8, HostTensor(DType::Bool, {2, 3, 5}));
    std::vector<HostTensor*> in, out;
    for (int i = 0; i < 6; ++i) in.push_back(&ts[size_t(i)]);
    for (int i = 6; i < 8; ++i) out.push_back(&ts[size_t(i)]);
    for (size_t nin = 1; nin <= in.size(); ++nin)
      for (size_t nout = 1; nout <= out.size(); ++nout) {
        std::vector<HostTensor*> i2(in.begin(), in.begin() + long(nin)),
            o2(out.begin(), out.begin() + long(nout));
        EXPECT_FALSE(runOp(OpKind(op), {}, i2, o2).isOk())
            << nin << " inputs, " << nout << " outputs";
      }
  }
}

} // namespace
} // namespace hgp::cpu::test
