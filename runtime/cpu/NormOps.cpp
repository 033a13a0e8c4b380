// NormOps.cpp - CPU executors for BatchNorm (inference, training, gradient, running statistics)
// and LRN.
//
// Per-channel statistics and gradient sums accumulate in double and run in parallel over the
// channels. X is [N, C, *S]; a channel's elements are N runs of prod(S) contiguous values.
//
// Fused forms (fuse-batch-norm, docs/fusion.md) compute exactly what the unfused chain computes,
// value for value: BatchNorm(Train) with activation="relu" applies relu to the affine result
// (relu is exact, so relu-then-round equals round-then-relu); with a residual the affine result
// is first rounded to Y's stored dtype, as the unfused BatchNormTrain stored it, then added in
// float as Add does; BatchNormBwd with activation="relu" replaces dY by (Z > 0 ? dY : 0), the
// ReluBwd result, which is exact in every dtype; with dy_parts=2 dY is round(dY + dY2), the sum
// in float rounded once to dY's stored dtype, which is the unfused Sum's stored result.
// BatchNormTrain with given_stats=1 (fuse-conv-bn) takes the channel sums of X from the
// convolution that wrote it: mean = sum / n, biased var = max(sumsq / n - mean^2, 0) in double.
#include "runtime/cpu/ActivationMath.h"
#include "runtime/cpu/KernelUtil.h"
#include "runtime/plan/BatchNormOperands.h"
#include "runtime/plan/Half.h"

#include <algorithm>
#include <cmath>

namespace hgp::cpu {

namespace {

/// N, C and the per-image plane size of an [N, C, *S] tensor.
struct ChannelLayout {
  int64_t n = 0, c = 0, plane = 1;
  explicit ChannelLayout(const Shape& s) : n(s[0]), c(s[1]) {
    for (size_t i = 2; i < s.size(); ++i) plane *= s[i];
  }
  /// The offset of channel c's run in image i.
  int64_t at(int64_t i, int64_t ch) const { return (i * c + ch) * plane; }
  /// Elements per channel.
  int64_t count() const { return n * plane; }
};

/// Checks X (rank >= 2, f32) and that inputs [first, first+count) are f32[C].
Status checkChannelOperands(const KernelArgs& a, size_t x, size_t first, size_t count) {
  HGP_TRY(checkF32(a, a.in[x], "X"));
  if (a.in[x].rank() < 2) return a.fail("X must have at least 2 dims (N, C)");
  int64_t c = a.in[x].dim(1);
  for (size_t i = first; i < first + count; ++i) {
    HGP_TRY(checkF32(a, a.in[i], "per-channel operand"));
    HGP_TRY(checkShape(a, a.in[i], {c}, "per-channel operand"));
  }
  return Status::ok();
}

double epsilonOf(const KernelArgs& a) {
  return a.attrs().getFloat("epsilon", 1e-5);
}

/// The fused epilogue of a BatchNorm forward: none, an activation, or (with a residual) relu
/// after the add.
struct Epilogue {
  BnActivation act = BnActivation::None;
  const float* residual = nullptr; ///< Added to the BN result rounded to `stored`.
  DType stored = DType::F32;       ///< Y's storage dtype.
  /// The activation of the BN result v. Silu and HardSwish read v rounded to Y's dtype, as the
  /// unfused BatchNorm stored it; relu needs no rounding (relu(round(v)) == round(relu(v))).
  float operator()(float v) const {
    switch (act) {
    case BnActivation::Relu:
      return reluOf(v);
    case BnActivation::Silu:
      return siluOf(roundedAs(stored, v));
    case BnActivation::HardSwish:
      return hardSwishOf(roundedAs(stored, v));
    case BnActivation::None:
      break;
    }
    return v;
  }
};

/// Reads activation= and, with inputs[residualAt] present, the residual.
Status epilogueOf(const KernelArgs& a, size_t residualAt, Epilogue& e) {
  if (Status st = bnActivation(a.attrs(), e.act); !st) return a.fail(st.message());
  e.stored = a.out[0].stored;
  if (a.in.size() > residualAt) {
    if (e.act != BnActivation::Relu) return a.fail("a residual input needs activation=relu");
    HGP_TRY(checkF32(a, a.in[residualAt], "residual"));
    HGP_TRY(checkShape(a, a.in[residualAt], *a.in[0].shape, "residual"));
    e.residual = a.in[residualAt].f32();
  }
  return Status::ok();
}

/// One channel's normalization, y = ((x - hi) - lo) * alpha + bias. The mean is split into a
/// float hi and the float rest lo: x - hi is exact for x near the mean (Sterbenz), so a mean
/// large against the spread loses nothing; the alternative x * alpha + (bias - mean * alpha)
/// cancels two large terms and keeps only the float rounding of their difference.
struct ChannelAffine {
  float alpha = 1, hi = 0, lo = 0, bias = 0;
  ChannelAffine() = default;
  ChannelAffine(double scale, double b, double mean, double var, double eps)
      : alpha(float(scale / std::sqrt(var + eps))), hi(float(mean)),
        lo(float(mean - double(float(mean)))), bias(float(b)) {}
};

/// The affine map over every element of channel c, then the epilogue.
void applyChannelAffine(const ChannelLayout& l, const float* x,
                        const std::vector<ChannelAffine>& affine, const Epilogue& e, float* y) {
  parallelFor(l.n * l.c, std::max<int64_t>(1, kElementwiseGrain / l.plane),
              [&](int64_t p0, int64_t p1) {
                for (int64_t p = p0; p < p1; ++p) {
                  const ChannelAffine& f = affine[size_t(p % l.c)];
                  const float* xp = x + p * l.plane;
                  float* yp = y + p * l.plane;
                  const float* rp = e.residual ? e.residual + p * l.plane : nullptr;
                  for (int64_t j = 0; j < l.plane; ++j) {
                    float d = (xp[j] - f.hi) - f.lo;
                    float v = d * f.alpha + f.bias;
                    if (rp) v = roundedAs(e.stored, v) + rp[j];
                    yp[j] = e(v);
                  }
                }
              });
}

} // namespace

Status execBatchNorm(KernelArgs& a) {
  HGP_TRY(checkArity(a, 5, 5, 1, 1));
  HGP_TRY(checkChannelOperands(a, 0, 1, 4));
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "Y"));
  ChannelLayout l(*a.in[0].shape);
  const float *scale = a.in[1].f32(), *bias = a.in[2].f32(), *mean = a.in[3].f32(),
              *var = a.in[4].f32();
  double eps = epsilonOf(a);
  std::vector<ChannelAffine> affine(size_t(l.c));
  for (int64_t c = 0; c < l.c; ++c) affine[size_t(c)] = {scale[c], bias[c], mean[c], var[c], eps};
  Epilogue e;
  HGP_TRY(epilogueOf(a, 5, e));
  applyChannelAffine(l, a.in[0].f32(), affine, e, a.out[0].f32());
  return Status::ok();
}

