// The kernel analyzer's occupancy arithmetic and the cost model, on fake targets and hand-built
// plans whose answers are worked out by hand in the comments.
#include "compiler/analysis/CostModel.h"
#include "compiler/analysis/StepWork.h"
#include "ir/Graph.h"
#include "tests/unit/PlanTestUtil.h"

#include <gtest/gtest.h>

namespace hgp {
namespace {

using test::fakeTarget;

LaunchShape shape(int64_t blocks, int threads, int regs, int64_t smem) {
  LaunchShape k;
  k.blocks = blocks;
  k.threads = threads;
  k.regs = regs;
  k.smem = smem;
  return k;
}

TEST(KernelModel, BlocksPerSmTakesTheTightestLimit) {
  Target t = fakeTarget();
  // Threads: 2048 / 256 = 8. Registers: 32 x 32 = 1024 per warp, 8 warps = 8 K per block -> 8.
  EXPECT_EQ(blocksPerSm(t, shape(1, 256, 32, 0)), 8);
  // 128 registers: 4 K per warp, 32 K per block -> 2.
  EXPECT_EQ(blocksPerSm(t, shape(1, 256, 128, 0)), 2);
  // 33 registers round up to 1280 per warp (allocation unit 256): 10 K per block -> 6.
  EXPECT_EQ(blocksPerSm(t, shape(1, 256, 33, 0)), 6);
  // Shared memory: 60 KiB per block -> 1; 200 KiB does not fit at all.
  EXPECT_EQ(blocksPerSm(t, shape(1, 256, 32, 60 << 10)), 1);
  EXPECT_EQ(blocksPerSm(t, shape(1, 256, 32, 200 << 10)), 0);
  // Block slots: 64-thread blocks are limited by the 32 blocks an SM holds.
  EXPECT_EQ(blocksPerSm(t, shape(1, 64, 16, 0)), 32);
}

TEST(KernelModel, WavesAndShare) {
  Target t = fakeTarget();
  // 8 blocks per SM x 10 SMs = 80 at once.
  EXPECT_DOUBLE_EQ(waves(t, shape(40, 256, 32, 0)), 0.5);
  EXPECT_DOUBLE_EQ(gpuShare(t, shape(40, 256, 32, 0)), 0.5);
  EXPECT_DOUBLE_EQ(waves(t, shape(200, 256, 32, 0)), 2.5);
  EXPECT_DOUBLE_EQ(gpuShare(t, shape(200, 256, 32, 0)), 1.0);
  // Fewer blocks than SMs: 5 of the 80 slots. More: the busiest SM holds 2 of its 8.
  EXPECT_DOUBLE_EQ(gpuShare(t, shape(5, 256, 32, 0)), 5.0 / 80);
  EXPECT_DOUBLE_EQ(gpuShare(t, shape(15, 256, 32, 0)), 2.0 / 8);
}

TEST(KernelModel, CoResidency) {
  Target t = fakeTarget();
  LaunchShape half = shape(40, 256, 32, 0); // 4 blocks = 1024 threads on each SM
  EXPECT_TRUE(coResident(t, {half, half}));
  EXPECT_FALSE(coResident(t, {half, half, half})); // 3072 threads
  // Shared memory: two 60 KiB blocks do not fit in 100 KiB.
  LaunchShape big = shape(10, 256, 32, 60 << 10);
  EXPECT_TRUE(coResident(t, {big}));
  EXPECT_FALSE(coResident(t, {big, big}));
}

TEST(KernelModel, ConcurrentTime) {
  Target t = fakeTarget();
  LaunchShape half = shape(40, 256, 32, 0), full = shape(800, 256, 32, 0);
  // Two half-GPU kernels of 1 ms overlap completely; two full ones serialize.
  EXPECT_DOUBLE_EQ(concurrentSeconds(t, {half, half}, {1e-3, 1e-3}), 1e-3);
  EXPECT_DOUBLE_EQ(concurrentSeconds(t, {full, full}, {1e-3, 1e-3}), 2e-3);
  // A long full kernel hides a short half one only partly: max(2, 2 + 0.5) = 2.5 ms.
  EXPECT_DOUBLE_EQ(concurrentSeconds(t, {full, half}, {2e-3, 1e-3}), 2.5e-3);
}

using test::planOf;
using test::step;

TEST(StepWork, ConvolutionPhasesCountTheSameFlops) {
  // X[2,3,8,8] * W[8,3,3,3] -> Y[2,8,8,8]: 2 x (2*64 outputs x 8 channels) x (3*9) = 55296.
  Plan p = planOf({{2, 3, 8, 8}, {8, 3, 3, 3}, {2, 8, 8, 8}});
  StepWork fwd = stepWork(p, step(OpKind::Conv, {0, 1}, {2}));
  StepWork data = stepWork(p, step(OpKind::ConvBwdData, {2, 1}, {0}));
  StepWork filt = stepWork(p, step(OpKind::ConvBwdFilter, {0, 2}, {1}));
  EXPECT_DOUBLE_EQ(fwd.flops, 55296);
  EXPECT_DOUBLE_EQ(data.flops, 55296);
  EXPECT_DOUBLE_EQ(filt.flops, 55296);
  EXPECT_TRUE(fwd.gemm && data.gemm && filt.gemm);
  // The GEMMs: forward 128 x 8 x 27, data 128 x 3 x 72, filter 8 x 27 x 128.
  EXPECT_EQ(fwd.m, 128);
  EXPECT_EQ(fwd.n, 8);
  EXPECT_EQ(fwd.k, 27);
  EXPECT_EQ(data.m, 128);
  EXPECT_EQ(data.n, 3);
  EXPECT_EQ(data.k, 72);
  EXPECT_EQ(filt.m, 8);
  EXPECT_EQ(filt.n, 27);
  EXPECT_EQ(filt.k, 128);
  // Bytes: every operand once, 4 bytes each: 384 + 216 + 1024 elements.
  EXPECT_DOUBLE_EQ(fwd.bytes, 4.0 * (384 + 216 + 1024));
}

TEST(StepWork, GroupedConvolutionAndGemm) {
  // Depthwise: X[1,8,4,4], W[8,1,3,3], group 8: 2 x 16 x 8 x 1 x 9 = 2304.
  Plan p = planOf({{1, 8, 4, 4}, {8, 1, 3, 3}, {1, 8, 4, 4}, {5, 7}, {7, 3}, {5, 3}});
  PlanStep dw = step(OpKind::Conv, {0, 1}, {2});
  dw.attrs.setInt("group", 8);
  StepWork w = stepWork(p, dw);
  EXPECT_DOUBLE_EQ(w.flops, 2304);
  EXPECT_EQ(w.groups, 8);
  EXPECT_EQ(w.n, 1);
  EXPECT_FALSE(w.gemm); // a direct kernel, not a tensor-core GEMM
  StepWork g = stepWork(p, step(OpKind::Gemm, {3, 4}, {5}));
  EXPECT_DOUBLE_EQ(g.flops, 2.0 * 5 * 3 * 7);
}

TEST(StepWork, AnIrNodeCountsAsItsPlanStep) {
  // hgpc inspect (IR nodes) and the cost model (plan steps) share one FLOP model: the same conv
  // and the same max pooling, in both forms, count the same FLOPs and bytes.
  Graph g;
  Value* x = *g.addGraphValue("x", TensorRole::Input, {DType::F32, {2, 3, 8, 8}});
  Value* w = *g.addGraphValue("w", TensorRole::Param, {DType::F32, {8, 3, 3, 3}});
  AttrMap conv;
  conv.setInts("strides", {1, 1});
  conv.setInts("pads", {1, 1, 1, 1});
  conv.setInts("dilations", {1, 1});
  conv.setInt("group", 1);
  Node* c = *g.addNode(OpKind::Conv, {x, w}, conv);
  AttrMap pool;
  pool.setInts("kernel_shape", {2, 2});
  pool.setInts("strides", {2, 2});
  pool.setInts("pads", {0, 0, 0, 0});
  pool.setInts("dilations", {1, 1});
  pool.setInt("ceil_mode", 0);
  Node* m = *g.addNode(OpKind::MaxPool, {c->output(0)}, pool);
  Plan p = planOf({{2, 3, 8, 8}, {8, 3, 3, 3}, {2, 8, 8, 8}, {2, 8, 4, 4}});
  StepWork a = nodeWork(*c), b = stepWork(p, step(OpKind::Conv, {0, 1}, {2}));
  EXPECT_DOUBLE_EQ(a.flops, 55296);
  EXPECT_DOUBLE_EQ(a.flops, b.flops);
  EXPECT_DOUBLE_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.k, b.k);
  PlanStep ps = step(OpKind::MaxPool, {2}, {3});
  ps.attrs = pool;
  StepWork mp = nodeWork(*m), mq = stepWork(p, ps);
  EXPECT_DOUBLE_EQ(mp.flops, mq.flops);
  EXPECT_DOUBLE_EQ(mp.bytes, mq.bytes);
  // Memory-bound: one FLOP per element of the largest operand, the input's 1024.
  EXPECT_DOUBLE_EQ(mp.flops, 1024);
}

TEST(CostModel, SerialSumAndCriticalPath) {
  Target t = fakeTarget();
  // a = relu(x); b = relu(a); c = relu(x) on a big tensor: the chain x->a->b is the critical path.
  Plan p = planOf({{1 << 20}, {1 << 20}, {1 << 20}, {1 << 20}});
  PlanProgram prog;
  prog.name = "train";
  prog.steps = {step(OpKind::Relu, {0}, {1}), step(OpKind::Relu, {1}, {2}),
                step(OpKind::Relu, {0}, {3})};
  ProgramCost c = programCost(t, p, prog, Precision::TF32);
  ASSERT_EQ(c.steps.size(), 3u);
  // Each: 8 MiB moved at the calibrated fraction of 1 TB/s plus 1 us of launch and the fixed
  // cost of a kernel.
  CostCalibration cal;
  double each = 1e-6 + cal.kernelSeconds + 8.0 * (1 << 20) / (1e12 * cal.memoryEfficiency);
  EXPECT_NEAR(c.steps[0].seconds, each, 1e-12);
  EXPECT_NEAR(c.serialSeconds, 3 * each, 1e-12);
  EXPECT_NEAR(c.criticalPathSeconds, 2 * each, 1e-12);
  EXPECT_EQ(c.criticalPath, (std::vector<int>{0, 1}));
  EXPECT_TRUE(c.steps[1].onCriticalPath);
  EXPECT_FALSE(c.steps[2].onCriticalPath);
}

TEST(CostModel, TensorCoresOnlyForConvolutionsAndFasterThanFp32) {
  Target t = fakeTarget();
  Plan p = planOf({{64, 64, 56, 56}, {64, 64, 3, 3}, {64, 64, 56, 56}});
  PlanStep conv = step(OpKind::Conv, {0, 1}, {2});
  double tf32 = stepCost(t, p, conv, Precision::TF32).seconds, fp32 = stepCost(t, p, conv, Precision::FP32).seconds;
  EXPECT_LT(tf32, fp32);
  // A ReLU costs the same in either mode.
  PlanStep relu = step(OpKind::Relu, {0}, {2});
  EXPECT_DOUBLE_EQ(stepCost(t, p, relu, Precision::TF32).seconds, stepCost(t, p, relu, Precision::FP32).seconds);
}

TEST(KernelModel, SplitKFillsOneWave) {
  Target t = fakeTarget(); // 10 SMs; 128-register, 64 KiB GEMM blocks: 1 per SM, 10 slots
  // A weight gradient of a 1x1 conv 64 -> 64 over 2 x 64 x 64 pixels: one 64 x 64 output tile
  // and a reduction of 8,192. Splitting it 10 ways fills the 10 slots (chunks of 819 >= 256).
  Plan p = planOf({{2, 64, 64, 64}, {2, 64, 64, 64}, {64, 64, 1, 1}});
  PlanStep wgrad = step(OpKind::ConvBwdFilter, {0, 1}, {2});
  LaunchShape k = estimateLaunch(t, p, wgrad);
  int per = blocksPerSm(t, k);
  ASSERT_GT(per, 0);
  EXPECT_EQ(k.splitK, 10 / per);
  EXPECT_EQ(k.blocks, k.splitK);
  // The partial tiles (split x 64 x 64 x 4 bytes, written and read once) cost a second kernel.
  StepCost c = stepCost(t, p, wgrad, Precision::TF32);
  CostCalibration cal;
  double partials = 2.0 * double(k.splitK) * 64 * 64 * 4 / (t.memBandwidth * cal.memoryEfficiency);
  EXPECT_NEAR(c.launchSeconds, 2 * t.launchSeconds, 1e-15);
  EXPECT_GT(c.seconds, 2 * (t.launchSeconds + cal.kernelSeconds) + partials);
}

TEST(KernelModel, ConcurrentKernelsShareTheBandwidthAndTheLaunches) {
  Target t = fakeTarget();
  LaunchShape quarter = shape(20, 256, 32, 0); // 20 of 80 slots
  // By their SMs four quarters overlap in full; streaming at the whole bandwidth they do not.
  EXPECT_DOUBLE_EQ(concurrentSeconds(t, {quarter, quarter}, {1e-3, 1e-3}), 1e-3);
  EXPECT_DOUBLE_EQ(concurrentSeconds(t, {quarter, quarter}, {1e-3, 1e-3}, {1.0, 1.0}), 2e-3);
  EXPECT_DOUBLE_EQ(concurrentSeconds(t, {quarter, quarter}, {1e-3, 1e-3}, {0.5, 0.5}), 1e-3);
  // Launch gaps add up: 2 x 0.1 ms of launches plus the overlapped 0.9 ms.
  EXPECT_NEAR(concurrentSeconds(t, {quarter, quarter}, {1e-3, 1e-3}, {}, {1e-4, 1e-4}), 1.1e-3,
              1e-15);
}

TEST(Target, KnownAndUnknownNames) {
  auto h200 = findTarget("h200");
  ASSERT_TRUE(h200.hasValue());
  EXPECT_EQ(h200->sms, 132);
  EXPECT_GT(h200->peak(Precision::TF32), h200->peak(Precision::FP32));
  auto v100 = findTarget("v100");
  ASSERT_TRUE(v100.hasValue());
  EXPECT_DOUBLE_EQ(v100->peak(Precision::TF32), v100->fp32); // no TF32 before Ampere
  auto bad = findTarget("h900");
  ASSERT_FALSE(bad.hasValue());
  EXPECT_EQ(bad.status().code(), ErrorCode::Usage);
  EXPECT_NE(bad.status().message().find("h200, h100, a100"), std::string::npos);
}

} // namespace
} // namespace hgp
