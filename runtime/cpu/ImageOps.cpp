// CPU executor for ImageInput (runtime/plan/OpList.def): the reference for the CUDA kernel,
// NCHW or (channels_last=1) NHWC results.
#include "runtime/cpu/CpuKernel.h"
#include "runtime/cpu/KernelUtil.h"

namespace hgp::cpu {

Status execImageInput(KernelArgs& a) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  const TensorView &x = a.in[0], &flip = a.in[1], &y = a.out[0];
  if (x.dtype != DType::U8 || x.rank() != 4 || flip.dtype != DType::U8)
    return a.fail("ImageInput takes u8 [N,H,W,C] pixels and u8 [N] flip flags");
  const int64_t n = x.dim(0), h = x.dim(1), w = x.dim(2), c = x.dim(3);
  HGP_TRY(checkF32(a, y, "Y"));
  const bool last = a.attrs().getInt("channels_last", 0) != 0;
  HGP_TRY(checkShape(a, y, last ? Shape{n, h, w, c} : Shape{n, c, h, w}, "Y"));
  HGP_TRY(checkShape(a, flip, Shape{n}, "flip"));
  std::vector<double> mean = a.attrs().getFloats("mean"), sd = a.attrs().getFloats("std");
  if (int64_t(mean.size()) != c || int64_t(sd.size()) != c) return a.fail("mean/std per channel");
  const uint8_t* px = x.as<uint8_t>();
  const uint8_t* fl = flip.as<uint8_t>();
  float* out = y.f32(); // 16-bit results are rounded by the backend after the step
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch) {
      const float m = float(mean[size_t(ch)]), s = float(sd[size_t(ch)]);
      for (int64_t r = 0; r < h; ++r)
        for (int64_t col = 0; col < w; ++col) {
          int64_t src = fl[i] ? w - 1 - col : col;
          float v = float(px[((i * h + r) * w + src) * c + ch]) / 255.0f;
          out[last ? ((i * h + r) * w + col) * c + ch : ((i * c + ch) * h + r) * w + col] = (v - m) / s;
        }
    }
  return Status::ok();
}

} // namespace hgp::cpu
