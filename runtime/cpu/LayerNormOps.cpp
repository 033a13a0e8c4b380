// LayerNormOps.cpp - CPU executors for LayerNorm and its gradient (the Norm family's row
// normalization; BatchNorm and LRN are in NormOps.cpp).
//
// X is viewed as [rows, cols]: rows is the product of the dims before `axis`, cols of the dims
// from it on. Each row's mean and biased variance are computed in double, two passes (mean, then
// squared deviations), and the row is normalized in float as PyTorch's CPU kernel does.
#include "runtime/cpu/KernelUtil.h"

#include <cmath>

namespace hgp::cpu {

namespace {

struct Rows {
  int64_t rows = 1, cols = 1;
};

Status rowsOf(const KernelArgs& a, const Shape& x, Rows& r) {
  int64_t axis = a.attrs().getInt("axis", -1);
  if (axis < 0 || axis >= int64_t(x.size())) return a.fail("LayerNorm axis is out of range");
  for (size_t d = 0; d < x.size(); ++d) (int64_t(d) < axis ? r.rows : r.cols) *= x[d];
  return Status::ok();
}

} // namespace

Status execLayerNorm(KernelArgs& a) {
  HGP_TRY(checkArity(a, 2, 3, 3, 3));
  for (const auto& v : a.in) HGP_TRY(checkF32(a, v, "operand"));
  for (const auto& v : a.out) HGP_TRY(checkF32(a, v, "result"));
  Rows r;
  HGP_TRY(rowsOf(a, *a.in[0].shape, r));
  if (a.in[1].numel() != r.cols || (a.in.size() == 3 && a.in[2].numel() != r.cols) ||
      a.out[1].numel() != r.rows || a.out[2].numel() != r.rows)
    return a.fail("LayerNorm operand sizes do not match X");
  double eps = a.attrs().getFloat("epsilon", 1e-5);
  const float *x = a.in[0].f32(), *scale = a.in[1].f32();
  const float* bias = a.in.size() == 3 ? a.in[2].f32() : nullptr;
  float *y = a.out[0].f32(), *mean = a.out[1].f32(), *invstd = a.out[2].f32();
  parallelFor(r.rows, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float* xr = x + i * r.cols;
      double s = 0, ss = 0;
      for (int64_t j = 0; j < r.cols; ++j) s += xr[j];
      double m = s / double(r.cols);
      for (int64_t j = 0; j < r.cols; ++j) ss += (xr[j] - m) * (xr[j] - m);
      float mf = float(m), is = float(1.0 / std::sqrt(ss / double(r.cols) + eps));
      mean[i] = mf;
      invstd[i] = is;
      for (int64_t j = 0; j < r.cols; ++j) {
        float v = (xr[j] - mf) * is * scale[j];
        y[i * r.cols + j] = bias ? v + bias[j] : v;
      }
    }
  });
  return Status::ok();
}

Status execLayerNormBwd(KernelArgs& a) {
  HGP_TRY(checkArity(a, 5, 5, 3, 3));
  for (const auto& v : a.in) HGP_TRY(checkF32(a, v, "operand"));
  for (const auto& v : a.out) HGP_TRY(checkF32(a, v, "result"));
  Rows r;
  HGP_TRY(rowsOf(a, *a.in[1].shape, r));
  if (a.in[2].numel() != r.cols || a.in[3].numel() != r.rows || a.in[4].numel() != r.rows ||
      a.out[1].numel() != r.cols || a.out[2].numel() != r.cols)
    return a.fail("LayerNormBwd operand sizes do not match X");
  const float *dy = a.in[0].f32(), *x = a.in[1].f32(), *scale = a.in[2].f32();
  const float *mean = a.in[3].f32(), *invstd = a.in[4].f32();
  float *dx = a.out[0].f32(), *dscale = a.out[1].f32(), *dbias = a.out[2].f32();
  parallelFor(r.rows, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float *xr = x + i * r.cols, *gr = dy + i * r.cols;
      double sg = 0, sgx = 0;
      for (int64_t j = 0; j < r.cols; ++j) {
        double g = double(gr[j]) * scale[j], xhat = (double(xr[j]) - mean[i]) * invstd[i];
        sg += g;
        sgx += g * xhat;
      }
      double mg = sg / double(r.cols), mgx = sgx / double(r.cols);
      for (int64_t j = 0; j < r.cols; ++j) {
        double g = double(gr[j]) * scale[j], xhat = (double(xr[j]) - mean[i]) * invstd[i];
        dx[i * r.cols + j] = float(invstd[i] * (g - mg - xhat * mgx));
      }
    }
  });
  // The parameter gradients sum over rows: one column per task, rows in order.
  parallelFor(r.cols, 1, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      double ds = 0, db = 0;
      for (int64_t i = 0; i < r.rows; ++i) {
        double g = dy[i * r.cols + j];
        ds += g * (double(x[i * r.cols + j]) - mean[i]) * invstd[i];
        db += g;
      }
      dscale[j] = float(ds);
      dbias[j] = float(db);
    }
  });
  return Status::ok();
}

} // namespace hgp::cpu