Status execBatchNormTrain(KernelArgs& a) {
  HGP_TRY(checkArity(a, 3, 6, 3, 3));
  HGP_TRY(checkChannelOperands(a, 0, 1, 2));
  auto ops = bnTrainOperands(a.attrs(), a.in.size());
  if (!ops) return a.fail(ops.status().message());
  if (ops->givenStats()) HGP_TRY(checkChannelOperands(a, 0, size_t(ops->sum), 2));
  ChannelLayout l(*a.in[0].shape);
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "Y"));
  HGP_TRY(checkShape(a, a.out[1], {l.c}, "batch_mean"));
  HGP_TRY(checkShape(a, a.out[2], {l.c}, "batch_var"));
  const float *x = a.in[0].f32(), *scale = a.in[1].f32(), *bias = a.in[2].f32();
  float *meanOut = a.out[1].f32(), *varOut = a.out[2].f32();
  double eps = epsilonOf(a);
  std::vector<ChannelAffine> affine(size_t(l.c));
  parallelFor(l.c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      if (ops->givenStats()) { // the convolution's sums (fuse-conv-bn): no pass over X
        double n = double(l.count());
        double mean = double(a.in[size_t(ops->sum)].f32()[c]) / n;
        double var = std::max(double(a.in[size_t(ops->sum) + 1].f32()[c]) / n - mean * mean, 0.0);
        affine[size_t(c)] = {scale[c], bias[c], mean, var, eps};
        meanOut[c] = float(mean);
        varOut[c] = float(var);
        continue;
      }
      // Two passes: the mean, then the biased variance around it.
      double sum = 0;
      for (int64_t i = 0; i < l.n; ++i)
        for (int64_t j = 0; j < l.plane; ++j) sum += x[l.at(i, c) + j];
      double mean = sum / double(l.count());
      double sq = 0;
      for (int64_t i = 0; i < l.n; ++i)
        for (int64_t j = 0; j < l.plane; ++j) {
          double d = x[l.at(i, c) + j] - mean;
          sq += d * d;
        }
      double var = sq / double(l.count());
      affine[size_t(c)] = {scale[c], bias[c], mean, var, eps};
      meanOut[c] = float(mean);
      varOut[c] = float(var);
    }
  });
  Epilogue e;
  HGP_TRY(epilogueOf(a, ops->residual >= 0 ? 3 : a.in.size(), e));
  applyChannelAffine(l, x, affine, e, a.out[0].f32());
  return Status::ok();
}

