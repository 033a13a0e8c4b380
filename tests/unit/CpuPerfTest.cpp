// Timing probes for the CPU backend, disabled by default (benchmarks are not timed tests). Run
// them with --gtest_also_run_disabled_tests --gtest_filter='*Perf*'. They time the executors a
// LeNet-5 and a VGG-11 training step would run and print milliseconds; they check nothing.
#include "CpuTestUtil.h"

#include <chrono>
#include <cstdio>

namespace hgp::cpu::test {
namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

AttrMap convAttrs(int64_t pad) {
  AttrMap a;
  a.setInts("strides", {1, 1});
  a.setInts("pads", {pad, pad, pad, pad});
  a.setInts("dilations", {1, 1});
  a.setInt("group", 1);
  return a;
}

/// Times forward, data gradient (unless first) and filter gradient of one conv layer.
double timeConvLayer(Shape x, Shape w, int64_t pad, bool first, std::mt19937& rng, bool print) {
  HostTensor xs = randomTensor(x, rng), ws = randomTensor(w, rng), b = randomTensor({w[0]}, rng);
  Shape y = {x[0], w[0], x[2] + 2 * pad - w[2] + 1, x[3] + 2 * pad - w[3] + 1};
  HostTensor ys(DType::F32, y), dy = randomTensor(y, rng), dx(DType::F32, x), dw(DType::F32, w);
  AttrMap a = convAttrs(pad);
  a.setInts("x_shape", x);
  a.setInts("w_shape", w);
  auto t0 = Clock::now();
  EXPECT_TRUE(runOp(OpKind::Conv, a, {&xs, &ws, &b}, {&ys}).isOk());
  double fwd = msSince(t0);
  t0 = Clock::now();
  if (!first) EXPECT_TRUE(runOp(OpKind::ConvBwdData, a, {&dy, &ws}, {&dx}).isOk());
  double bwdData = msSince(t0);
  t0 = Clock::now();
  EXPECT_TRUE(runOp(OpKind::ConvBwdFilter, a, {&xs, &dy}, {&dw}).isOk());
  double bwdFilter = msSince(t0);
  if (print)
    std::printf("  conv %s * %s: fwd %.2f ms, dX %.2f ms, dW %.2f ms\n", shapeToString(x).c_str(),
                shapeToString(w).c_str(), fwd, bwdData, bwdFilter);
  return fwd + bwdData + bwdFilter;
}

/// Times forward and both gradients of a fully connected layer y = x W^T.
double timeLinear(int64_t batch, int64_t in, int64_t out, std::mt19937& rng, bool print) {
  HostTensor x = randomTensor({batch, in}, rng), w = randomTensor({out, in}, rng);
  HostTensor dy = randomTensor({batch, out}, rng);
  HostTensor y(DType::F32, {batch, out}), dx(DType::F32, {batch, in}), dw(DType::F32, {out, in});
  AttrMap fwd, dData, dFilter;
  fwd.setInt("transB", 1);
  dFilter.setInt("transA", 1);
  auto t0 = Clock::now();
  EXPECT_TRUE(runOp(OpKind::Gemm, fwd, {&x, &w}, {&y}).isOk());
  EXPECT_TRUE(runOp(OpKind::Gemm, dData, {&dy, &w}, {&dx}).isOk());
  EXPECT_TRUE(runOp(OpKind::Gemm, dFilter, {&dy, &x}, {&dw}).isOk());
  double ms = msSince(t0);
  if (print) std::printf("  linear %lld -> %lld: %.2f ms\n", (long long)in, (long long)out, ms);
  return ms;
}

TEST(CpuPerfTest, DISABLED_LeNet5TrainingStep) {
  std::mt19937 rng(1);
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    bool print = rep == 4;
    double ms = timeConvLayer({64, 1, 28, 28}, {6, 1, 5, 5}, 2, true, rng, print);
    ms += timeConvLayer({64, 6, 14, 14}, {16, 6, 5, 5}, 0, false, rng, print);
    ms += timeLinear(64, 400, 120, rng, print) + timeLinear(64, 120, 84, rng, print) +
          timeLinear(64, 84, 10, rng, print);
    best = std::min(best, ms);
  }
  std::printf("LeNet-5 batch 64 conv+linear fwd+bwd: %.2f ms/step, %.1f s per 938-step epoch\n",
              best, best * 938 / 1000);
}

TEST(CpuPerfTest, DISABLED_Vgg11TrainingStep) {
  std::mt19937 rng(2);
  struct Layer {
    int64_t c, m, hw;
  };
  const Layer layers[] = {{3, 64, 224},   {64, 128, 112}, {128, 256, 56}, {256, 256, 56},
                          {256, 512, 28}, {512, 512, 28}, {512, 512, 14}, {512, 512, 14}};
  double total = 0;
  for (int rep = 0; rep < 2; ++rep) { // the first pass grows the scratch buffers
    bool print = rep == 1, first = true;
    total = 0;
    for (const Layer& l : layers) {
      total += timeConvLayer({2, l.c, l.hw, l.hw}, {l.m, l.c, 3, 3}, 1, first, rng, print);
      first = false;
    }
    total += timeLinear(2, 25088, 4096, rng, print) + timeLinear(2, 4096, 4096, rng, print) +
             timeLinear(2, 4096, 1000, rng, print);
  }
  std::printf("VGG-11 batch 2 conv+linear fwd+bwd: %.0f ms\n", total);
}

} // namespace
} // namespace hgp::cpu::test
