// Internal to the BatchNorm executors: what the NCHW passes (NormOps.cu) and the channels-last
// passes (NhwcNormOps.cu) share. The per-element work of each pass is a functor: its data
// (pointers, flags), its float arithmetic (`at`), its NCHW accessors (`one`/`vec` for the
// elementwise passes, `channel` for the sums) and the declaration of its channels-last view
// (`Columns`, `columns`), which NhwcNormOps.cu defines next to the kernels that use it. Both
// layouts therefore make the same float operations per element. The per-channel finalizers that
// end each sums pass are functors here too, so that both layouts finalize with the same code; the
// op-level code (checks, scratch) stays in NormOps.cu, one copy for both layouts. The
// channels-last passes are reached through the three launchers declared at the end, explicitly
// instantiated in NhwcNormOps.cu for every functor and element type (float, bf16, f16).
#pragma once

#include "runtime/cuda/ActivationMath.cuh"
#include "runtime/cuda/DeviceUtil.cuh"
#include "runtime/plan/BatchNormOperands.h"

namespace hgp::cuda::norm {

/// Vectors (NCHW) or rows (NHWC) a thread sums in float before it adds the run into its double
/// accumulators.
constexpr int kFlush = 8;

/// Whether 32-bit element indices and the fast kernels apply (fewer than 2^31 elements).
inline bool fitsIn32(const ChannelShape& s) {
  return s.outer * s.channels * s.inner < (int64_t(1) << 31);
}

/// One channel's normalization, y = ((x - hi) - lo) * alpha + bias, as the CPU computes it
/// (runtime/cpu/NormOps.cpp): the mean split into a float hi and rest lo, so x - hi is exact near
/// the mean and a mean large against the spread costs no precision.
struct BnAffine {
  float alpha, hi, lo, bias;
};

__device__ __forceinline__ BnAffine bnAffine(double scale, double bias, double mean, double var,
                                             double eps) {
  float hi = float(mean);
  return {float(scale / sqrt(var + eps)), hi, float(mean - double(hi)), float(bias)};
}

/// The affine map with the CPU's roundings (no FMA).
__device__ __forceinline__ float affineOf(float v, const BnAffine& f) {
  return __fadd_rn(__fmul_rn(__fsub_rn(__fsub_rn(v, f.hi), f.lo), f.alpha), f.bias);
}

/// A fused activation of the BN result b: relu as is (relu commutes with rounding), Silu and
/// HardSwish of b rounded to T, as the unfused BatchNorm stored it.
template <typename T> __device__ __forceinline__ float activationOf(BnActivation act, float b) {
  switch (act) {
  case BnActivation::Relu: return reluOf(b);
  case BnActivation::Silu: return SiluF{}(toFloat(fromFloat<T>(b)));
  case BnActivation::HardSwish: return HardSwishF{}(toFloat(fromFloat<T>(b)));
  default: return b;
  }
}

/// The fused activation's gradient at one element (BatchNormBwd), g being the gradient of its
/// output: relu masks g by its output z > 0; Silu and HardSwish recompute their input y =
/// round_T(affine(x)) with the channel's coefficients `pre` and round the gradient to T, as
/// the unfused gradient op stored it.
template <typename T>
__device__ __forceinline__ float activationGrad(BnActivation act, float g, float z, float x,
                                                const BnAffine& pre) {
  switch (act) {
  case BnActivation::Relu: return z > 0.f ? g : 0.f;
  case BnActivation::Silu:
    return toFloat(fromFloat<T>(SiluBwdF{}(g, toFloat(fromFloat<T>(affineOf(x, pre))))));
  case BnActivation::HardSwish:
    return toFloat(fromFloat<T>(HardSwishBwdF{}(g, toFloat(fromFloat<T>(affineOf(x, pre))))));
  default: return g;
  }
}

/// The fused activation's gradient in a kernel compiled for `Smooth` (silu or hardswish: the
/// recompute of activationGrad) or not (none or relu: the mask alone). The kernels are compiled
/// once per kind, so that a plain or Relu BatchNorm pays neither the recompute's registers nor
/// its branches: with one kernel for all four, the H200 ran EfficientNet-B0's and
/// MobileNet-v3's BatchNormBwd 2.4-2.9x slower (8.8 against 3.0 ms a step).
template <typename T, bool Smooth>
__device__ __forceinline__ float fusedGrad(BnActivation act, float g, float z, float x,
                                           const BnAffine& pre) {
  if constexpr (Smooth) return activationGrad<T>(act, g, z, x, pre);
  else return act == BnActivation::Relu && !(z > 0.f) ? 0.f : g;
}

/// How a functor F's channels-last kernels are shaped. The Smooth ones (silu, hardswish) are
/// bound by their arithmetic, not by memory: the H200 ran BwdSums<bf16, 8, Smooth> at 250
/// registers, one block of eight warps per SM, 7x slower than its bytes allow. They take at most
/// four channels a thread, sum four rows at a time (kRows: the rows whose loads are in flight
/// together; kFlush elsewhere) and keep two resident blocks (128 registers), for twice the warps.
template <typename F> struct KernelShape {
  static constexpr int kMaxWidth = 16;
  static constexpr int kMinBlocks = 0; // as __launch_bounds__(kBlock) alone
  static constexpr int kRows = kFlush;
};
template <template <typename, bool> class F, typename T> struct KernelShape<F<T, true>> {
  static constexpr int kMaxWidth = 4;
  static constexpr int kMinBlocks = 2;
  static constexpr int kRows = 4;
};

/// The same for the forward: relu or nothing unless `Smooth`.
template <typename T, bool Smooth>
__device__ __forceinline__ float fusedOf(BnActivation act, float b) {
  if constexpr (Smooth) return activationOf<T>(act, b);
  else return act == BnActivation::Relu ? reluOf(b) : b;
}

/// The affine map, then the fused epilogue: + residual (after rounding to T, as the unfused Y
/// was stored), the activation (Smooth: silu or hardswish, fusedOf).
template <typename T, bool Smooth = false> struct AffineApply {
  const T* x;
  const BnAffine* affine;
  const T* residual; ///< Null unless fused with a residual Add.
  BnActivation act;
  T* y;
  /// Channels-last: elements from one pixel of X to the next (X's channels, or a larger
  /// tensor's when X is a pitched view: a run of a Concat written in place).
  uint32_t xPitch = 0;
  __device__ __forceinline__ float at(float v, const BnAffine& f, float r) const {
    float b = affineOf(v, f);
    if (residual) b = __fadd_rn(toFloat(fromFloat<T>(b)), r);
    return fusedOf<T, Smooth>(act, b);
  }
  __device__ void one(int64_t c, int64_t i) const {
    y[i] = fromFloat<T>(at(toFloat(x[i]), affine[c], residual ? toFloat(residual[i]) : 0.f));
  }
  template <int N> __device__ void vec(int64_t c, int64_t i) const {
    BnAffine f = affine[c];
    float v[N], r[N];
    loadVec<N>(x + i, v);
    if (residual) loadVec<N>(residual + i, r);
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = at(v[k], f, residual ? r[k] : 0.f);
    storeVec<N>(y + i, v);
  }
  /// Channels-last: channels c0 .. c0 + N - 1 (NhwcNormOps.cu).
  template <int N> struct Columns;
  template <int N> __device__ Columns<N> columns(uint32_t c0) const;
};

// The finalizer each sums functor names (F::Finalize), defined below.
template <typename T> struct StatsFinalize;
struct BwdFinalize;

/// Shifted sums: run[0] += x - K, run[1] += (x - K)^2, K = the channel's first element.
template <typename T> struct StatsSums {
  using Finalize = StatsFinalize<T>;
  const T* x;
  int64_t inner;
  uint32_t xPitch = 0; ///< As AffineApply's.
  struct Channel {
    const T* x;
    float k;
    __device__ __forceinline__ void one(float (&run)[2], int64_t off) const {
      float d = toFloat(x[off]) - k;
      run[0] += d;
      run[1] += d * d;
    }
    template <int N> __device__ __forceinline__ void vec(float (&run)[2], int64_t off) const {
      float v[N];
      loadVec<N>(x + off, v);
#pragma unroll
      for (int q = 0; q < N; ++q) {
        float d = v[q] - k;
        run[0] += d;
        run[1] += d * d;
      }
    }
  };
  __device__ Channel channel(int64_t c) const { return {x, toFloat(x[c * inner])}; }
  /// Channels-last: channels c0 .. c0 + N - 1 (NhwcNormOps.cu).
  template <int N> struct Columns;
  template <int N> __device__ Columns<N> columns(uint32_t c0) const;
};

/// dY in two parts (a folded Sum, dy_parts=2): a + b in float, rounded once to T, which is what
/// the unfused Sum stored (ElementwiseOps.cu's sum kernels add with __fadd_rn and round so).
template <typename T> __device__ __forceinline__ float summedGrad(float a, float b) {
  return toFloat(fromFloat<T>(__fadd_rn(a, b)));
}

/// What a BatchNormBwd needs to undo its fused activation (activationGrad): which one, the
/// output Z of a Relu, the forward's coefficients of a Silu or HardSwish (BnActivation::None:
/// nothing to undo).
template <typename T> struct FusedActivation {
  BnActivation act = BnActivation::None;
  const T* z = nullptr;           ///< Relu.
  const BnAffine* pre = nullptr;  ///< Silu, HardSwish: per channel.
  __host__ __device__ bool readsX() const { return pre != nullptr; }
};

/// dY as the BatchNorm sees it at element i of channel c: round(dy + dy2) when dy2 is set (a
/// folded Sum), then through the fused activation's gradient.
template <typename T, bool Smooth>
__device__ __forceinline__ float gradAt(const T* dy, const T* dy2, const FusedActivation<T>& fa,
                                        const T* x, int64_t c, int64_t i) {
  float g = toFloat(dy[i]);
  if (dy2) g = summedGrad<T>(g, toFloat(dy2[i]));
  if (fa.act == BnActivation::None) return g;
  return fusedGrad<T, Smooth>(fa.act, g, fa.z ? toFloat(fa.z[i]) : 0.f,
                              fa.pre ? toFloat(x[i]) : 0.f, fa.pre ? fa.pre[c] : BnAffine{});
}

/// run[0] += dy, run[1] += dy * (x - mean[c]), dy summed from its two parts when dy2 is set and
/// taken through the fused activation's gradient; that dy is also stored into gOut when set
/// (Relu only: it is the rounded sum, or zero). Smooth: compiled for silu and hardswish.
template <typename T, bool Smooth = false> struct BwdSums {
  using Finalize = BwdFinalize;
  const T *dy, *dy2, *x;
  FusedActivation<T> fa;
  T* gOut;
  const float* mean;
  uint32_t xPitch = 0; ///< As AffineApply's.
  struct Channel {
    const T *dy, *dy2, *x, *z;
    T* gOut;
    float mu;
    BnActivation act;
    BnAffine pre;
    __device__ __forceinline__ float grad(float g, float m, float v) const {
      return act == BnActivation::None ? g : fusedGrad<T, Smooth>(act, g, m, v, pre);
    }
    __device__ __forceinline__ void one(float (&run)[2], int64_t off) const {
      float g = toFloat(dy[off]), v = toFloat(x[off]);
      if (dy2) g = summedGrad<T>(g, toFloat(dy2[off]));
      g = grad(g, z ? toFloat(z[off]) : 0.f, v);
      if (gOut) gOut[off] = fromFloat<T>(g);
      run[0] += g;
      run[1] += g * (v - mu);
    }
    template <int N> __device__ __forceinline__ void vec(float (&run)[2], int64_t off) const {
      float g[N], g2[N], v[N], m[N];
      loadVec<N>(dy + off, g);
      if (dy2) loadVec<N>(dy2 + off, g2);
      loadVec<N>(x + off, v);
      if (z) loadVec<N>(z + off, m);
#pragma unroll
      for (int q = 0; q < N; ++q) {
        if (dy2) g[q] = summedGrad<T>(g[q], g2[q]);
        g[q] = grad(g[q], z ? m[q] : 0.f, v[q]);
      }
      if (gOut) storeVec<N>(gOut + off, g);
#pragma unroll
      for (int q = 0; q < N; ++q) {
        run[0] += g[q];
        run[1] += g[q] * (v[q] - mu);
      }
    }
  };
  __device__ Channel channel(int64_t c) const {
    return {dy, dy2, x, fa.z, gOut, mean[c], fa.act, fa.pre ? fa.pre[c] : BnAffine{}};
  }
  /// Channels-last: channels c0 .. c0 + N - 1 (NhwcNormOps.cu).
  template <int N> struct Columns;
  template <int N> __device__ Columns<N> columns(uint32_t c0) const;
};

/// Per channel: k = scale * invstd, the mean of dy, k * invstd * mean(dy * (x - mu)), mu.
struct BwdCoefficients {
  float k, meanDy, slope, mu;
};

/// dx = k * (dy - mean(dy)) - slope * (x - mu) in float; the frozen form has only k * dy. dy is
/// summed from its two parts when dy2 is set and taken through the fused activation's gradient
/// (Smooth: compiled for silu and hardswish).
template <typename T, bool Smooth = false> struct BwdApply {
  const T *dy, *dy2, *x;
  FusedActivation<T> fa;
  const BwdCoefficients* coef;
  T* dx;
  bool batchStats;
  uint32_t xPitch = 0; ///< As AffineApply's.
  __device__ __forceinline__ float at(const BwdCoefficients& q, float g, float v) const {
    if (!batchStats) return g * q.k;
    return q.k * (g - q.meanDy) - q.slope * (v - q.mu);
  }
  /// Whether the pass reads X: for the batch statistics' term, or to recompute an activation's
  /// input.
  __device__ __forceinline__ bool readsX() const { return batchStats || fa.readsX(); }
  __device__ void one(int64_t c, int64_t i) const {
    dx[i] = fromFloat<T>(at(coef[c], gradAt<T, Smooth>(dy, dy2, fa, x, c, i), toFloat(x[i])));
  }
  template <int N> __device__ void vec(int64_t c, int64_t i) const {
    BwdCoefficients q = coef[c];
    BnAffine pre = fa.pre ? fa.pre[c] : BnAffine{};
    float g[N], g2[N], v[N], m[N];
    loadVec<N>(dy + i, g);
    if (dy2) loadVec<N>(dy2 + i, g2);
    loadVec<N>(x + i, v);
    if (fa.z) loadVec<N>(fa.z + i, m);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (dy2) g[k] = summedGrad<T>(g[k], g2[k]);
      if (fa.act != BnActivation::None)
        g[k] = fusedGrad<T, Smooth>(fa.act, g[k], fa.z ? m[k] : 0.f, v[k], pre);
      g[k] = at(q, g[k], v[k]);
    }
    storeVec<N>(dx + i, g);
  }
  /// Channels-last: channels c0 .. c0 + N - 1 (NhwcNormOps.cu).
  template <int N> struct Columns;
  template <int N> __device__ Columns<N> columns(uint32_t c0) const;
};