Status execBatchNormBwd(KernelArgs& a) {
  HGP_TRY(checkArity(a, 5, 7, 3, 4));
  HGP_TRY(checkChannelOperands(a, 1, 2, 3));
  HGP_TRY(checkF32(a, a.in[0], "dY"));
  HGP_TRY(checkShape(a, a.in[0], *a.in[1].shape, "dY"));
  ChannelLayout l(*a.in[1].shape);
  HGP_TRY(checkShape(a, a.out[0], *a.in[1].shape, "dX"));
  HGP_TRY(checkShape(a, a.out[1], {l.c}, "dscale"));
  HGP_TRY(checkShape(a, a.out[2], {l.c}, "dbias"));
  const float *dyIn = a.in[0].f32(), *x = a.in[1].f32(), *scale = a.in[2].f32(),
              *mean = a.in[3].f32(), *var = a.in[4].f32();
  float *dx = a.out[0].f32(), *dscale = a.out[1].f32(), *dbias = a.out[2].f32();
  auto ops = bnBwdOperands(a.attrs(), a.in.size());
  if (!ops) return a.fail(ops.status().message());
  // Fused ReluBwd: dY is the gradient of Z = relu(BN(X)); the BN's own dY is Z > 0 ? dY : 0.
  const float* z = nullptr;
  if (ops->relu()) {
    HGP_TRY(checkF32(a, a.in[size_t(ops->z)], "Z"));
    HGP_TRY(checkShape(a, a.in[size_t(ops->z)], *a.in[1].shape, "Z"));
    z = a.in[size_t(ops->z)].f32();
  }
  // Fused SiluBwd or HardSwishBwd: their input, the BatchNorm's result y, is recomputed from X
  // as the forward computed it (rounded to X's dtype, as the unfused BatchNorm stored it), from
  // the saved statistics; the gradient is rounded to dY's dtype, as the unfused op stored it.
  std::vector<ChannelAffine> pre;
  if (ops->recomputes()) {
    HGP_TRY(checkChannelOperands(a, 1, size_t(ops->bias), 1));
    const float* bias = a.in[size_t(ops->bias)].f32();
    double e = epsilonOf(a);
    pre.resize(size_t(l.c));
    for (int64_t c = 0; c < l.c; ++c) pre[size_t(c)] = {scale[c], bias[c], mean[c], var[c], e};
  }
  DType xStored = a.in[1].stored;
  auto actGrad = [&](float g, int64_t e) -> float {
    if (pre.empty()) return z && !(z[e] > 0.f) ? 0.f : g;
    const ChannelAffine& f = pre[size_t((e / l.plane) % l.c)];
    float y = roundedAs(xStored, ((x[e] - f.hi) - f.lo) * f.alpha + f.bias);
    return roundedAs(a.in[0].stored,
                     ops->act == BnActivation::Silu ? siluBwdOf(g, y) : hardSwishBwdOf(g, y));
  };
  // Folded Sum: dY is round(dY + dY2), added in float and rounded to dY's stored dtype once, as
  // the unfused Sum stored it.
  const float* dy2 = nullptr;
  DType dyStored = a.in[0].stored;
  if (ops->split()) {
    HGP_TRY(checkF32(a, a.in[size_t(ops->dy2)], "dY2"));
    HGP_TRY(checkShape(a, a.in[size_t(ops->dy2)], *a.in[1].shape, "dY2"));
    if (a.in[size_t(ops->dy2)].stored != dyStored) return a.fail("dY2 must have dY's dtype");
    dy2 = a.in[size_t(ops->dy2)].f32();
  }
  auto dy = [&](int64_t e) -> float {
    return actGrad(dy2 ? roundedAs(dyStored, dyIn[e] + dy2[e]) : dyIn[e], e);
  };
  float* gOut = nullptr; // dY through the activation's gradient (Relu: for its other readers)
  if (a.out.size() == 4) {
    if (!ops->fused()) return a.fail("the result G needs an activation");
    HGP_TRY(checkShape(a, a.out[3], *a.in[1].shape, "G"));
    gOut = a.out[3].f32();
  }
  bool batchStats = a.attrs().getInt("batch_stats", 1) != 0;
  double eps = epsilonOf(a);
  parallelFor(l.c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double mu = mean[c], invstd = 1.0 / std::sqrt(double(var[c]) + eps);
      double sumDy = 0, sumDyXhat = 0;
      std::vector<float> g(size_t(l.count())); // the BatchNorm's own dY, computed once
      for (int64_t i = 0; i < l.n; ++i)
        for (int64_t j = 0; j < l.plane; ++j) {
          int64_t e = l.at(i, c) + j;
          float d = g[size_t(i * l.plane + j)] = dy(e);
          sumDy += d;
          sumDyXhat += double(d) * (double(x[e]) - mu) * invstd;
          if (gOut) gOut[e] = d;
        }
      dbias[c] = float(sumDy);
      dscale[c] = float(sumDyXhat);
      double k = double(scale[c]) * invstd;
      double m = double(l.count());
      for (int64_t i = 0; i < l.n; ++i)
        for (int64_t j = 0; j < l.plane; ++j) {
          int64_t e = l.at(i, c) + j;
          if (!batchStats) {
            dx[e] = float(double(g[size_t(i * l.plane + j)]) * k);
            continue;
          }
          // The batch statistics depend on x: dx = k * (dy - mean(dy) - xhat * mean(dy*xhat)).
          double xhat = (double(x[e]) - mu) * invstd;
          dx[e] =
              float(k * (double(g[size_t(i * l.plane + j)]) - sumDy / m - xhat * sumDyXhat / m));
        }
    }
  });
  return Status::ok();
}

