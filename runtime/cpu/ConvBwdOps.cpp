// ConvBwdOps.cpp - CPU executors for the convolution gradients: ConvBwdData and ConvBwdFilter.
//
// The data gradient is col2vol(W_g^T x dY_g) per image and group; the filter gradient sums
// dY_g x col^T over the images. To keep results independent of the thread count, the filter
// gradient always splits the batch into the same chunks and adds the chunks' partial sums in
// order. Depthwise convolutions use direct loops. ConvBwdFilter with accumulate=1 (a batch slice
// after the first, compiler/schedule/BatchSlicing.h) adds its sum to what dW holds.
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/Im2col.h"

#include <algorithm>

namespace hgp::cpu {

namespace {

void depthwiseBackwardData(const ConvGeometry& g, const float* dy, const float* w, float* dx) {
  const int64_t sW = g.stride[2];
  parallelFor(g.n * g.inC, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* dyp = dy + p * g.outVol();
      const float* wc = w + (p % g.inC) * g.kVol();
      float* dxp = dx + p * g.inVol();
      std::fill(dxp, dxp + g.inVol(), 0.f);
      forEachRowTap(
          g, [&](int64_t inRow, int64_t outRow, int64_t k, int64_t lo, int64_t hi, int64_t offW) {
            float* dxr = dxp + inRow + offW;
            const float* dyr = dyp + outRow;
            float wk = wc[k];
            for (int64_t ow = lo; ow < hi; ++ow) dxr[ow * sW] += wk * dyr[ow];
          });
    }
  });
}

void depthwiseBackwardFilter(const ConvGeometry& g, const float* x, const float* dy, float* dw) {
  const int64_t sW = g.stride[2];
  parallelFor(g.inC, 1, [&](int64_t c0, int64_t c1) {
    std::vector<double> acc(static_cast<size_t>(g.kVol()));
    for (int64_t c = c0; c < c1; ++c) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t n = 0; n < g.n; ++n) {
        const float* xp = x + (n * g.inC + c) * g.inVol();
        const float* dyp = dy + (n * g.inC + c) * g.outVol();
        forEachRowTap(
            g, [&](int64_t inRow, int64_t outRow, int64_t k, int64_t lo, int64_t hi, int64_t offW) {
              const float* xr = xp + inRow + offW;
              const float* dyr = dyp + outRow;
              float rowSum = 0.f; // one output row's share, added to the double total
              for (int64_t ow = lo; ow < hi; ++ow) rowSum += dyr[ow] * xr[ow * sW];
              acc[size_t(k)] += rowSum;
            });
      }
      for (int64_t k = 0; k < g.kVol(); ++k) dw[c * g.kVol() + k] = float(acc[size_t(k)]);
    }
  });
}

/// The data gradient of one image, every group.
void backwardDataImage(const ConvGeometry& g, const float* dy, const float* w, float* dx,
                       float* col) {
  const int64_t rows = g.colRows(), outVol = g.outVol(), inVol = g.inVol();
  for (int64_t grp = 0; grp < g.group; ++grp) {
    const float* wg = w + grp * g.outCg() * rows;
    const float* dyg = dy + grp * g.outCg() * outVol;
    float* dxg = dx + grp * g.inCg() * inVol;
    if (g.isPointwise()) {
      sgemm(true, false, rows, outVol, g.outCg(), 1.f, wg, rows, dyg, outVol, 0.f, dxg, outVol);
      continue;
    }
    sgemm(true, false, rows, outVol, g.outCg(), 1.f, wg, rows, dyg, outVol, 0.f, col, outVol);
    std::fill(dxg, dxg + g.inCg() * inVol, 0.f);
    col2vol(col, g.inCg(), g, dxg);
  }
}

/// dW (+)= the filter gradient of images [i0, i1), every group; the first image overwrites
/// when `accumulate` is false.
void backwardFilterImages(const ConvGeometry& g, const float* x, const float* dy, int64_t i0,
                          int64_t i1, bool accumulate, float* dw, float* col) {
  const int64_t rows = g.colRows(), outVol = g.outVol();
  for (int64_t i = i0; i < i1; ++i) {
    float beta = (accumulate || i > i0) ? 1.f : 0.f;
    for (int64_t grp = 0; grp < g.group; ++grp) {
      const float* xg = x + (i * g.inC + grp * g.inCg()) * g.inVol();
      const float* dyg = dy + (i * g.outC + grp * g.outCg()) * outVol;
      const float* cols = xg;
      if (!g.isPointwise()) {
        vol2col(xg, g.inCg(), g, col);
        cols = col;
      }
      sgemm(false, true, g.outCg(), rows, outVol, 1.f, dyg, outVol, cols, outVol, beta,
            dw + grp * g.outCg() * rows, rows);
    }
  }
}

