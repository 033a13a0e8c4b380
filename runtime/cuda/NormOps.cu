// CUDA executors for BatchNorm (inference, training, gradient, running statistics) and LRN
// (NormOps.cpp on the CPU).
//
// BatchNormTrain makes three passes: per-channel partial sums over chunks of each channel
// (channelPartialsKernel: sum(x - K) and sum((x - K)^2) in double, shifted by the channel's first
// element K so that a large mean does not cancel the variance away), a per-channel finalize that
// adds the parts in a fixed order and writes the mean, the biased variance and the affine
// coefficients, and an apply pass y = x * alpha[c] + beta[c] rounded exactly as the CPU rounds it.
// BatchNormBwd is the same shape: sums of dy and dy * (x - mean), a finalize that writes dscale,
// dbias and the coefficients of dx, and an apply pass in double. Both are deterministic for a
// given device. Scratch (partials, coefficients) is
// the step's own (stepScratch). Mixed precision: X, Y, dY and dX may be bf16 or f16 (read as
// float, rounded once on store); scale, bias and every statistic stay f32, as in cuDNN's and
// PyTorch's mixed-precision BatchNorm.
#include "runtime/cuda/DeviceUtil.cuh"

#include <type_traits>

namespace hgp::cuda {

namespace {

Status checkChannelOperands(const CudaArgs& a, size_t x, size_t first, size_t count) {
  HGP_TRY(checkFloat(a, a.in[x], "X"));
  if (a.in[x].rank() < 2) return a.fail("X must have at least 2 dims (N, C)");
  int64_t c = a.in[x].dim(1);
  for (size_t i = first; i < first + count; ++i) {
    HGP_TRY(checkF32(a, a.in[i], "per-channel operand"));
    HGP_TRY(checkShape(a, a.in[i], {c}, "per-channel operand"));
  }
  return Status::ok();
}

ChannelShape channelShapeOf(const Shape& s) {
  ChannelShape c;
  c.outer = s[0];
  c.channels = s[1];
  for (size_t i = 2; i < s.size(); ++i) c.inner *= s[i];
  return c;
}

/// Elementwise pass over an [N, C, inner] tensor: f.one(c, i) per element, or f.four(c, i) per
/// aligned group of four (inner % 4 == 0, so a group never straddles channels).
template <typename F> __global__ void channelMapKernel(ChannelShape s, bool vec, F f) {
  int64_t total = s.outer * s.channels * s.inner;
  if (vec) {
    int64_t inner4 = s.inner / 4;
    HGP_GRID_LOOP(q, total / 4) f.four((q / inner4) % s.channels, q * 4);
  } else {
    HGP_GRID_LOOP(i, total) f.one((i / s.inner) % s.channels, i);
  }
}

template <typename F>
Status launchChannelMap(CudaArgs& a, const ChannelShape& s, bool vec, const F& f) {
  int64_t total = s.outer * s.channels * s.inner;
  channelMapKernel<<<blocksFor(a, vec ? total / 4 : total), kBlock, 0, a.stream>>>(s, vec, f);
  return checkLaunch(a, "channelMapKernel");
}

// ---- Forward -------------------------------------------------------------------------------

/// y = x * alpha[c] + beta[c], two roundings (no FMA), as the CPU computes it.
template <typename T> struct AffineApply {
  const T* x;
  const float *alpha, *beta;
  T* y;
  __device__ void one(int64_t c, int64_t i) const {
    y[i] = fromFloat<T>(__fadd_rn(__fmul_rn(toFloat(x[i]), alpha[c]), beta[c]));
  }
  __device__ void four(int64_t c, int64_t i) const {
    if constexpr (!std::is_same_v<T, float>) {
      for (int k = 0; k < 4; ++k) one(c, i + k);
      return;
    } else {
    float al = alpha[c], be = beta[c];
    float4 v = *reinterpret_cast<const float4*>(x + i);
    *reinterpret_cast<float4*>(y + i) =
        make_float4(__fadd_rn(__fmul_rn(v.x, al), be), __fadd_rn(__fmul_rn(v.y, al), be),
                    __fadd_rn(__fmul_rn(v.z, al), be), __fadd_rn(__fmul_rn(v.w, al), be));
    }
  }
};

/// Shifted sums: acc[0] += x - K, acc[1] += (x - K)^2, K = the channel's first element.
template <typename T> struct StatsSums {
  const T* x;
  int64_t inner;
  struct Channel {
    const T* x;
    double k;
    __device__ void one(double (&acc)[2], int64_t off) const {
      double d = double(toFloat(x[off])) - k;
      acc[0] += d;
      acc[1] += d * d;
    }
    __device__ void four(double (&acc)[2], int64_t off) const {
      if constexpr (!std::is_same_v<T, float>) {
        for (int q = 0; q < 4; ++q) one(acc, off + q);
        return;
      } else {
      float4 v = *reinterpret_cast<const float4*>(x + off);
      double d0 = double(v.x) - k, d1 = double(v.y) - k, d2 = double(v.z) - k, d3 = double(v.w) - k;
      acc[0] += (d0 + d1) + (d2 + d3);
      acc[1] += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
      }
    }
  };
  __device__ Channel channel(int64_t c) const { return {x, double(toFloat(x[c * inner]))}; }
};

template <typename T>
__global__ void statsFinalizeKernel(ChannelShape s, int parts, const double* partials,
                                    const T* x, const float* scale, const float* bias,
                                    double eps, float* meanOut, float* varOut, float* alpha,
                                    float* beta) {
  HGP_GRID_LOOP(c, s.channels) {
    double sum[2];
    sumParts<2>(partials, parts, c, sum);
    double n = double(s.count()), k = double(toFloat(x[c * s.inner]));
    double mean = k + sum[0] / n;
    double var = (sum[1] - sum[0] * sum[0] / n) / n;
    if (var < 0) var = 0;
    double al = double(scale[c]) / sqrt(var + eps);
    alpha[c] = float(al);
    beta[c] = float(double(bias[c]) - mean * al);
    meanOut[c] = float(mean);
    varOut[c] = float(var);
  }
}

__global__ void inferenceCoefficientsKernel(int64_t channels, const float* scale, const float* bias,
                                            const float* mean, const float* var, double eps,
                                            float* alpha, float* beta) {
  HGP_GRID_LOOP(c, channels) {
    double al = double(scale[c]) / sqrt(double(var[c]) + eps);
    alpha[c] = float(al);
    beta[c] = float(double(bias[c]) - double(mean[c]) * al);
  }
}

// ---- Backward ------------------------------------------------------------------------------

/// acc[0] += dy, acc[1] += dy * (x - mean[c]).
template <typename T> struct BwdSums {
  const T *dy, *x;
  const float* mean;
  struct Channel {
    const T *dy, *x;
    double mu;
    __device__ void one(double (&acc)[2], int64_t off) const {
      double g = toFloat(dy[off]);
      acc[0] += g;
      acc[1] += g * (double(toFloat(x[off])) - mu);
    }
    __device__ void four(double (&acc)[2], int64_t off) const {
      if constexpr (!std::is_same_v<T, float>) {
        for (int q = 0; q < 4; ++q) one(acc, off + q);
        return;
      } else {
      float4 g = *reinterpret_cast<const float4*>(dy + off);
      float4 v = *reinterpret_cast<const float4*>(x + off);
      acc[0] += (double(g.x) + double(g.y)) + (double(g.z) + double(g.w));
      acc[1] += (double(g.x) * (double(v.x) - mu) + double(g.y) * (double(v.y) - mu)) +
                (double(g.z) * (double(v.z) - mu) + double(g.w) * (double(v.w) - mu));
      }
    }
  };
  __device__ Channel channel(int64_t c) const { return {dy, x, double(mean[c])}; }
};

/// Per channel: k = scale * invstd, the mean of dy, k * invstd * mean(dy * (x - mu)), mu.
struct BwdCoefficients {
  double k, meanDy, slope, mu;
};

__global__ void bwdFinalizeKernel(ChannelShape s, int parts, const double* partials,
                                  const float* scale, const float* mean, const float* var,
                                  double eps, bool batchStats, float* dscale, float* dbias,
                                  BwdCoefficients* coef) {
  HGP_GRID_LOOP(c, s.channels) {
    double sum[2];
    sumParts<2>(partials, parts, c, sum);
    double invstd = 1.0 / sqrt(double(var[c]) + eps), m = double(s.count());
    double sumDyXhat = sum[1] * invstd;
    dbias[c] = float(sum[0]);
    dscale[c] = float(sumDyXhat);
    double k = double(scale[c]) * invstd;
    coef[c] = batchStats
                  ? BwdCoefficients{k, sum[0] / m, k * invstd * sumDyXhat / m, double(mean[c])}
                  : BwdCoefficients{k, 0.0, 0.0, 0.0};
  }
}

/// dx = k * (dy - mean(dy)) - slope * (x - mu), in double; the frozen form has only k * dy.
template <typename T> struct BwdApply {
  const T *dy, *x;
  const BwdCoefficients* coef;
  T* dx;
  bool batchStats;
  __device__ float at(const BwdCoefficients& q, float g, float v) const {
    if (!batchStats) return float(double(g) * q.k);
    return float(q.k * (double(g) - q.meanDy) - q.slope * (double(v) - q.mu));
  }
  __device__ void one(int64_t c, int64_t i) const {
    dx[i] = fromFloat<T>(at(coef[c], toFloat(dy[i]), toFloat(x[i])));
  }
  __device__ void four(int64_t c, int64_t i) const {
    if constexpr (!std::is_same_v<T, float>) {
      for (int k = 0; k < 4; ++k) one(c, i + k);
      return;
    } else {
    BwdCoefficients q = coef[c];
    float4 g = *reinterpret_cast<const float4*>(dy + i);
    float4 v = *reinterpret_cast<const float4*>(x + i);
    *reinterpret_cast<float4*>(dx + i) =
        make_float4(at(q, g.x, v.x), at(q, g.y, v.y), at(q, g.z, v.z), at(q, g.w, v.w));
    }
  }
};

// ---- Running statistics and LRN ------------------------------------------------------------

__global__ void runningUpdateKernel(int64_t n, const float* rm, const float* rv, const float* bm,
                                    const float* bv, const float* ok, double momentum,
                                    double varFactor, float* rmOut, float* rvOut) {
  bool skip = ok && *ok == 0.f;
  HGP_GRID_LOOP(c, n) {
    float m0 = rm[c], v0 = rv[c];
    if (skip) {
      rmOut[c] = m0;
      rvOut[c] = v0;
      continue;
    }
    rmOut[c] = float(double(m0) * momentum + double(bm[c]) * (1 - momentum));
    rvOut[c] = float(double(v0) * momentum + double(bv[c]) * varFactor * (1 - momentum));
  }
}

__global__ void bnStatsGradKernel(int64_t n, const float* dscale, const float* dbias,
                                  const float* scale, const float* var, double eps, float* dmean,
                                  float* dvar) {
  HGP_GRID_LOOP(c, n) {
    double invstd = 1.0 / sqrt(double(var[c]) + eps), k = double(scale[c]) * invstd;
    double dm = -k * double(dbias[c]), dv = -0.5 * k * invstd * double(dscale[c]);
    dmean[c] = float(dm);
    dvar[c] = float(dv);
  }
}

struct LrnParams {
  int64_t size = 1, lo = 0, hi = 0; ///< The window is channels [c - lo, c + hi].
  double alpha = 1e-4, beta = 0.75, bias = 1.0;
};

Status readLrn(const CudaArgs& a, LrnParams& p) {
  p.size = a.attrs().getInt("size", 0);
  if (p.size < 1) return a.fail("LRN size must be positive");
  p.lo = (p.size - 1) / 2;
  p.hi = p.size - 1 - p.lo;
  p.alpha = a.attrs().getFloat("alpha", 1e-4);
  p.beta = a.attrs().getFloat("beta", 0.75);
  p.bias = a.attrs().getFloat("bias", 1.0);
  return Status::ok();
}

/// bias + alpha/size * the sum of x^2 over channel c's window (x at channel 0 of its position).
__device__ double lrnScale(const LrnParams& p, const float* x, int64_t c, int64_t channels,
                           int64_t plane) {
  double sum = 0;
  int64_t k0 = c - p.lo < 0 ? 0 : c - p.lo, k1 = c + p.hi > channels - 1 ? channels - 1 : c + p.hi;
  for (int64_t k = k0; k <= k1; ++k) sum += double(x[k * plane]) * double(x[k * plane]);
  return p.bias + p.alpha / double(p.size) * sum;
}

__global__ void lrnKernel(LrnParams p, ChannelShape s, const float* x, float* y) {
  HGP_GRID_LOOP(e, s.outer * s.channels * s.inner) {
    int64_t j = e % s.inner, c = (e / s.inner) % s.channels, n = e / (s.inner * s.channels);
    const float* base = x + n * s.channels * s.inner + j;
    y[e] = float(double(x[e]) * pow(lrnScale(p, base, c, s.channels, s.inner), -p.beta));
  }
}

__global__ void lrnBwdKernel(LrnParams p, ChannelShape s, const float* dy, const float* x,
                             const float* y, float* dx) {
  double coef = 2.0 * p.alpha * p.beta / double(p.size);
  HGP_GRID_LOOP(e, s.outer * s.channels * s.inner) {
    int64_t j = e % s.inner, c = (e / s.inner) % s.channels, n = e / (s.inner * s.channels);
    int64_t off = n * s.channels * s.inner + j;
    const float* base = x + off;
    // Channel c is in window(k) for k in [c - hi, c + lo].
    double sum = 0;
    int64_t k0 = c - p.hi < 0 ? 0 : c - p.hi;
    int64_t k1 = c + p.lo > s.channels - 1 ? s.channels - 1 : c + p.lo;
    for (int64_t k = k0; k <= k1; ++k) {
      int64_t ek = off + k * s.inner;
      sum += double(dy[ek]) * double(y[ek]) / lrnScale(p, base, k, s.channels, s.inner);
    }
    double sc = lrnScale(p, base, c, s.channels, s.inner);
    dx[e] = float(double(dy[e]) * pow(sc, -p.beta) - coef * double(x[e]) * sum);
  }
}

} // namespace

namespace {

template <typename T> Status batchNorm(CudaArgs& a) {
  HGP_TRY(checkDType(a, a.out[0], a.in[0].dtype, "Y"));
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "Y"));
  ChannelShape s = channelShapeOf(*a.in[0].shape);
  float* coef;
  HGP_TRY(stepScratch(a, size_t(2 * s.channels) * sizeof(float), coef));
  double eps = a.attrs().getFloat("epsilon", 1e-5);
  inferenceCoefficientsKernel<<<blocksFor(a, s.channels), kBlock, 0, a.stream>>>(
      s.channels, a.in[1].f32(), a.in[2].f32(), a.in[3].f32(), a.in[4].f32(), eps, coef,
      coef + s.channels);
  HGP_TRY(checkLaunch(a, "inferenceCoefficientsKernel"));
  bool vec = s.inner % 4 == 0 && aligned16({a.in[0].data, a.out[0].data});
  return launchChannelMap(
      a, s, vec, AffineApply<T>{a.in[0].as<T>(), coef, coef + s.channels, a.out[0].as<T>()});
}

