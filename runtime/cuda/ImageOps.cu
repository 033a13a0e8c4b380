// CUDA executors for DeviceBatch (--data-on-device: gather, RandomCrop and the flip draw, bit for
// bit the CPU's, from the shared SampleDraws) and ImageInput (runtime/plan/OpList.def).
// ImageInput: flip, u8 to float and Normalize in one
// kernel, inside the captured step, writing NCHW or (channels_last=1) NHWC. Arithmetic is the
// CPU executor's, operation for operation
// ((x / 255 - mean) / std in float32, IEEE division), so the two agree bit for bit.
#include "runtime/cuda/CudaKernel.h"
#include "runtime/cuda/DeviceUtil.cuh"
#include "runtime/support/SampleDraws.h"

namespace hgp::cuda {

namespace {

struct Norm {
  float mean[3], sd[3];
};

/// One thread per result element, in the result's order (NCHW, or NHWC with `last`), so that
/// the stores are coalesced; the reads gather the (possibly mirrored) pixel.
template <typename T>
__global__ void imageInputKernel(const uint8_t* x, const uint8_t* flip, T* y, int64_t n, int h,
                                 int w, int c, bool last, Norm norm) {
  const int64_t total = n * c * h * w;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    int col, row, ch;
    int64_t img;
    if (last) {
      ch = int(i % c);
      int64_t t = i / c;
      col = int(t % w);
      t /= w;
      row = int(t % h);
      img = t / h;
    } else {
      col = int(i % w);
      int64_t t = i / w;
      row = int(t % h);
      t /= h;
      ch = int(t % c);
      img = t / c;
    }
    int src = flip[img] ? w - 1 - col : col;
    float v = float(x[((img * h + row) * w + src) * c + ch]) / 255.0f;
    y[i] = fromFloat<T>((v - norm.mean[ch]) / norm.sd[ch]);
  }
}

/// One thread per pixel of the batch (all its channels): the row's draws are recomputed by
/// every thread (three SplitMix64 steps), which costs less than a pass to share them.
__global__ void deviceBatchKernel(const uint8_t* data, const int64_t* rows, const int64_t* draw,
                                  uint8_t* x, uint8_t* flip, int64_t n, int64_t d, int h, int w,
                                  int c) {
  const int64_t total = n * h * w;
  const int64_t pad = draw[2];
  const double p = __longlong_as_double(draw[3]);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int col = int(i % w), y = int((i / w) % h);
    const int64_t img = i / (int64_t(w) * h), sample = rows[img];
    const bool valid = sample >= 0 && sample < d; // the runner checks; never read outside
    SampleDraws g(uint64_t(draw[0]), draw[1], sample);
    int64_t oy = 0, ox = 0, shift = 0;
    if (pad >= 0) {
      oy = drawInteger(g.uniform(), 0, 2 * pad + 1);
      ox = drawInteger(g.uniform(), 0, 2 * pad + 1);
      shift = pad;
    }
    const int64_t sy = oy + y - shift, sx = ox + col - shift;
    const bool in = valid && sy >= 0 && sy < h && sx >= 0 && sx < w;
    for (int ch = 0; ch < c; ++ch)
      x[i * c + ch] = in ? data[((sample * h + sy) * w + sx) * c + ch] : 0;
    if (y == 0 && col == 0) flip[img] = p > 0 && g.uniform() < p ? 1 : 0;
  }
}

} // namespace

Status execDeviceBatch(CudaArgs& a) {
  HGP_TRY(checkArity(a, 3, 3, 2, 2));
  HGP_TRY(checkDType(a, a.in[0], DType::U8, "data"));
  HGP_TRY(checkDType(a, a.in[1], DType::I64, "rows"));
  HGP_TRY(checkDType(a, a.in[2], DType::I64, "draw"));
  HGP_TRY(checkDType(a, a.out[0], DType::U8, "X"));
  HGP_TRY(checkDType(a, a.out[1], DType::U8, "flip"));
  if (a.in[0].rank() != 4 || a.in[2].numel() != 4) return a.fail("data must be [D,H,W,C], draw [4]");
  const int64_t d = a.in[0].dim(0), n = a.in[1].numel();
  const int h = int(a.in[0].dim(1)), w = int(a.in[0].dim(2)), c = int(a.in[0].dim(3));
  HGP_TRY(checkShape(a, a.out[0], Shape{n, h, w, c}, "X"));
  HGP_TRY(checkShape(a, a.out[1], Shape{n}, "flip"));
  deviceBatchKernel<<<blocksFor(a, n * h * w), kBlock, 0, a.stream>>>(
      a.in[0].as<uint8_t>(), a.in[1].as<int64_t>(), a.in[2].as<int64_t>(), a.out[0].as<uint8_t>(),
      a.out[1].as<uint8_t>(), n, d, h, w, c);
  return checkLaunch(a, "deviceBatchKernel");
}

Status execImageInput(CudaArgs& a) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  HGP_TRY(checkDType(a, a.in[0], DType::U8, "pixels"));
  HGP_TRY(checkDType(a, a.in[1], DType::U8, "flip"));
  HGP_TRY(checkFloat(a, a.out[0], "Y"));
  if (a.in[0].rank() != 4) return a.fail("pixels must be [N,H,W,C]");
  const int64_t n = a.in[0].dim(0);
  const int h = int(a.in[0].dim(1)), w = int(a.in[0].dim(2)), c = int(a.in[0].dim(3));
  const bool last = a.attrs().getInt("channels_last", 0) != 0;
  HGP_TRY(checkShape(a, a.out[0], last ? Shape{n, h, w, c} : Shape{n, c, h, w}, "Y"));
  std::vector<double> mean = a.attrs().getFloats("mean"), sd = a.attrs().getFloats("std");
  if (c < 1 || c > 3 || int(mean.size()) != c || int(sd.size()) != c)
    return a.fail("ImageInput needs 1 to 3 channels and a mean and std for each");
  Norm norm{};
  for (int k = 0; k < c; ++k) norm.mean[k] = float(mean[size_t(k)]), norm.sd[k] = float(sd[size_t(k)]);
  int64_t total = a.out[0].numel();
  return dispatchFloat(a, a.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    imageInputKernel<T><<<blocksFor(a, total), kBlock, 0, a.stream>>>(
        a.in[0].as<uint8_t>(), a.in[1].as<uint8_t>(), a.out[0].as<T>(), n, h, w, c, last, norm);
    return checkLaunch(a, "imageInputKernel");
  });
}

} // namespace hgp::cuda