Status execBnStatsGrad(KernelArgs& a) {
  HGP_TRY(checkArity(a, 4, 4, 2, 2));
  for (size_t i = 0; i < 4; ++i) {
    HGP_TRY(checkF32(a, a.in[i], "per-channel operand"));
    if (a.in[i].rank() != 1) return a.fail("per-channel operands must be f32[C]");
    HGP_TRY(checkShape(a, a.in[i], *a.in[0].shape, "per-channel operand"));
  }
  for (size_t i = 0; i < 2; ++i) HGP_TRY(checkShape(a, a.out[i], *a.in[0].shape, "result"));
  const float *dscale = a.in[0].f32(), *dbias = a.in[1].f32(), *scale = a.in[2].f32(),
              *var = a.in[3].f32();
  float *dmean = a.out[0].f32(), *dvar = a.out[1].f32();
  double eps = epsilonOf(a);
  for (int64_t c = 0; c < a.in[0].numel(); ++c) {
    double invstd = 1.0 / std::sqrt(double(var[c]) + eps), k = double(scale[c]) * invstd;
    double dm = -k * double(dbias[c]), dv = -0.5 * k * invstd * double(dscale[c]);
    dmean[c] = float(dm);
    dvar[c] = float(dv);
  }
  return Status::ok();
}

Status execBnRunningUpdate(KernelArgs& a) {
  HGP_TRY(checkArity(a, 4, 5, 2, 2));
  for (size_t i = 0; i < 4; ++i) {
    HGP_TRY(checkF32(a, a.in[i], "statistic"));
    HGP_TRY(checkShape(a, a.in[i], *a.in[0].shape, "statistic"));
  }
  for (size_t i = 0; i < 2; ++i) {
    HGP_TRY(checkF32(a, a.out[i], "running statistic"));
    HGP_TRY(checkShape(a, a.out[i], *a.in[0].shape, "running statistic"));
  }
  if (a.in.size() == 5) HGP_TRY(checkScalar(a, a.in[4], DType::F32, "ok"));
  bool skip = a.in.size() == 5 && a.in[4].f32()[0] == 0.f;
  if (skip) {
    copyBytes(a.out[0], a.in[0]);
    copyBytes(a.out[1], a.in[1]);
    return Status::ok();
  }
  double momentum = a.attrs().getFloat("momentum", 0.9);
  double varFactor = 1.0;
  if (a.attrs().getInt("unbiased", 0)) {
    int64_t count = a.attrs().getInt("count", 0);
    if (count < 2) return a.fail("an unbiased update needs count >= 2");
    varFactor = double(count) / double(count - 1);
  }
  const float *rm = a.in[0].f32(), *rv = a.in[1].f32(), *bm = a.in[2].f32(), *bv = a.in[3].f32();
  float *rmOut = a.out[0].f32(), *rvOut = a.out[1].f32();
  // The outputs share storage with rm and rv: each element is read before it is written.
  for (int64_t c = 0; c < a.in[0].numel(); ++c) {
    double m = double(rm[c]) * momentum + double(bm[c]) * (1 - momentum);
    double v = double(rv[c]) * momentum + double(bv[c]) * varFactor * (1 - momentum);
    rmOut[c] = float(m);
    rvOut[c] = float(v);
  }
  return Status::ok();
}