template <typename T> Status batchNormTrain(CudaArgs& a) {
  HGP_TRY(checkDType(a, a.out[0], a.in[0].dtype, "Y"));
  HGP_TRY(checkF32(a, a.out[1], "batch_mean"));
  HGP_TRY(checkF32(a, a.out[2], "batch_var"));
  ChannelShape s = channelShapeOf(*a.in[0].shape);
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "Y"));
  HGP_TRY(checkShape(a, a.out[1], {s.channels}, "batch_mean"));
  HGP_TRY(checkShape(a, a.out[2], {s.channels}, "batch_var"));
  const T* x = a.in[0].as<T>();
  ChannelSplit sp = planChannelSplit(a, s, aligned16({x}));
  size_t partialBytes = size_t(s.channels * sp.parts * 2) * sizeof(double);
  double* partials;
  HGP_TRY(stepScratch(a, partialBytes + size_t(2 * s.channels) * sizeof(float) + 16, partials));
  float* alpha = reinterpret_cast<float*>(reinterpret_cast<char*>(partials) + partialBytes);
  float* beta = alpha + s.channels;
  HGP_TRY(launchChannelPartials<2>(a, s, sp, StatsSums<T>{x, s.inner}, partials));
  statsFinalizeKernel<<<blocksFor(a, s.channels), kBlock, 0, a.stream>>>(
      s, sp.parts, partials, x, a.in[1].f32(), a.in[2].f32(), a.attrs().getFloat("epsilon", 1e-5),
      a.out[1].f32(), a.out[2].f32(), alpha, beta);
  HGP_TRY(checkLaunch(a, "statsFinalizeKernel"));
  bool vec = s.inner % 4 == 0 && aligned16({x, a.out[0].data});
  return launchChannelMap(a, s, vec, AffineApply<T>{x, alpha, beta, a.out[0].as<T>()});
}

