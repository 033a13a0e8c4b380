// CUDA executor for ImageInput (runtime/plan/OpList.def): flip, u8 to float and Normalize in one
// kernel, inside the captured step, writing NCHW or (channels_last=1) NHWC. Arithmetic is the
// CPU executor's, operation for operation
// ((x / 255 - mean) / std in float32, IEEE division), so the two agree bit for bit.
#include "runtime/cuda/CudaKernel.h"
#include "runtime/cuda/DeviceUtil.cuh"

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

} // namespace

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
