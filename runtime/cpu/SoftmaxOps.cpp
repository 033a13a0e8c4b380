// SoftmaxOps.cpp - CPU executors for Softmax, LogSoftmax and their gradients along one axis.
//
// X is viewed as [outer, n, inner] with n the softmax axis; each (outer, inner) line is
// independent. The forward subtracts the line's maximum before exponentiating and sums in double.
#include "runtime/cpu/KernelUtil.h"

#include <cmath>

namespace hgp::cpu {

namespace {

struct Lines {
  int64_t outer = 1, n = 1, inner = 1;
};

/// Checks operands (all f32, all the shape of input 0) and splits the shape at the axis.
Status readLines(const KernelArgs& a, size_t operands, Lines& l) {
  HGP_TRY(checkArity(a, operands, operands, 1, 1));
  const Shape& s = *a.in[0].shape;
  for (const auto& v : a.in) {
    HGP_TRY(checkF32(a, v, "operand"));
    HGP_TRY(checkShape(a, v, s, "operand"));
  }
  HGP_TRY(checkF32(a, a.out[0], "result"));
  HGP_TRY(checkShape(a, a.out[0], s, "result"));
  int64_t axis = a.attrs().getInt("axis", -1);
  if (s.empty() && axis == 0) return Status::ok(); // a scalar is one line of one element
  if (axis < 0 || axis >= int64_t(s.size())) return a.fail("axis out of range");
  l = Lines();
  for (int64_t i = 0; i < axis; ++i) l.outer *= s[size_t(i)];
  l.n = s[size_t(axis)];
  for (size_t i = size_t(axis) + 1; i < s.size(); ++i) l.inner *= s[i];
  return Status::ok();
}

/// Calls fn(offset, stride) for every line, in parallel.
template <typename Fn> void forEachLine(const Lines& l, Fn&& fn) {
  parallelFor(l.outer * l.inner, std::max<int64_t>(1, 4096 / l.n), [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) fn((q / l.inner) * l.n * l.inner + q % l.inner, l.inner);
  });
}

Status softmaxForward(KernelArgs& a, bool log) {
  Lines l;
  HGP_TRY(readLines(a, 1, l));
  const float* x = a.in[0].f32();
  float* y = a.out[0].f32();
  forEachLine(l, [&](int64_t off, int64_t st) {
    float mx = x[off];
    for (int64_t j = 1; j < l.n; ++j) mx = std::max(mx, x[off + j * st]);
    double sum = 0;
    for (int64_t j = 0; j < l.n; ++j) sum += std::exp(double(x[off + j * st]) - double(mx));
    if (log) {
      double lse = std::log(sum);
      for (int64_t j = 0; j < l.n; ++j)
        y[off + j * st] = float(double(x[off + j * st]) - double(mx) - lse);
    } else {
      for (int64_t j = 0; j < l.n; ++j)
        y[off + j * st] = float(std::exp(double(x[off + j * st]) - double(mx)) / sum);
    }
  });
  return Status::ok();
}

} // namespace

Status execSoftmax(KernelArgs& a) {
  return softmaxForward(a, /*log=*/false);
}
Status execLogSoftmax(KernelArgs& a) {
  return softmaxForward(a, /*log=*/true);
}

Status execSoftmaxBwd(KernelArgs& a) {
  Lines l;
  HGP_TRY(readLines(a, 2, l));
  const float *dy = a.in[0].f32(), *y = a.in[1].f32();
  float* dx = a.out[0].f32();
  // dx = y * (dy - sum(dy * y)).
  forEachLine(l, [&](int64_t off, int64_t st) {
    double dot = 0;
    for (int64_t j = 0; j < l.n; ++j) dot += double(dy[off + j * st]) * double(y[off + j * st]);
    for (int64_t j = 0; j < l.n; ++j) {
      int64_t e = off + j * st;
      dx[e] = float(double(y[e]) * (double(dy[e]) - dot));
    }
  });
  return Status::ok();
}

Status execLogSoftmaxBwd(KernelArgs& a) {
  Lines l;
  HGP_TRY(readLines(a, 2, l));
  const float *dy = a.in[0].f32(), *y = a.in[1].f32();
  float* dx = a.out[0].f32();
  // dx = dy - exp(y) * sum(dy).
  forEachLine(l, [&](int64_t off, int64_t st) {
    double sum = 0;
    for (int64_t j = 0; j < l.n; ++j) sum += dy[off + j * st];
    for (int64_t j = 0; j < l.n; ++j) {
      int64_t e = off + j * st;
      dx[e] = float(double(dy[e]) - std::exp(double(y[e])) * sum);
    }
  });
  return Status::ok();
}

} // namespace hgp::cpu