template <typename T> Status batchNormBwd(CudaArgs& a) {
  HGP_TRY(checkDType(a, a.in[0], a.in[1].dtype, "dY"));
  HGP_TRY(checkDType(a, a.out[0], a.in[1].dtype, "dX"));
  HGP_TRY(checkF32(a, a.out[1], "dscale"));
  HGP_TRY(checkF32(a, a.out[2], "dbias"));
  HGP_TRY(checkShape(a, a.in[0], *a.in[1].shape, "dY"));
  ChannelShape s = channelShapeOf(*a.in[1].shape);
  HGP_TRY(checkShape(a, a.out[0], *a.in[1].shape, "dX"));
  HGP_TRY(checkShape(a, a.out[1], {s.channels}, "dscale"));
  HGP_TRY(checkShape(a, a.out[2], {s.channels}, "dbias"));
  const T *dy = a.in[0].as<T>(), *x = a.in[1].as<T>();
  bool batchStats = a.attrs().getInt("batch_stats", 1) != 0;
  ChannelSplit sp = planChannelSplit(a, s, aligned16({dy, x}));
  size_t partialBytes = size_t(s.channels * sp.parts * 2) * sizeof(double);
  double* partials;
  HGP_TRY(stepScratch(a, partialBytes + size_t(s.channels) * sizeof(BwdCoefficients), partials));
  auto* coef = reinterpret_cast<BwdCoefficients*>(reinterpret_cast<char*>(partials) + partialBytes);
  HGP_TRY(launchChannelPartials<2>(a, s, sp, BwdSums<T>{dy, x, a.in[3].f32()}, partials));
  bwdFinalizeKernel<<<blocksFor(a, s.channels), kBlock, 0, a.stream>>>(
      s, sp.parts, partials, a.in[2].f32(), a.in[3].f32(), a.in[4].f32(),
      a.attrs().getFloat("epsilon", 1e-5), batchStats, a.out[1].f32(), a.out[2].f32(), coef);
  HGP_TRY(checkLaunch(a, "bwdFinalizeKernel"));
  bool vec = s.inner % 4 == 0 && aligned16({dy, x, a.out[0].data});
  return launchChannelMap(a, s, vec, BwdApply<T>{dy, x, coef, a.out[0].as<T>(), batchStats});
}

} // namespace

