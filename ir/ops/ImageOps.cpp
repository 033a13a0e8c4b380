// Shape rule for ImageInput, the model input made from 8-bit pixels (docs/data.md).
#include "ir/OpInfo.h"

namespace hgp {

Status inferImageInput(InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  const TensorType& flip = ctx.in(1);
  if (x.dtype != DType::U8 || x.rank() != 4)
    return ctx.fail("ImageInput's pixels must be u8 [N,H,W,C], not " + std::string(dtypeName(x.dtype)) +
                    " " + shapeToString(x.shape));
  int64_t n = x.shape[0], h = x.shape[1], w = x.shape[2], c = x.shape[3];
  if (c != 1 && c != 3) return ctx.fail("ImageInput takes 1 or 3 channels, not " + std::to_string(c));
  if (flip.dtype != DType::U8 || flip.shape != Shape{n})
    return ctx.fail("ImageInput's flip flags must be u8 [" + std::to_string(n) + "]");
  std::vector<double> mean = ctx.attrs.getFloats("mean"), sd = ctx.attrs.getFloats("std");
  if (int64_t(mean.size()) != c || int64_t(sd.size()) != c)
    return ctx.fail("ImageInput needs one mean and one std per channel (" + std::to_string(c) + ")");
  for (double s : sd)
    if (!(s > 0)) return ctx.fail("ImageInput's std must be positive");
  std::string to = ctx.attrs.getString("to", "f32");
  Expected<DType> t = parseDType(to);
  if (!t || (*t != DType::F32 && *t != DType::BF16 && *t != DType::F16))
    return ctx.fail("ImageInput to '" + to + "': only f32, bf16 and f16");
  int64_t last = ctx.attrs.getInt("channels_last", 0);
  if (last != 0 && last != 1) return ctx.fail("ImageInput's channels_last is 0 or 1");
  ctx.outputs = {{*t, last ? Shape{n, h, w, c} : Shape{n, c, h, w}}};
  return Status::ok();
}

Status inferDeviceBatch(InferContext& ctx) {
  const TensorType &data = ctx.in(0), &rows = ctx.in(1), &draw = ctx.in(2);
  if (data.dtype != DType::U8 || data.rank() != 4)
    return ctx.fail("DeviceBatch's data set must be u8 [D,H,W,C], not " +
                    std::string(dtypeName(data.dtype)) + " " + shapeToString(data.shape));
  if (rows.dtype != DType::I64 || rows.rank() != 1)
    return ctx.fail("DeviceBatch's rows must be i64 [N]");
  if (draw.dtype != DType::I64 || draw.shape != Shape{4})
    return ctx.fail("DeviceBatch's draws must be i64 [4] (seed, epoch, padding, flip)");
  const int64_t n = rows.shape[0];
  ctx.outputs = {{DType::U8, {n, data.shape[1], data.shape[2], data.shape[3]}}, {DType::U8, {n}}};
  return Status::ok();
}

} // namespace hgp