namespace {

struct LrnParams {
  int64_t size = 1, lo = 0, hi = 0; ///< The window is channels [c - lo, c + hi].
  double alpha = 1e-4, beta = 0.75, bias = 1.0;
};

Status readLrn(const KernelArgs& a, LrnParams& p) {
  p.size = a.attrs().getInt("size", 0);
  if (p.size < 1) return a.fail("LRN size must be positive");
  p.lo = (p.size - 1) / 2;
  p.hi = p.size - 1 - p.lo;
  p.alpha = a.attrs().getFloat("alpha", 1e-4);
  p.beta = a.attrs().getFloat("beta", 0.75);
  p.bias = a.attrs().getFloat("bias", 1.0);
  return Status::ok();
}

/// s[c] = bias + alpha/size * sum of x^2 over channel c's window, for one image and one spatial
/// position (x and s step by `plane` between channels).
void lrnScale(const LrnParams& p, const float* x, int64_t channels, int64_t plane, double* s) {
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0;
    for (int64_t k = std::max<int64_t>(0, c - p.lo); k <= std::min(channels - 1, c + p.hi); ++k)
      sum += double(x[k * plane]) * double(x[k * plane]);
    s[c] = p.bias + p.alpha / double(p.size) * sum;
  }
}

} // namespace

Status execLRN(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32(a, a.in[0], "X"));
  if (a.in[0].rank() < 3) return a.fail("LRN needs rank 3 or more");
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "Y"));
  LrnParams p;
  HGP_TRY(readLrn(a, p));
  ChannelLayout l(*a.in[0].shape);
  const float* x = a.in[0].f32();
  float* y = a.out[0].f32();
  parallelFor(l.n * l.plane, 64, [&](int64_t q0, int64_t q1) {
    std::vector<double> s(static_cast<size_t>(l.c));
    for (int64_t q = q0; q < q1; ++q) {
      int64_t base = (q / l.plane) * l.c * l.plane + q % l.plane;
      lrnScale(p, x + base, l.c, l.plane, s.data());
      for (int64_t c = 0; c < l.c; ++c) {
        int64_t e = base + c * l.plane;
        y[e] = float(double(x[e]) * std::pow(s[size_t(c)], -p.beta));
      }
    }
  });
  return Status::ok();
}

Status execLRNBwd(KernelArgs& a) {
  HGP_TRY(checkArity(a, 3, 3, 1, 1));
  for (const auto& v : a.in) {
    HGP_TRY(checkF32(a, v, "operand"));
    HGP_TRY(checkShape(a, v, *a.in[0].shape, "operand"));
  }
  if (a.in[0].rank() < 3) return a.fail("LRN needs rank 3 or more");
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "dX"));
  LrnParams p;
  HGP_TRY(readLrn(a, p));
  ChannelLayout l(*a.in[0].shape);
  const float *dy = a.in[0].f32(), *x = a.in[1].f32(), *y = a.in[2].f32();
  float* dx = a.out[0].f32();
  // y_k = x_k * s_k^-beta, s_k = bias + alpha/size * sum_{j in window(k)} x_j^2, so
  // dx_c = dy_c * s_c^-beta - 2*alpha*beta/size * x_c * sum_{k: c in window(k)} dy_k * y_k / s_k.
  double coef = 2.0 * p.alpha * p.beta / double(p.size);
  parallelFor(l.n * l.plane, 64, [&](int64_t q0, int64_t q1) {
    std::vector<double> s(size_t(l.c)), t(size_t(l.c));
    for (int64_t q = q0; q < q1; ++q) {
      int64_t base = (q / l.plane) * l.c * l.plane + q % l.plane;
      lrnScale(p, x + base, l.c, l.plane, s.data());
      for (int64_t k = 0; k < l.c; ++k) {
        int64_t e = base + k * l.plane;
        t[size_t(k)] = double(dy[e]) * double(y[e]) / s[size_t(k)];
      }
      for (int64_t c = 0; c < l.c; ++c) {
        // Channel c is in window(k) for k in [c - hi, c + lo].
        double sum = 0;
        for (int64_t k = std::max<int64_t>(0, c - p.hi); k <= std::min(l.c - 1, c + p.lo); ++k)
          sum += t[size_t(k)];
        int64_t e = base + c * l.plane;
        dx[e] = float(double(dy[e]) * std::pow(s[size_t(c)], -p.beta) - coef * double(x[e]) * sum);
      }
    }
  });
  return Status::ok();
}

} // namespace hgp::cpu
