// Bandwidth of the memory-bound CUDA executors at ResNet-50 (batch 128) sizes. Not a test: the
// cases are DISABLED_ and run only on request,
//   hgp_gpu_tests --gtest_also_run_disabled_tests --gtest_filter='*Bench*'
// Each case is a one-op plan replayed as a CUDA graph; it prints the time per step and the
// effective bandwidth (the bytes the op must move at least, over that time). The H200 copies
// about 4.3 TB/s (read + write) device to device.
#include "tests/gpu/GpuTestUtil.h"

#include <chrono>
#include <cstdio>

namespace hgp::gputest {
namespace {

AttrMap attrs(std::initializer_list<std::pair<const char*, AttrValue>> kv) {
  AttrMap a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

TensorType f32(Shape s) {
  return {DType::F32, std::move(s)};
}

/// Replays the plan's program `iters` times and returns milliseconds per run.
double msPerRun(const EmittedPlan& e, int iters = 50) {
  auto b = makeGpuBackend(BackendOptions{});
  EXPECT_TRUE(b.hasValue());
  if (!b.hasValue()) return 0;
  Status st = (*b)->load(e.plan, InitData{e.data, {}});
  EXPECT_TRUE(st.isOk()) << st.toString();
  // The smallest tensor: reading it waits for the stream.
  int sync = 0;
  for (size_t i = 0; i < e.plan.tensors.size(); ++i)
    if (e.plan.tensors[i].bytes() < e.plan.tensors[size_t(sync)].bytes()) sync = int(i);
  std::vector<uint8_t> tmp(size_t(e.plan.tensors[size_t(sync)].bytes()));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE((*b)->run("step").isOk()); // eager, captures, replay
  EXPECT_TRUE((*b)->read(sync, tmp.data()).isOk());
  // What the read itself costs (it may be a large tensor), to take off the total.
  auto r0 = std::chrono::steady_clock::now();
  EXPECT_TRUE((*b)->read(sync, tmp.data()).isOk());
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) (void)(*b)->run("step");
  EXPECT_TRUE((*b)->read(sync, tmp.data()).isOk());
  auto t1 = std::chrono::steady_clock::now();
  double readMs = std::chrono::duration<double, std::milli>(t0 - r0).count();
  return (std::chrono::duration<double, std::milli>(t1 - t0).count() - readMs) / iters;
}

/// A one-op graph over zero-initialized states; `bytes` is what the op must move.
void bench(const std::string& what, double bytes,
           const std::function<std::vector<Value*>(Graph&)>& build) {
  Graph g(what);
  std::vector<Value*> outs = build(g);
  auto e = emit(g, bindOutputs(g, outs));
  ASSERT_TRUE(e.has_value());
  double ms = msPerRun(*e);
  std::printf("%-40s %9.3f ms %8.0f GB/s\n", what.c_str(), ms, bytes / (ms * 1e-3) / 1e9);
}

Value* state(Graph& g, const std::string& n, Shape s) {
  return addValue(g, n, TensorRole::State, f32(std::move(s)));
}

TEST(CudaBench, DISABLED_MemoryBoundOps) {
  HGP_REQUIRE_CUDA();
  for (Shape x : {Shape{128, 256, 56, 56}, Shape{128, 64, 112, 112}, Shape{128, 2048, 7, 7}}) {
    double n = double(numElements(x)) * 4, c = double(x[1]);
    std::string s = shapeToString(x);
    bench("BatchNormTrain " + s, 3 * n, [&](Graph& g) -> std::vector<Value*> {
      Node* bn = addNode(g, OpKind::BatchNormTrain,
                         {state(g, "x", x), state(g, "s", {x[1]}), state(g, "b", {x[1]})},
                         attrs({{"epsilon", 1e-5}}));
      return {bn->output(0), bn->output(1), bn->output(2)};
    });
    bench("BatchNormBwd " + s, 5 * n + 0 * c, [&](Graph& g) -> std::vector<Value*> {
      Node* bn = addNode(g, OpKind::BatchNormBwd,
                         {state(g, "dy", x), state(g, "x", x), state(g, "s", {x[1]}),
                          state(g, "m", {x[1]}), state(g, "v", {x[1]})},
                         attrs({{"epsilon", 1e-5}, {"batch_stats", int64_t(1)}}));
      return {bn->output(0), bn->output(1), bn->output(2)};
    });
    bench("Relu " + s, 2 * n,
          [&](Graph& g) { return std::vector<Value*>{op1(g, OpKind::Relu, {state(g, "x", x)})}; });
    bench("ReluBwd " + s, 3 * n, [&](Graph& g) {
      return std::vector<Value*>{op1(g, OpKind::ReluBwd, {state(g, "dy", x), state(g, "y", x)})};
    });
    bench("Add " + s, 3 * n, [&](Graph& g) {
      return std::vector<Value*>{op1(g, OpKind::Add, {state(g, "a", x), state(g, "b", x)})};
    });
    bench("ReduceSum (bias grad) " + s, n, [&](Graph& g) {
      return std::vector<Value*>{
          op1(g, OpKind::ReduceSum, {state(g, "dy", x)},
              attrs({{"axes", std::vector<int64_t>{0, 2, 3}}, {"keepdims", int64_t(0)}}))};
    });
  }
  Shape x{128, 64, 112, 112}, y{128, 64, 56, 56};
  double nx = double(numElements(x)) * 4, ny = double(numElements(y)) * 4;
  AttrMap pool = attrs({{"kernel_shape", std::vector<int64_t>{3, 3}},
                        {"strides", std::vector<int64_t>{2, 2}},
                        {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                        {"ceil_mode", int64_t(0)}});
  bench("MaxPool 3x3/2 " + shapeToString(x), nx + ny, [&](Graph& g) {
    return std::vector<Value*>{op1(g, OpKind::MaxPool, {state(g, "x", x)}, pool)};
  });
  bench("MaxPoolBwd 3x3/2 " + shapeToString(x), 2 * nx + ny, [&](Graph& g) {
    return std::vector<Value*>{
        op1(g, OpKind::MaxPoolBwd, {state(g, "dy", y), state(g, "x", x)}, pool)};
  });
  bench("Dropout " + shapeToString(y), 2 * ny, [&](Graph& g) {
    Value* it = addValue(g, "iter", TensorRole::State, {DType::I64, {}});
    return std::vector<Value*>{
        op1(g, OpKind::Dropout, {state(g, "x", y), it},
            attrs({{"ratio", 0.5}, {"seed", int64_t(1)}, {"key", int64_t(2)}}))};
  });
  Shape gx{128, 2048, 7, 7};
  bench("GlobalAveragePool " + shapeToString(gx), double(numElements(gx)) * 4, [&](Graph& g) {
    return std::vector<Value*>{op1(g, OpKind::GlobalAveragePool, {state(g, "x", gx)})};
  });
}

/// bf16 channels-last, at EfficientNet-B0 (batch 64) sizes: the BatchNorm passes, a Relu as the
/// plain elementwise reference, and the squeeze-excitation gate's broadcast Mul; then
/// ShuffleNet-v2's (batch 128) channel shuffle and split. Zero-filled data,
/// so BatchNorm's variance is epsilon's; the traffic is what it would be. BatchNorm counts its
/// two passes (3 and 5 tensors' bytes), as above.
TEST(CudaBench, DISABLED_ChannelsLastBf16) {
  HGP_REQUIRE_CUDA();
  auto bf = [](Graph& g, const std::string& n, Shape s) {
    return addValue(g, n, TensorRole::State, {DType::BF16, std::move(s)});
  };
  AttrMap nhwc = attrs({{"epsilon", 1e-5}, {"layout", std::string("nhwc")}});
  for (Shape x : {Shape{64, 112, 112, 32}, Shape{64, 56, 56, 144}, Shape{64, 14, 14, 480}}) {
    double n = double(numElements(x)) * 2;
    int64_t c = x[3];
    std::string s = shapeToString(x) + " bf16 nhwc";
    bench("BatchNormTrain " + s, 3 * n, [&](Graph& g) -> std::vector<Value*> {
      Node* bn = addNode(g, OpKind::BatchNormTrain,
                         {bf(g, "x", x), state(g, "s", {c}), state(g, "b", {c})}, nhwc);
      return {bn->output(0), bn->output(1), bn->output(2)};
    });
    bench("BatchNormBwd " + s, 5 * n, [&](Graph& g) -> std::vector<Value*> {
      AttrMap a = nhwc;
      a.setInt("batch_stats", 1);
      Node* bn = addNode(g, OpKind::BatchNormBwd,
                         {bf(g, "dy", x), bf(g, "x", x), state(g, "s", {c}), state(g, "m", {c}),
                          state(g, "v", {c})},
                         a);
      return {bn->output(0), bn->output(1), bn->output(2)};
    });
    bench("Relu " + s, 2 * n,
          [&](Graph& g) { return std::vector<Value*>{op1(g, OpKind::Relu, {bf(g, "x", x)})}; });
    bench("Mul by [N,1,1,C] " + s, 2 * n, [&](Graph& g) {
      return std::vector<Value*>{
          op1(g, OpKind::Mul, {bf(g, "x", x), bf(g, "gate", {x[0], 1, 1, c})})};
    });
  }
  // ShuffleNet-v2 b128's data movement: the channel shuffle (Reshape, Transpose, Reshape) and
  // the channel split's Slice and SliceBwd, at its first stage's [128,28,28,116].
  Shape x{128, 28, 28, 116};
  double n = double(numElements(x)) * 2;
  std::string s = shapeToString(x) + " bf16 nhwc";
  std::vector<int64_t> split = {128, 28, 28, 2, 58}, whole(x.begin(), x.end());
  bench("channel shuffle Transpose " + s, 2 * n, [&](Graph& g) {
    Value* r = op1(g, OpKind::Reshape, {bf(g, "x", x)}, attrs({{"shape", split}}));
    Value* t = op1(g, OpKind::Transpose, {r},
                   attrs({{"perm", std::vector<int64_t>{0, 1, 2, 4, 3}}}));
    return std::vector<Value*>{op1(g, OpKind::Reshape, {t}, attrs({{"shape", whole}}))};
  });
  AttrMap half = attrs({{"starts", std::vector<int64_t>{0, 0, 0, 58}}, {"ends", whole},
                        {"steps", std::vector<int64_t>{1, 1, 1, 1}}});
  bench("Slice, channels 58-115 of " + s, n, [&](Graph& g) {
    return std::vector<Value*>{op1(g, OpKind::Slice, {bf(g, "x", x)}, half)};
  });
  AttrMap back = half;
  back.setInts("x_shape", whole);
  bench("SliceBwd into channels 58-115 of " + s, 1.5 * n, [&](Graph& g) {
    return std::vector<Value*>{
        op1(g, OpKind::SliceBwd, {bf(g, "dy", {128, 28, 28, 58})}, back)};
  });
}

TEST(CudaBench, DISABLED_OptimizerUpdates) {
  HGP_REQUIRE_CUDA();
  // ResNet-50's 161 parameter tensors hold 25.6M values; here 160 tensors of 160,000.
  for (OpKind op : {OpKind::SgdUpdate, OpKind::AdamUpdate}) {
    int buffers = op == OpKind::SgdUpdate ? 1 : 2;
    double n = 160.0 * 160000 * 4;
    bench(std::string(opName(op)) + " 160 x 160000", (3 + 2 * buffers) * n,
          [&](Graph& g) -> std::vector<Value*> {
            TensorType s{DType::F32, {}};
            Value* lr = addValue(g, "lr", TensorRole::State, s, filled(s, 0.1f));
            Value* ok = addValue(g, "ok", TensorRole::State, s, filled(s, 1.f));
            Value* step = addValue(g, "step", TensorRole::State, {DType::I64, {}});
            AttrMap a = op == OpKind::SgdUpdate
                            ? attrs({{"momentum", 0.9}, {"weight_decay", 1e-4}})
                            : attrs({{"weight_decay", 1e-2}, {"decoupled", int64_t(1)}});
            for (int t = 0; t < 160; ++t) {
              std::string n = "p" + std::to_string(t);
              Value* p = state(g, n, {160000});
              std::vector<Value*> ins = {p, state(g, n + ".g", {160000}), lr, ok, step};
              for (int b = 0; b < buffers; ++b)
                ins.push_back(state(g, n + ".b" + std::to_string(b), {160000}));
              Node* u = addNode(g, op, ins, a);
              g.addCarry(p, u->output(0));
              for (int b = 0; b < buffers; ++b)
                g.addCarry(ins[size_t(5 + b)], u->output(size_t(1 + b)));
            }
            return {};
          });
  }
}

} // namespace
} // namespace hgp::gputest
