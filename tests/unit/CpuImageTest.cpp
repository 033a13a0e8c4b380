// ImageInput's CPU executor against torchvision's ToTensor + Normalize applied by hand (PIL
// order: flip the row, then x / 255, then (x - mean) / std), on a small image with known pixels.
#include "CpuTestUtil.h"

namespace hgp::cpu::test {
namespace {

TEST(CpuImageTest, ImageInputFlipsConvertsAndNormalizes) {
  const int64_t n = 2, h = 3, w = 4, c = 3;
  HostTensor px(DType::U8, {n, h, w, c}), flip(DType::U8, {n});
  auto* p = static_cast<uint8_t*>(px.data());
  for (int64_t i = 0; i < px.numel(); ++i) p[i] = uint8_t((i * 37 + 11) % 256);
  static_cast<uint8_t*>(flip.data())[0] = 0;
  static_cast<uint8_t*>(flip.data())[1] = 1;
  const double mean[3] = {0.485, 0.456, 0.406}, sd[3] = {0.229, 0.224, 0.225};
  AttrMap a;
  a.setFloats("mean", {mean[0], mean[1], mean[2]});
  a.setFloats("std", {sd[0], sd[1], sd[2]});
  a.setString("to", "f32");
  HostTensor y(DType::F32, {n, c, h, w});
  ASSERT_OK(runOp(OpKind::ImageInput, a, {&px, &flip}, {&y}));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t r = 0; r < h; ++r)
        for (int64_t x = 0; x < w; ++x) {
          int64_t src = i == 1 ? w - 1 - x : x;
          float v = float(p[((i * h + r) * w + src) * c + ch]) / 255.0f;
          float want = (v - float(mean[ch])) / float(sd[ch]);
          EXPECT_EQ(y[((i * c + ch) * h + r) * w + x], want) << i << " " << ch << " " << r << " " << x;
        }
}

TEST(CpuImageTest, ChannelsLastWritesTheSameValuesAsNchw) {
  const int64_t n = 2, h = 3, w = 5, c = 3;
  HostTensor px(DType::U8, {n, h, w, c}), flip(DType::U8, {n});
  auto* p = static_cast<uint8_t*>(px.data());
  for (int64_t i = 0; i < px.numel(); ++i) p[i] = uint8_t((i * 53 + 7) % 256);
  static_cast<uint8_t*>(flip.data())[0] = 1;
  static_cast<uint8_t*>(flip.data())[1] = 0;
  AttrMap a;
  a.setFloats("mean", {0.485, 0.456, 0.406});
  a.setFloats("std", {0.229, 0.224, 0.225});
  a.setString("to", "f32");
  HostTensor nchw(DType::F32, {n, c, h, w}), nhwc(DType::F32, {n, h, w, c});
  ASSERT_OK(runOp(OpKind::ImageInput, a, {&px, &flip}, {&nchw}));
  a.setInt("channels_last", 1);
  ASSERT_OK(runOp(OpKind::ImageInput, a, {&px, &flip}, {&nhwc}));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t r = 0; r < h; ++r)
        for (int64_t x = 0; x < w; ++x)
          EXPECT_EQ(nhwc[((i * h + r) * w + x) * c + ch], nchw[((i * c + ch) * h + r) * w + x])
              << i << " " << ch << " " << r << " " << x;
  // The NCHW shape is refused for a channels-last result.
  EXPECT_FALSE(runOp(OpKind::ImageInput, a, {&px, &flip}, {&nchw}).isOk());
}

} // namespace
} // namespace hgp::cpu::test
