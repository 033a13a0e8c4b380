// PoolOps.cpp - CPU executors for max, average and global average pooling and their gradients.
//
// Windows follow PyTorch's CPU kernels. Max pooling never picks padding and breaks ties toward
// the first element in row-major window order; its gradient recomputes the argmax from X with
// the same rule. Average pooling clamps each window's end to input + pad_end, divides by that
// padded extent with count_include_pad and by the valid element count without it, so a ceil_mode
// window's overhang past the padding is never counted. Planes (n, c) run in parallel.
#include "runtime/cpu/Im2col.h"
#include "runtime/plan/PoolWindow.h"

#include <cmath>
#include <limits>

namespace hgp::cpu {

namespace {

struct PoolGeometry {
  int64_t planes = 0; ///< N * C.
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, padBegin[3] = {0, 0, 0}, padEnd[3] = {0, 0, 0};
  int64_t dilation[3] = {1, 1, 1};
  bool countIncludePad = false;

  int64_t inVol() const { return in[0] * in[1] * in[2]; }
  int64_t outVol() const { return out[0] * out[1] * out[2]; }
};

/// Reads the window attributes and checks that y is the pooled shape of x (PoolWindow.h).
Status readPoolGeometry(const KernelArgs& a, const Shape& x, const Shape& y, PoolGeometry& g) {
  Expected<PoolWindow> w = readPoolWindow(a.attrs(), x, y);
  if (!w) return a.fail(w.status().message());
  g = PoolGeometry();
  g.planes = w->planes;
  g.countIncludePad = w->countIncludePad;
  for (int i = 0; i < 3; ++i) {
    g.in[i] = w->in[i];
    g.out[i] = w->out[i];
    g.k[i] = w->kernel[i];
    g.stride[i] = w->stride[i];
    g.padBegin[i] = w->padBegin[i];
    g.padEnd[i] = w->padEnd[i];
    g.dilation[i] = w->dilation[i];
  }
  return Status::ok();
}

/// The argmax of output position (od, oh, ow) within one plane, or -1 when the window holds no
/// input element.
int64_t maxIndex(const PoolGeometry& g, const float* x, int64_t od, int64_t oh, int64_t ow) {
  int64_t best = -1;
  float bestVal = 0.f;
  for (int64_t kd = 0; kd < g.k[0]; ++kd) {
    int64_t id = od * g.stride[0] - g.padBegin[0] + kd * g.dilation[0];
    if (id < 0 || id >= g.in[0]) continue;
    for (int64_t kh = 0; kh < g.k[1]; ++kh) {
      int64_t ih = oh * g.stride[1] - g.padBegin[1] + kh * g.dilation[1];
      if (ih < 0 || ih >= g.in[1]) continue;
      for (int64_t kw = 0; kw < g.k[2]; ++kw) {
        int64_t iw = ow * g.stride[2] - g.padBegin[2] + kw * g.dilation[2];
        if (iw < 0 || iw >= g.in[2]) continue;
        int64_t idx = (id * g.in[1] + ih) * g.in[2] + iw;
        float v = x[idx];
        // Strictly greater: the first of equal values wins. A NaN wins and stays.
        if (best < 0 || v > bestVal || (std::isnan(v) && !std::isnan(bestVal))) {
          best = idx;
          bestVal = v;
        }
      }
    }
  }
  return best;
}

/// Calls fn(planeOffset, outputIndex, od, oh, ow) for every output position of every plane in
/// parallel over planes.
template <typename Fn> void forEachOutput(const PoolGeometry& g, Fn&& fn) {
  parallelFor(g.planes, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      int64_t o = 0;
      for (int64_t od = 0; od < g.out[0]; ++od)
        for (int64_t oh = 0; oh < g.out[1]; ++oh)
          for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) fn(p, o, od, oh, ow);
    }
  });
}

/// One dim of an average-pooling window: valid input [lo, hi), and the extent that
/// count_include_pad divides by.
struct AvgSpan {
  int64_t lo, hi, extent;
};

AvgSpan avgSpan(const PoolGeometry& g, int d, int64_t o) {
  int64_t start = o * g.stride[d] - g.padBegin[d];
  int64_t end = std::min(start + g.k[d], g.in[d] + g.padEnd[d]);
  return {std::max<int64_t>(start, 0), std::min(end, g.in[d]), end - start};
}

/// The three spans of an output position and the divisor of its average (0 when empty).
int64_t avgWindow(const PoolGeometry& g, int64_t od, int64_t oh, int64_t ow, AvgSpan s[3]) {
  s[0] = avgSpan(g, 0, od);
  s[1] = avgSpan(g, 1, oh);
  s[2] = avgSpan(g, 2, ow);
  if (s[0].hi <= s[0].lo || s[1].hi <= s[1].lo || s[2].hi <= s[2].lo) return 0;
  if (g.countIncludePad) return s[0].extent * s[1].extent * s[2].extent;
  return (s[0].hi - s[0].lo) * (s[1].hi - s[1].lo) * (s[2].hi - s[2].lo);
}

Status checkF32Operands(const KernelArgs& a) {
  for (const auto& v : a.in) HGP_TRY(checkF32(a, v, "operand"));
  return checkF32(a, a.out[0], "result");
}

} // namespace

Status execMaxPool(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32Operands(a));
  PoolGeometry g;
  HGP_TRY(readPoolGeometry(a, *a.in[0].shape, *a.out[0].shape, g));
  const float* x = a.in[0].f32();
  float* y = a.out[0].f32();
  forEachOutput(g, [&](int64_t p, int64_t o, int64_t od, int64_t oh, int64_t ow) {
    const float* xp = x + p * g.inVol();
    int64_t idx = maxIndex(g, xp, od, oh, ow);
    y[p * g.outVol() + o] = idx < 0 ? -std::numeric_limits<float>::infinity() : xp[idx];
  });
  return Status::ok();
}