// ---- Per-channel finalizers ------------------------------------------------------------------
//
// What a sums pass ends with, per channel, from its two totals: the statistics pass the mean, the
// biased variance and the affine coefficients; the gradient pass dscale, dbias and the dX
// coefficients. The NCHW ops run them in a kernel of their own (finalizeKernel, NormOps.cu) over
// the parts in part order; the channels-last sums run them at the end of the kernel that adds
// the parts (NhwcNormOps.cu), which saves a launch per pass: a ResNet-50 step has 106 BatchNorm
// passes, and a dependent launch in a CUDA graph costs a few microseconds however small it is.
// The arithmetic is the same either way. Each sums functor names its finalizer (F::Finalize).

/// Statistics: sum[0] = sum(x - K), sum[1] = sum((x - K)^2), K = the channel's first element.
template <typename T> struct StatsFinalize {
  const T* x;
  int64_t inner;
  double count, eps;
  const float *scale, *bias;
  float *meanOut, *varOut;
  BnAffine* affine;
  /// Set for a convolution's channel sums (Conv stats=1, launchChannelSums): the plain sums of x
  /// and x^2 go there, and nothing else is written.
  float *rawSum = nullptr, *rawSumSq = nullptr;
  __device__ __forceinline__ void operator()(int64_t c, const double (&sum)[2]) const {
    double k = double(toFloat(x[c * inner]));
    if (rawSum) { // sum(x) = s0 + n k, sum(x^2) = s1 + 2 k s0 + n k^2
      rawSum[c] = float(sum[0] + count * k);
      rawSumSq[c] = float(sum[1] + 2 * k * sum[0] + count * k * k);
      return;
    }
    double mean = k + sum[0] / count;
    double var = (sum[1] - sum[0] * sum[0] / count) / count;
    if (var < 0) var = 0;
    affine[c] = bnAffine(scale[c], bias[c], mean, var, eps);
    meanOut[c] = float(mean);
    varOut[c] = float(var);
  }
};

