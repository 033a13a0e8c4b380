// CPU executors for ImageInput and DeviceBatch (runtime/plan/OpList.def): the references for
// the CUDA kernels; ImageInput writes NCHW or (channels_last=1) NHWC results.
#include "runtime/cpu/CpuKernel.h"
#include "runtime/cpu/KernelUtil.h"
#include "runtime/support/SampleDraws.h"

#include <cstring>

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

Status execDeviceBatch(KernelArgs& a) {
  HGP_TRY(checkArity(a, 3, 3, 2, 2));
  const TensorView &data = a.in[0], &rows = a.in[1], &draw = a.in[2], &x = a.out[0],
                   &flip = a.out[1];
  if (data.dtype != DType::U8 || data.rank() != 4 || rows.dtype != DType::I64 ||
      draw.dtype != DType::I64 || draw.numel() != 4 || x.dtype != DType::U8 || flip.dtype != DType::U8)
    return a.fail("DeviceBatch takes u8 [D,H,W,C], i64 [N] rows and i64 [4] draws");
  const int64_t d = data.dim(0), h = data.dim(1), w = data.dim(2), c = data.dim(3), n = rows.numel();
  HGP_TRY(checkShape(a, x, Shape{n, h, w, c}, "X"));
  HGP_TRY(checkShape(a, flip, Shape{n}, "flip"));
  const int64_t* dr = draw.as<int64_t>();
  const int64_t* row = rows.as<int64_t>();
  const int64_t pad = dr[2];
  double p = 0;
  std::memcpy(&p, &dr[3], sizeof p);
  const uint8_t* src = data.as<uint8_t>();
  uint8_t* out = x.as<uint8_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (row[i] < 0 || row[i] >= d)
      return a.fail("DeviceBatch: row " + std::to_string(row[i]) + " is outside the data set's " +
                    std::to_string(d) + " samples");
    SampleDraws g(uint64_t(dr[0]), dr[1], row[i]);
    int64_t oy = 0, ox = 0, shift = 0; // the crop's top-left corner in the padded image
    if (pad >= 0) {
      oy = drawInteger(g.uniform(), 0, 2 * pad + 1);
      ox = drawInteger(g.uniform(), 0, 2 * pad + 1);
      shift = pad;
    }
    for (int64_t y = 0; y < h; ++y)
      for (int64_t col = 0; col < w; ++col) {
        const int64_t sy = oy + y - shift, sx = ox + col - shift;
        const bool in = sy >= 0 && sy < h && sx >= 0 && sx < w;
        for (int64_t ch = 0; ch < c; ++ch)
          out[((i * h + y) * w + col) * c + ch] = in ? src[((row[i] * h + sy) * w + sx) * c + ch] : 0;
      }
    flip.as<uint8_t>()[i] = p > 0 && g.uniform() < p ? 1 : 0;
  }
  return Status::ok();
}

} // namespace hgp::cpu