Status execBatchNorm(CudaArgs& a) {
  HGP_TRY(checkArity(a, 5, 5, 1, 1));
  HGP_TRY(checkChannelOperands(a, 0, 1, 4));
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) { return batchNorm<decltype(t)>(a); });
}

Status execBatchNormTrain(CudaArgs& a) {
  HGP_TRY(checkArity(a, 3, 3, 3, 3));
  HGP_TRY(checkChannelOperands(a, 0, 1, 2));
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) { return batchNormTrain<decltype(t)>(a); });
}

Status execBatchNormBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 5, 5, 3, 3));
  HGP_TRY(checkChannelOperands(a, 1, 2, 3));
  return dispatchFloat(a, a.in[1].dtype, [&](auto t) { return batchNormBwd<decltype(t)>(a); });
}

Status execBnRunningUpdate(CudaArgs& a) {
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
  double momentum = a.attrs().getFloat("momentum", 0.9);
  double varFactor = 1.0;
  if (a.attrs().getInt("unbiased", 0)) {
    int64_t count = a.attrs().getInt("count", 0);
    if (count < 2) return a.fail("an unbiased update needs count >= 2");
    varFactor = double(count) / double(count - 1);
  }
  int64_t n = a.in[0].numel();
  runningUpdateKernel<<<blocksFor(a, n), kBlock, 0, a.stream>>>(
      n, a.in[0].f32(), a.in[1].f32(), a.in[2].f32(), a.in[3].f32(),
      a.in.size() == 5 ? a.in[4].f32() : nullptr, momentum, varFactor, a.out[0].f32(),
      a.out[1].f32());
  return checkLaunch(a, "runningUpdateKernel");
}