Status execMaxPoolBwd(KernelArgs& a) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  HGP_TRY(checkF32Operands(a));
  PoolGeometry g;
  HGP_TRY(readPoolGeometry(a, *a.in[1].shape, *a.in[0].shape, g));
  HGP_TRY(checkShape(a, a.out[0], *a.in[1].shape, "dX"));
  const float *dy = a.in[0].f32(), *x = a.in[1].f32();
  float* dx = a.out[0].f32();
  parallelFor(g.planes, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) std::fill(dx + p * g.inVol(), dx + (p + 1) * g.inVol(), 0.f);
  });
  forEachOutput(g, [&](int64_t p, int64_t o, int64_t od, int64_t oh, int64_t ow) {
    int64_t idx = maxIndex(g, x + p * g.inVol(), od, oh, ow);
    if (idx >= 0) dx[p * g.inVol() + idx] += dy[p * g.outVol() + o];
  });
  return Status::ok();
}

Status execAveragePool(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32Operands(a));
  PoolGeometry g;
  HGP_TRY(readPoolGeometry(a, *a.in[0].shape, *a.out[0].shape, g));
  for (int64_t d : g.dilation)
    if (d != 1) return a.fail("AveragePool with dilations is not supported");
  const float* x = a.in[0].f32();
  float* y = a.out[0].f32();
  forEachOutput(g, [&](int64_t p, int64_t o, int64_t od, int64_t oh, int64_t ow) {
    AvgSpan s[3];
    int64_t divisor = avgWindow(g, od, oh, ow, s);
    const float* xp = x + p * g.inVol();
    double sum = 0;
    for (int64_t id = s[0].lo; id < s[0].hi; ++id)
      for (int64_t ih = s[1].lo; ih < s[1].hi; ++ih)
        for (int64_t iw = s[2].lo; iw < s[2].hi; ++iw)
          sum += xp[(id * g.in[1] + ih) * g.in[2] + iw];
    y[p * g.outVol() + o] = divisor ? float(sum / double(divisor)) : 0.f;
  });
  return Status::ok();
}

Status execAveragePoolBwd(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32Operands(a));
  std::vector<int64_t> xShape;
  HGP_TRY(readInts(a, "x_shape", a.out[0].shape->size(), xShape));
  HGP_TRY(checkShape(a, a.out[0], xShape, "dX"));
  PoolGeometry g;
  HGP_TRY(readPoolGeometry(a, xShape, *a.in[0].shape, g));
  for (int64_t d : g.dilation)
    if (d != 1) return a.fail("AveragePool with dilations is not supported");
  const float* dy = a.in[0].f32();
  float* dx = a.out[0].f32();
  parallelFor(g.planes, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) std::fill(dx + p * g.inVol(), dx + (p + 1) * g.inVol(), 0.f);
  });
  forEachOutput(g, [&](int64_t p, int64_t o, int64_t od, int64_t oh, int64_t ow) {
    AvgSpan s[3];
    int64_t divisor = avgWindow(g, od, oh, ow, s);
    if (!divisor) return;
    float share = dy[p * g.outVol() + o] / float(divisor);
    float* dxp = dx + p * g.inVol();
    for (int64_t id = s[0].lo; id < s[0].hi; ++id)
      for (int64_t ih = s[1].lo; ih < s[1].hi; ++ih)
        for (int64_t iw = s[2].lo; iw < s[2].hi; ++iw)
          dxp[(id * g.in[1] + ih) * g.in[2] + iw] += share;
  });
  return Status::ok();
}

Status execGlobalAveragePool(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32Operands(a));
  const Shape& x = *a.in[0].shape;
  if (x.size() < 3) return a.fail("GlobalAveragePool needs rank 3 or more");
  Shape y = x;
  for (size_t i = 2; i < y.size(); ++i) y[i] = 1;
  HGP_TRY(checkShape(a, a.out[0], y, "Y"));
  int64_t planes = x[0] * x[1], vol = a.in[0].numel() / planes;
  const float* xp = a.in[0].f32();
  float* yp = a.out[0].f32();
  parallelFor(planes, std::max<int64_t>(1, kElementwiseGrain / vol), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      double sum = 0;
      for (int64_t i = 0; i < vol; ++i) sum += xp[p * vol + i];
      yp[p] = float(sum / double(vol));
    }
  });
  return Status::ok();
}

Status execGlobalAveragePoolBwd(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32Operands(a));
  std::vector<int64_t> x;
  HGP_TRY(readInts(a, "x_shape", a.out[0].shape->size(), x));
  HGP_TRY(checkShape(a, a.out[0], x, "dX"));
  if (x.size() < 3) return a.fail("GlobalAveragePoolBwd needs rank 3 or more");
  Shape y = x;
  for (size_t i = 2; i < y.size(); ++i) y[i] = 1;
  HGP_TRY(checkShape(a, a.in[0], y, "dY"));
  int64_t planes = x[0] * x[1], vol = numElements(x) / planes;
  const float* dy = a.in[0].f32();
  float* dx = a.out[0].f32();
  parallelFor(planes, std::max<int64_t>(1, kElementwiseGrain / vol), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      float share = dy[p] / float(vol);
      for (int64_t i = 0; i < vol; ++i) dx[p * vol + i] = share;
    }
  });
  return Status::ok();
}

} // namespace hgp::cpu
