// ImageInput (hgpc compile --pixels u8, docs/data.md) on the CUDA backend against the CPU
// reference: 8-bit channels-last pixels and flip flags in, the flipped, converted and normalized
// input out, NCHW or channels-last (channels_last=1), in f32, bf16 and f16, eager and captured.
// The kernel does the CPU executor's float operations in the same order, so the results are
// bit-identical.
#include "tests/gpu/GpuTestUtil.h"

namespace hgp::gputest {
namespace {

/// Pixels uniform in [0, 256), flip flags 0 or 1, fresh every run.
std::vector<uint8_t> pixelFeed(const PlanTensor& t, int run) {
  if (t.type.dtype != DType::U8) return defaultFeed(t, run);
  std::vector<uint8_t> b(size_t(t.bytes()));
  std::mt19937_64 rng(hashName(t.name, uint64_t(run) + 3));
  bool flags = t.type.shape.size() == 1;
  for (auto& v : b) v = uint8_t(flags ? rng() % 2 : rng() % 256);
  return b;
}

TEST(CudaImageInput, MatchesTheCpuBitForBit) {
  HGP_REQUIRE_CUDA();
  for (int last : {0, 1})
  for (const char* to : {"f32", "bf16", "f16"})
    for (Shape x : {Shape{4, 7, 5, 3}, Shape{3, 28, 28, 1}, Shape{2, 32, 33, 3}}) {
      SCOPED_TRACE(std::string(to) + " " + shapeToString(x) + (last ? " channels_last" : ""));
      Graph g("image_input");
      Value* px = addValue(g, "pixels", TensorRole::Input, {DType::U8, x});
      Value* flip = addValue(g, "flip", TensorRole::Input, {DType::U8, {x[0]}});
      AttrMap a;
      std::vector<double> mean(size_t(x[3]), 0.45), sd(size_t(x[3]), 0.27);
      if (x[3] == 3) mean = {0.485, 0.456, 0.406}, sd = {0.229, 0.224, 0.225};
      a.setFloats("mean", mean);
      a.setFloats("std", sd);
      a.setString("to", to);
      if (last) a.setInt("channels_last", 1);
      Value* y = op1(g, OpKind::ImageInput, {px, flip}, a);
      ASSERT_NE(y, nullptr);
      auto e = emit(g, bindOutputs(g, {y}), "fp32");
      ASSERT_TRUE(e.has_value());
      RunSpec spec;
      spec.tol = 0;
      spec.feed = pixelFeed;
      runAndCompare(*e, spec);
    }
}

} // namespace
} // namespace hgp::gputest