constexpr int64_t kFilterChunks = 8;

void convBackwardFilter(const ConvGeometry& g, const float* x, const float* dy, float* dw) {
  if (g.isDepthwise() && !g.isPointwise()) return depthwiseBackwardFilter(g, x, dy, dw);
  const int64_t wSize = g.outC * g.colRows();
  const int64_t colSize = g.isPointwise() ? 0 : g.colRows() * g.outVol();
  // A fixed chunking (not one per thread) makes the summation order independent of the pool.
  const int64_t chunks = std::min(g.n, kFilterChunks);
  float* partial = threadScratch(Scratch::Partials, size_t((chunks - 1) * wSize));
  parallelFor(chunks, 1, [&](int64_t c0, int64_t c1) {
    float* col = threadScratch(Scratch::Columns, size_t(colSize));
    for (int64_t c = c0; c < c1; ++c) {
      float* dst = c == 0 ? dw : partial + (c - 1) * wSize;
      backwardFilterImages(g, x, dy, c * g.n / chunks, (c + 1) * g.n / chunks, false, dst, col);
    }
  });
  for (int64_t c = 1; c < chunks; ++c) {
    const float* p = partial + (c - 1) * wSize;
    parallelElementwise(wSize, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) dw[j] += p[j];
    });
  }
}

Status checkBwdOperands(const KernelArgs& a) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  HGP_TRY(checkF32(a, a.in[0], "operand 0"));
  HGP_TRY(checkF32(a, a.in[1], "operand 1"));
  return checkF32(a, a.out[0], "result");
}

} // namespace

void convBackwardData(const ConvGeometry& g, const float* dy, const float* w, float* dx) {
  if (g.isDepthwise() && !g.isPointwise()) return depthwiseBackwardData(g, dy, w, dx);
  const int64_t colSize = g.isPointwise() ? 0 : g.colRows() * g.outVol();
  auto images = [&](int64_t i0, int64_t i1) {
    float* col = threadScratch(Scratch::Columns, size_t(colSize));
    for (int64_t i = i0; i < i1; ++i)
      backwardDataImage(g, dy + i * g.outC * g.outVol(), w, dx + i * g.inC * g.inVol(), col);
  };
  if (batchIsParallel(g.n))
    parallelFor(g.n, 1, images);
  else
    images(0, g.n);
}

Status execConvBwdData(KernelArgs& a) {
  HGP_TRY(checkBwdOperands(a));
  std::vector<int64_t> xShape;
  HGP_TRY(readInts(a, "x_shape", a.out[0].shape->size(), xShape));
  HGP_TRY(checkShape(a, a.out[0], xShape, "dX"));
  ConvGeometry g;
  HGP_TRY(readConvGeometry(a, xShape, *a.in[1].shape, *a.in[0].shape, /*checkOutput=*/true, g));
  convBackwardData(g, a.in[0].f32(), a.in[1].f32(), a.out[0].f32());
  return Status::ok();
}

Status execConvBwdFilter(KernelArgs& a) {
  HGP_TRY(checkBwdOperands(a));
  std::vector<int64_t> wShape;
  HGP_TRY(readInts(a, "w_shape", a.out[0].shape->size(), wShape));
  HGP_TRY(checkShape(a, a.out[0], wShape, "dW"));
  ConvGeometry g;
  HGP_TRY(readConvGeometry(a, *a.in[0].shape, wShape, *a.in[1].shape, /*checkOutput=*/true, g));
  if (!a.attrs().getInt("accumulate", 0)) {
    convBackwardFilter(g, a.in[0].f32(), a.in[1].f32(), a.out[0].f32());
    return Status::ok();
  }
  std::vector<float> sum(size_t(a.out[0].numel()));
  convBackwardFilter(g, a.in[0].f32(), a.in[1].f32(), sum.data());
  float* dw = a.out[0].f32();
  for (size_t i = 0; i < sum.size(); ++i) dw[i] += sum[i];
  return Status::ok();
}

} // namespace hgp::cpu
