// ConvOps.cpp - CPU executors for Conv and ConvTranspose.
//
// Conv lowers each image and group to one GEMM over an im2col matrix (Im2col.h); depthwise
// convolutions, where a GEMM would have a single row, use a direct loop instead. ConvTranspose
// is the data gradient of the convolution it transposes, plus the bias. Conv with stats=1
// (fuse-conv-bn) also sums each channel of its result and of its square, in double over the
// values as stored, for the BatchNormTrain that reads it.
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/Im2col.h"
#include "runtime/plan/Half.h"

#include <algorithm>
#include <cmath>

namespace hgp::cpu {

namespace {

/// Direct depthwise convolution: one output channel per input channel.
void depthwiseForward(const ConvGeometry& g, const float* x, const float* w, float* y) {
  const int64_t inVol = g.inVol(), outVol = g.outVol(), kVol = g.kVol(), sW = g.stride[2];
  parallelFor(g.n * g.inC, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* xp = x + p * inVol;
      const float* wc = w + (p % g.inC) * kVol;
      float* yp = y + p * outVol;
      std::fill(yp, yp + outVol, 0.f);
      // Row by row, tap by tap: each output adds its taps in kernel order.
      forEachRowTap(
          g, [&](int64_t inRow, int64_t outRow, int64_t k, int64_t lo, int64_t hi, int64_t offW) {
            const float* xr = xp + inRow + offW;
            float* yr = yp + outRow;
            float wk = wc[k];
            for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wk * xr[ow * sW];
          });
    }
  });
}

/// The convolution of one image: every group's GEMM over its im2col matrix.
void convImage(const ConvGeometry& g, const float* x, const float* w, float* y, float* col) {
  const int64_t rows = g.colRows(), outVol = g.outVol();
  for (int64_t grp = 0; grp < g.group; ++grp) {
    const float* xg = x + grp * g.inCg() * g.inVol();
    const float* cols = xg;
    if (!g.isPointwise()) {
      vol2col(xg, g.inCg(), g, col);
      cols = col;
    }
    sgemm(false, false, g.outCg(), outVol, rows, 1.f, w + grp * g.outCg() * rows, rows, cols,
          outVol, 0.f, y + grp * g.outCg() * outVol, outVol);
  }
}

void convForward(const ConvGeometry& g, const float* x, const float* w, float* y) {
  if (g.isDepthwise() && !g.isPointwise()) return depthwiseForward(g, x, w, y);
  const int64_t colSize = g.isPointwise() ? 0 : g.colRows() * g.outVol();
  auto images = [&](int64_t i0, int64_t i1) {
    float* col = threadScratch(Scratch::Columns, size_t(colSize));
    for (int64_t i = i0; i < i1; ++i)
      convImage(g, x + i * g.inC * g.inVol(), w, y + i * g.outC * g.outVol(), col);
  };
  if (batchIsParallel(g.n))
    parallelFor(g.n, 1, images);
  else
    images(0, g.n);
}

/// y[n, c, ...] += bias[c].
void addBias(const float* bias, int64_t n, int64_t channels, int64_t vol, float* y) {
  parallelFor(n * channels, std::max<int64_t>(1, kElementwiseGrain / vol),
              [&](int64_t p0, int64_t p1) {
                for (int64_t p = p0; p < p1; ++p) {
                  float b = bias[p % channels];
                  float* yp = y + p * vol;
                  for (int64_t i = 0; i < vol; ++i) yp[i] += b;
                }
              });
}

Status checkConvOperands(const KernelArgs& a, size_t maxOut = 1) {
  HGP_TRY(checkArity(a, 2, 3, 1, maxOut));
  for (const auto& v : a.in) HGP_TRY(checkF32(a, v, "operand"));
  return checkF32(a, a.out[0], "result");
}