/// Gradient: sum[0] = sum(dy), sum[1] = sum(dy * (x - mean)), dy as BwdSums reads it.
struct BwdFinalize {
  double count, eps;
  const float *scale, *mean, *var;
  bool batchStats;
  float *dscale, *dbias;
  BwdCoefficients* coef;
  __device__ __forceinline__ void operator()(int64_t c, const double (&sum)[2]) const {
    double invstd = 1.0 / sqrt(double(var[c]) + eps);
    double sumDyXhat = sum[1] * invstd;
    dbias[c] = float(sum[0]);
    dscale[c] = float(sumDyXhat);
    double k = double(scale[c]) * invstd;
    coef[c] = batchStats ? BwdCoefficients{float(k), float(sum[0] / count),
                                           float(k * invstd * sumDyXhat / count), mean[c]}
                         : BwdCoefficients{float(k), 0.f, 0.f, 0.f};
  }
};

// ---- Channels-last passes (NhwcNormOps.cu) -------------------------------------------------

/// The [M, C, 1] view of an NHWC shape [N, H, W, C] (M = N * H * W): what the finalize kernels
/// read, count() = M and channel c's first element at x[c].
ChannelShape nhwcChannels(const Shape& s);

/// The per-channel sums of an NHWC pass: `parts` blocks down the rows (times the column tiles),
/// `chunk` rows each.
struct NhwcSplit {
  NhwcTiling t;
  int width = 1;
  int parts = 1;
  uint32_t chunk = 0;
  /// Scratch for the sums: [parts][C][2] partials.
  size_t bytes() const { return size_t(t.channels) * 2 * sizeof(double) * size_t(parts); }
};

/// Plans the NHWC sums pass of functor F (StatsSums<T> or BwdSums<T>) over elements of T with
/// accesses of `width` channels.
template <typename T, typename F>
Status planNhwcSums(const CudaArgs& a, const ChannelShape& s, int width, NhwcSplit& sp);

/// Runs the planned sums into `partials` (sp.bytes()), then adds the parts of each channel in a
/// fixed order and hands the two totals to `fin` (F::Finalize): two launches in all.
template <typename T, typename F>
Status launchNhwcSums(const CudaArgs& a, const NhwcSplit& sp, const F& f,
                      const typename F::Finalize& fin, double* partials);

/// The NHWC elementwise pass of functor F (AffineApply<T> or BwdApply<T>) with vectors of
/// `width` channels (vectorWidth over C).
template <typename T, typename F>
Status launchNhwcMap(CudaArgs& a, const ChannelShape& s, int width, const F& f);

} // namespace hgp::cuda::norm