Status execBnStatsGrad(CudaArgs& a) {
  HGP_TRY(checkArity(a, 4, 4, 2, 2));
  for (size_t i = 0; i < 4; ++i) {
    HGP_TRY(checkF32(a, a.in[i], "per-channel operand"));
    if (a.in[i].rank() != 1) return a.fail("per-channel operands must be f32[C]");
    HGP_TRY(checkShape(a, a.in[i], *a.in[0].shape, "per-channel operand"));
  }
  for (size_t i = 0; i < 2; ++i) HGP_TRY(checkShape(a, a.out[i], *a.in[0].shape, "result"));
  int64_t n = a.in[0].numel();
  bnStatsGradKernel<<<blocksFor(a, n), kBlock, 0, a.stream>>>(
      n, a.in[0].f32(), a.in[1].f32(), a.in[2].f32(), a.in[3].f32(),
      a.attrs().getFloat("epsilon", 1e-5), a.out[0].f32(), a.out[1].f32());
  return checkLaunch(a, "bnStatsGradKernel");
}

Status execLRN(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32(a, a.in[0], "X"));
  if (a.in[0].rank() < 3) return a.fail("LRN needs rank 3 or more");
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "Y"));
  if (a.out[0].data == a.in[0].data) return a.fail("LRN cannot run in place");
  LrnParams p;
  HGP_TRY(readLrn(a, p));
  ChannelShape s = channelShapeOf(*a.in[0].shape);
  lrnKernel<<<blocksFor(a, a.in[0].numel()), kBlock, 0, a.stream>>>(p, s, a.in[0].f32(),
                                                                    a.out[0].f32());
  return checkLaunch(a, "lrnKernel");
}

Status execLRNBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 3, 3, 1, 1));
  for (const auto& v : a.in) {
    HGP_TRY(checkF32(a, v, "operand"));
    HGP_TRY(checkShape(a, v, *a.in[0].shape, "operand"));
  }
  if (a.in[0].rank() < 3) return a.fail("LRN needs rank 3 or more");
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "dX"));
  for (const auto& v : a.in)
    if (v.data == a.out[0].data) return a.fail("LRNBwd cannot run in place");
  LrnParams p;
  HGP_TRY(readLrn(a, p));
  ChannelShape s = channelShapeOf(*a.in[0].shape);
  lrnBwdKernel<<<blocksFor(a, a.in[0].numel()), kBlock, 0, a.stream>>>(
      p, s, a.in[0].f32(), a.in[1].f32(), a.in[2].f32(), a.out[0].f32());
  return checkLaunch(a, "lrnBwdKernel");
}

} // namespace hgp::cuda