/// stats=1: sum[c] and sumsq[c] of y as stored (rounded to its dtype, as the BatchNorm that
/// reads it sees it), added in double per channel, stored as f32.
Status channelSums(KernelArgs& a, const ConvGeometry& g, const float* y) {
  if (a.out.size() != 3) return a.fail("stats=1 gives three results (Y, sum, sumsq)");
  for (size_t i = 1; i < 3; ++i) {
    HGP_TRY(checkF32(a, a.out[i], "channel sums"));
    HGP_TRY(checkShape(a, a.out[i], {g.outC}, "channel sums"));
  }
  float *sum = a.out[1].f32(), *sumsq = a.out[2].f32();
  DType stored = a.out[0].stored;
  const int64_t vol = g.outVol();
  parallelFor(g.outC, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double s = 0, q = 0;
      for (int64_t i = 0; i < g.n; ++i) {
        const float* yp = y + (i * g.outC + c) * vol;
        for (int64_t j = 0; j < vol; ++j) {
          double v = roundedAs(stored, yp[j]);
          s += v;
          q += v * v;
        }
      }
      sum[c] = float(s);
      sumsq[c] = float(q);
    }
  });
  return Status::ok();
}

} // namespace

Status execConv(KernelArgs& a) {
  bool stats = a.attrs().getInt("stats", 0) != 0;
  HGP_TRY(checkConvOperands(a, stats ? 3 : 1));
  ConvGeometry g;
  HGP_TRY(readConvGeometry(a, *a.in[0].shape, *a.in[1].shape, *a.out[0].shape,
                           /*checkOutput=*/true, g));
  if (a.in.size() == 3) HGP_TRY(checkShape(a, a.in[2], {g.outC}, "bias"));
  float* y = a.out[0].f32();
  convForward(g, a.in[0].f32(), a.in[1].f32(), y);
  if (a.in.size() == 3) addBias(a.in[2].f32(), g.n, g.outC, g.outVol(), y);
  std::string act = a.attrs().getString("activation", "none");
  if (act == "relu")
    parallelFor(a.out[0].numel(), kElementwiseGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) y[i] = y[i] > 0.f || std::isnan(y[i]) ? y[i] : 0.f;
    });
  else if (act != "none")
    return a.fail("unknown activation '" + act + "'");
  if (stats) {
    if (act != "none" || a.in.size() == 3) return a.fail("stats=1 takes no bias and no activation");
    return channelSums(a, g, y);
  }
  if (a.out.size() != 1) return a.fail("a Conv without stats=1 has one result");
  return Status::ok();
}

Status execConvTranspose(KernelArgs& a) {
  HGP_TRY(checkConvOperands(a));
  // ConvTranspose(X, W) is the data gradient of the convolution Y' = conv(Y, W): X plays dY.
  const Shape &x = *a.in[0].shape, &w = *a.in[1].shape, &y = *a.out[0].shape;
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size() || y.size() != x.size())
    return a.fail("operands " + str(x) + ", " + str(w) + ", " + str(y) + " must have rank 3 to 5");
  size_t r = x.size() - 2;
  int64_t group = a.attrs().getInt("group", 1);
  std::vector<int64_t> strides, pads, dilations, outPad;
  HGP_TRY(readInts(a, "strides", r, strides));
  HGP_TRY(readInts(a, "pads", 2 * r, pads));
  HGP_TRY(readInts(a, "dilations", r, dilations));
  HGP_TRY(readInts(a, "output_padding", r, outPad));
  if (group < 1 || w[0] != x[1] || y[0] != x[0] || y[1] != w[1] * group)
    return a.fail("channels do not fit: x " + str(x) + ", w " + str(w) + ", y " + str(y));
  for (size_t i = 0; i < r; ++i) {
    int64_t want = (x[2 + i] - 1) * strides[i] + (w[2 + i] - 1) * dilations[i] + 1 + outPad[i] -
                   pads[i] - pads[r + i];
    if (y[2 + i] != want)
      return a.fail("output " + str(y) + " does not match the transposed convolution");
  }
  ConvGeometry g;
  HGP_TRY(readConvGeometry(a, y, w, x, /*checkOutput=*/false, g));
  if (a.in.size() == 3) HGP_TRY(checkShape(a, a.in[2], {g.inC}, "bias"));
  convBackwardData(g, a.in[0].f32(), a.in[1].f32(), a.out[0].f32());
  if (a.in.size() == 3) addBias(a.in[2].f32(), g.n, g.inC, g.inVol(), a.out[0].f32());
  return Status::ok();
}

} // namespace hgp::cpu
