// CUDA executors for BatchNorm (inference, training, gradient, running statistics)
// (NormOps.cpp on the CPU).
//
// BatchNormTrain makes three passes: per-channel partial sums over chunks of each channel
// (DeviceUtil.cuh's channelPartialsKernel, which ReduceSum and ReduceMean share: sum(x - K) and
// sum((x - K)^2), shifted by the channel's first element K so that a large mean does not cancel
// the variance away), a per-channel finalize that adds the
// parts in a fixed order in double and writes the mean, the biased variance and the affine
// coefficients, and an apply pass y = ((x - hi[c]) - lo[c]) * alpha[c] + bias[c] (the mean split
// into two floats, so a large mean costs no precision) rounded exactly as the CPU rounds it.
// BatchNormBwd is the same shape: sums of dy and dy * (x - mean), a finalize that writes dscale,
// dbias and the coefficients of dx, and an apply pass. Scratch (partials, coefficients) is the
// step's own (stepScratch). Mixed precision: X, Y, dY, dX, the residual and Z may be bf16
// or f16 (read as float, rounded once on store); scale, bias and every statistic stay f32, as in
// cuDNN's and PyTorch's mixed-precision BatchNorm.
//
// Fused forms (fuse-batch-norm, docs/fusion.md): activation="relu" applies relu in the apply
// pass; a residual S is added to the BN result rounded to Y's type first (as the unfused
// BatchNormTrain stored it, then Add added it), then relu; BatchNormBwd with activation="relu"
// reads dY through the mask Z > 0 in both passes (ReluBwd on the fly), or, with a fourth result
// G, writes the masked dY in its sums pass and reads it back in its dX pass; with dy_parts=2 it
// reads dY's two parts (a folded Sum) wherever it read dY and adds them as the Sum would have
// (in float, rounded once to T), so the dX pass that reads G needs neither part.
//
// Throughput. These kernels are memory-bound: on an H200 one SM must consume about 18 bytes per
// cycle (9 bf16 elements) to keep up with HBM, which leaves a handful of instructions per element.
// So: every pass moves 16 bytes per load and store where the plane size allows it (4 f32 or 8
// 16-bit elements; 8 bytes for 16-bit planes that are a multiple of 4 only, as 14x14; one element
// for odd planes, as 7x7); element indices are split into (image, channel, position) with a multiply-
// high division by the fixed plane size and channel count (FastDiv), never a 64-bit division;
// each thread accumulates its sums in float over at most kFlush vectors (32 f32 or 64 16-bit
// values, a bounded rounding error next to the double reference) and adds that run into double
// accumulators, which the block combines in a fixed tree, and the finalize in part order; the
// apply passes compute in float. Every sum has a fixed order for a given device (the launch shape
// depends only on the shape and the SM count), so results are bit-identical run to run.
//
// BatchNormTrain with given_stats=1 (fuse-conv-bn) has no sums pass: a per-channel kernel turns
// the convolution's plain sums into the statistics and coefficients, then the apply pass runs.
// The same sums pass, finalized into plain sums (StatsFinalize's raw mode), is what a Conv with
// stats=1 runs after the convolution where no cuDNN engine emits them (launchChannelSums).
//
// Channels-last (layout="nhwc"): the same ops and finalizers, with the sums and apply passes of
// NhwcNormOps.cu (which finalize in the launch that adds the parts); NormKernels.cuh holds the
// per-element functors and the finalizers both layouts share.
#include "runtime/cuda/NormKernels.cuh"
#include "runtime/plan/BatchNormOperands.h"

#include <numeric>
#include <type_traits>

namespace hgp::cuda {

namespace {

using namespace norm;

Status checkChannelOperands(const CudaArgs& a, size_t x, size_t first, size_t count, bool nhwc) {
  HGP_TRY(checkFloat(a, a.in[x], "X"));
  if (nhwc && (a.in[x].rank() != 4 || a.in[x].numel() == 0))
    return a.fail("layout=nhwc needs a non-empty rank-4 X [N, H, W, C], got " +
                  shapeToString(*a.in[x].shape));
  if (a.in[x].rank() < 2) return a.fail("X must have at least 2 dims (N, C)");
  int64_t c = a.in[x].dim(nhwc ? 3 : 1);
  for (size_t i = first; i < first + count; ++i) {
    HGP_TRY(checkF32(a, a.in[i], "per-channel operand"));
    HGP_TRY(checkShape(a, a.in[i], {c}, "per-channel operand"));
  }
  return Status::ok();
}

/// Reads activation= (none, relu, silu or hardswish).
Status activationOf(const CudaArgs& a, BnActivation& act) {
  if (Status st = bnActivation(a.attrs(), act); !st) return a.fail(st.message());
  return Status::ok();
}

/// Whether `act` runs the kernels compiled for silu and hardswish (NormKernels.cuh, fusedGrad).
bool smooth(BnActivation act) {
  return act == BnActivation::Silu || act == BnActivation::HardSwish;
}

// ---- Passes over [N, C, inner] -------------------------------------------------------------

/// Elementwise pass: f.one(c, i) per element (V = 1), or f.vec<V>(c, i) per aligned vector of
/// V elements (inner % V == 0, so a vector never straddles channels). i / inner and then
/// % channels come from FastDiv.
template <int V, typename F>
__global__ void channelMapKernel(uint32_t n, FastDiv inner, FastDiv channels, F f) {
  HGP_GRID_LOOP(q, n) {
    uint32_t e = uint32_t(q) * V, plane = inner.div(e);
    uint32_t c = plane - channels.div(plane) * channels.d;
    if constexpr (V == 1) f.one(c, int64_t(e));
    else f.template vec<V>(c, int64_t(e));
  }
}

template <int V, typename F> Status launchChannelMapAs(CudaArgs& a, const ChannelShape& s, const F& f) {
  uint32_t n = uint32_t(s.outer * s.channels * s.inner) / V;
  channelMapKernel<V><<<blocksFor(a, n), kBlock, 0, a.stream>>>(
      n, FastDiv(uint32_t(s.inner)), FastDiv(uint32_t(s.channels)), f);
  return checkLaunch(a, "channelMapKernel");
}

/// The pass with vectors of `width` elements (vectorWidth).
template <typename T, typename F>
Status launchChannelMap(CudaArgs& a, const ChannelShape& s, int width, const F& f) {
  if (!fitsIn32(s)) return a.fail("more than 2^31 elements");
  if (width == kVec<T>) return launchChannelMapAs<kVec<T>>(a, s, f);
  if (width == 4) return launchChannelMapAs<4>(a, s, f);
  return launchChannelMapAs<1>(a, s, f);
}

/// The NCHW sums pass: channelPartialsKernel (DeviceUtil.cuh) with two sums a channel, each
/// thread adding runs of kFlush accesses in float into double.
template <typename T, typename F>
Status launchBnPartials(const CudaArgs& a, const ChannelShape& s, const ChannelSplit& sp,
                        const F& f, double* partials) {
  if (!fitsIn32(s)) return a.fail("more than 2^31 elements");
  return launchChannelPartials<2, float, kFlush, T>(a, s, sp, f, partials);
}

// ---- Finalize ------------------------------------------------------------------------------

/// The NCHW sums' end: each channel's parts added in part order, then `fin` (NormKernels.cuh).
template <typename Fin>
__global__ void finalizeKernel(int64_t channels, int parts, const double* partials, Fin fin) {
  HGP_GRID_LOOP(c, channels) {
    double sum[2];
    sumParts<2>(partials, parts, c, sum);
    fin(c, sum);
  }
}

/// BatchNormTrain with given_stats=1: the statistics from the convolution's plain sums, in
/// double, as the CPU computes them (mean = sum / n, biased var = max(sumsq / n - mean^2, 0)).
__global__ void givenStatsKernel(int64_t channels, const float* sum, const float* sumsq,
                                 double count, double eps, const float* scale, const float* bias,
                                 float* meanOut, float* varOut, BnAffine* affine) {
  HGP_GRID_LOOP(c, channels) {
    double mean = double(sum[c]) / count;
    double var = double(sumsq[c]) / count - mean * mean;
    if (var < 0) var = 0;
    affine[c] = bnAffine(scale[c], bias[c], mean, var, eps);
    meanOut[c] = float(mean);
    varOut[c] = float(var);
  }
}

__global__ void inferenceCoefficientsKernel(int64_t channels, const float* scale, const float* bias,
                                            const float* mean, const float* var, double eps,
                                            BnAffine* affine) {
  HGP_GRID_LOOP(c, channels) affine[c] = bnAffine(scale[c], bias[c], mean[c], var[c], eps);
}

// ---- Running statistics ------------------------------------------------------------------

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

} // namespace

namespace {

/// The [outer, channels, inner] view of X in its layout.
ChannelShape channelsOf(const Shape& x, bool nhwc) {
  return nhwc ? nhwcChannels(x) : channelShapeOf(x);
}

/// The elementwise pass in X's layout, with the widest access that every pointer allows.
/// Channels-last, X may be pitched (f.xPitch elements per pixel): the vectors must fit the pitch.
template <typename T, typename F>
Status launchApply(CudaArgs& a, const ChannelShape& s, bool nhwc,
                   std::initializer_list<const void*> ps, const F& f) {
  if (nhwc)
    return launchNhwcMap<T>(a, s, std::min(KernelShape<F>::kMaxWidth,
                                           vectorWidth<T>(std::gcd(s.channels, int64_t(f.xPitch)), ps)),
                            f);
  return launchChannelMap<T>(a, s, vectorWidth<T>(s.inner, ps), f);
}

/// The sums pass in X's layout and its finalizer (F::Finalize): in NCHW the partials kernel and
/// finalizeKernel, in NHWC the partials kernel and the kernel that adds the parts and finalizes.
struct SumsPlan {
  bool nhwc = false;
  ChannelSplit nchw;
  NhwcSplit nhwcSplit;
  size_t bytes(const ChannelShape& s) const {
    return nhwc ? nhwcSplit.bytes() : size_t(s.channels * nchw.parts * 2) * sizeof(double);
  }
};

template <typename T, typename F>
Status planSums(const CudaArgs& a, const ChannelShape& s, bool nhwc,
                std::initializer_list<const void*> ps, SumsPlan& p, int64_t xPitch) {
  p.nhwc = nhwc;
  if (nhwc)
    return planNhwcSums<T, F>(
        a, s, std::min(KernelShape<F>::kMaxWidth, vectorWidth<T>(std::gcd(s.channels, xPitch), ps)),
        p.nhwcSplit);
  p.nchw = planChannelSplit(a, s, vectorWidth<T>(s.inner, ps));
  return Status::ok();
}

template <typename T, typename F>
Status launchSums(const CudaArgs& a, const ChannelShape& s, const SumsPlan& p, const F& f,
                  const typename F::Finalize& fin, double* partials) {
  if (p.nhwc) return launchNhwcSums<T>(a, p.nhwcSplit, f, fin, partials);
  HGP_TRY(launchBnPartials<T>(a, s, p.nchw, f, partials));
  finalizeKernel<<<blocksFor(a, s.channels), kBlock, 0, a.stream>>>(s.channels, p.nchw.parts,
                                                                    partials, fin);
  return checkLaunch(a, "finalizeKernel");
}

/// X's pixel pitch for the channels-last passes: its channel count, or a larger tensor's when X is
/// a pitched view (OpList.def's HGP_PITCHED: only channels-last X). The NCHW passes ignore it.
Status pitchOf(const CudaArgs& a, const DeviceTensor& x, const ChannelShape& s, bool nhwc,
               uint32_t& pitch) {
  pitch = uint32_t(s.channels);
  if (!x.pitched()) return Status::ok();
  if (!nhwc || x.row != s.channels)
    return a.fail("a pitched X must be a channel range of a channels-last tensor");
  if (s.outer * x.pitch >= (int64_t(1) << 31))
    return a.fail("a pitched X spans 2^31 elements or more");
  pitch = uint32_t(x.pitch);
  return Status::ok();
}

/// The forward's elementwise pass, Y = act(BN(X) (+ residual)), with the kernels for `act`.
template <typename T>
Status launchAffine(CudaArgs& a, const ChannelShape& s, bool nhwc, const T* x,
                    const BnAffine* affine, const T* residual, BnActivation act, T* y,
                    uint32_t xPitch) {
  if (smooth(act))
    return launchApply<T>(a, s, nhwc, {x, y, residual},
                          AffineApply<T, true>{x, affine, residual, act, y, xPitch});
  return launchApply<T>(a, s, nhwc, {x, y, residual},
                        AffineApply<T, false>{x, affine, residual, act, y, xPitch});
}

template <typename T> Status batchNorm(CudaArgs& a, bool nhwc) {
  HGP_TRY(checkDType(a, a.out[0], a.in[0].dtype, "Y"));
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "Y"));
  BnActivation act = BnActivation::None;
  HGP_TRY(activationOf(a, act));
  ChannelShape s = channelsOf(*a.in[0].shape, nhwc);
  BnAffine* affine;
  HGP_TRY(stepScratch(a, size_t(s.channels) * sizeof(BnAffine), affine));
  double eps = a.attrs().getFloat("epsilon", 1e-5);
  inferenceCoefficientsKernel<<<blocksFor(a, s.channels), kBlock, 0, a.stream>>>(
      s.channels, a.in[1].f32(), a.in[2].f32(), a.in[3].f32(), a.in[4].f32(), eps, affine);
  HGP_TRY(checkLaunch(a, "inferenceCoefficientsKernel"));
  uint32_t xPitch = 0;
  HGP_TRY(pitchOf(a, a.in[0], s, nhwc, xPitch));
  return launchAffine<T>(a, s, nhwc, a.in[0].as<T>(), affine, nullptr, act, a.out[0].as<T>(),
                         xPitch);
}

template <typename T> Status batchNormTrain(CudaArgs& a, bool nhwc) {
  HGP_TRY(checkDType(a, a.out[0], a.in[0].dtype, "Y"));
  HGP_TRY(checkF32(a, a.out[1], "batch_mean"));
  HGP_TRY(checkF32(a, a.out[2], "batch_var"));
  ChannelShape s = channelsOf(*a.in[0].shape, nhwc);
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "Y"));
  HGP_TRY(checkShape(a, a.out[1], {s.channels}, "batch_mean"));
  HGP_TRY(checkShape(a, a.out[2], {s.channels}, "batch_var"));
  BnActivation act = BnActivation::None;
  HGP_TRY(activationOf(a, act));
  auto ops = bnTrainOperands(a.attrs(), a.in.size());
  if (!ops) return a.fail(ops.status().message());
  const T* residual = nullptr;
  if (ops->residual >= 0) {
    const DeviceTensor& r = a.in[size_t(ops->residual)];
    HGP_TRY(checkDType(a, r, a.in[0].dtype, "residual"));
    HGP_TRY(checkShape(a, r, *a.in[0].shape, "residual"));
    if (r.data == a.out[0].data) return a.fail("the residual must not share Y's storage");
    residual = r.as<T>();
  }
  const T* x = a.in[0].as<T>();
  uint32_t xPitch = 0;
  HGP_TRY(pitchOf(a, a.in[0], s, nhwc, xPitch));
  double eps = a.attrs().getFloat("epsilon", 1e-5);
  if (ops->givenStats()) { // the convolution's sums (fuse-conv-bn): no statistics pass
    BnAffine* affine;
    HGP_TRY(stepScratch(a, size_t(s.channels) * sizeof(BnAffine), affine));
    givenStatsKernel<<<blocksFor(a, s.channels), kBlock, 0, a.stream>>>(
        s.channels, a.in[size_t(ops->sum)].f32(), a.in[size_t(ops->sum) + 1].f32(),
        double(s.count()), eps, a.in[1].f32(), a.in[2].f32(), a.out[1].f32(), a.out[2].f32(),
        affine);
    HGP_TRY(checkLaunch(a, "givenStatsKernel"));
    return launchAffine<T>(a, s, nhwc, x, affine, residual, act, a.out[0].as<T>(), xPitch);
  }
  SumsPlan sp;
  HGP_TRY((planSums<T, StatsSums<T>>(a, s, nhwc, {x}, sp, xPitch)));
  size_t partialBytes = sp.bytes(s);
  double* partials;
  HGP_TRY(stepScratch(a, partialBytes + size_t(s.channels) * sizeof(BnAffine), partials));
  auto* affine = reinterpret_cast<BnAffine*>(reinterpret_cast<char*>(partials) + partialBytes);
  StatsFinalize<T> fin{x, s.inner, double(s.count()), eps,
                       a.in[1].f32(), a.in[2].f32(), a.out[1].f32(), a.out[2].f32(), affine};
  HGP_TRY(launchSums<T>(a, s, sp, StatsSums<T>{x, s.inner, xPitch}, fin, partials));
  return launchAffine<T>(a, s, nhwc, x, affine, residual, act, a.out[0].as<T>(), xPitch);
}

template <typename T> Status batchNormBwd(CudaArgs& a, bool nhwc) {
  HGP_TRY(checkDType(a, a.in[0], a.in[1].dtype, "dY"));
  HGP_TRY(checkDType(a, a.out[0], a.in[1].dtype, "dX"));
  HGP_TRY(checkF32(a, a.out[1], "dscale"));
  HGP_TRY(checkF32(a, a.out[2], "dbias"));
  HGP_TRY(checkShape(a, a.in[0], *a.in[1].shape, "dY"));
  ChannelShape s = channelsOf(*a.in[1].shape, nhwc);
  HGP_TRY(checkShape(a, a.out[0], *a.in[1].shape, "dX"));
  HGP_TRY(checkShape(a, a.out[1], {s.channels}, "dscale"));
  HGP_TRY(checkShape(a, a.out[2], {s.channels}, "dbias"));
  auto ops = bnBwdOperands(a.attrs(), a.in.size());
  if (!ops) return a.fail(ops.status().message());
  FusedActivation<T> fa;
  fa.act = ops->act;
  const T* z = nullptr;
  if (ops->relu()) {
    const DeviceTensor& zt = a.in[size_t(ops->z)];
    HGP_TRY(checkDType(a, zt, a.in[1].dtype, "Z"));
    HGP_TRY(checkShape(a, zt, *a.in[1].shape, "Z"));
    z = fa.z = zt.as<T>();
  }
  if (ops->recomputes()) HGP_TRY(checkChannelOperands(a, 1, size_t(ops->bias), 1, nhwc));
  // A folded Sum (dy_parts=2): both parts are read wherever dY was.
  const T* dy2 = nullptr;
  if (ops->split()) {
    const DeviceTensor& d2 = a.in[size_t(ops->dy2)];
    HGP_TRY(checkDType(a, d2, a.in[1].dtype, "dY2"));
    HGP_TRY(checkShape(a, d2, *a.in[1].shape, "dY2"));
    dy2 = d2.as<T>();
  }
  // dY through the activation's gradient as a result of its own (G): written by the sums pass,
  // read by the dX pass, which then runs the plain kernel (the Relu mask or the Silu/HardSwish
  // recompute is done once).
  T* gOut = nullptr;
  if (a.out.size() == 4) {
    if (!ops->fused()) return a.fail("the result G needs an activation");
    HGP_TRY(checkDType(a, a.out[3], a.in[1].dtype, "G"));
    HGP_TRY(checkShape(a, a.out[3], *a.in[1].shape, "G"));
    for (const void* p : std::initializer_list<const void*>{a.in[0].data, a.in[1].data, z, dy2,
                                                            a.out[0].data})
      if (p == a.out[3].data) return a.fail("G must not share storage with another operand");
    gOut = a.out[3].as<T>();
  }
  const T *dy = a.in[0].as<T>(), *x = a.in[1].as<T>();
  bool batchStats = a.attrs().getInt("batch_stats", 1) != 0;
  uint32_t xPitch = 0;
  HGP_TRY(pitchOf(a, a.in[1], s, nhwc, xPitch));
  // The two passes with the kernels compiled for the activation (smooth: silu, hardswish).
  auto passes = [&](auto smoothKernels) -> Status {
    constexpr bool S = decltype(smoothKernels)::value;
    SumsPlan sp;
    HGP_TRY((planSums<T, BwdSums<T, S>>(a, s, nhwc, {dy, dy2, x, z, gOut}, sp, xPitch)));
    size_t partialBytes = sp.bytes(s);
    double* partials;
    size_t coefBytes = size_t(s.channels) * sizeof(BwdCoefficients);
    size_t preBytes = ops->recomputes() ? size_t(s.channels) * sizeof(BnAffine) : 0;
    HGP_TRY(stepScratch(a, partialBytes + coefBytes + preBytes, partials));
    auto* coef =
        reinterpret_cast<BwdCoefficients*>(reinterpret_cast<char*>(partials) + partialBytes);
    if (ops->recomputes()) { // the forward's coefficients, from the saved statistics
      auto* pre = reinterpret_cast<BnAffine*>(reinterpret_cast<char*>(coef) + coefBytes);
      inferenceCoefficientsKernel<<<blocksFor(a, s.channels), kBlock, 0, a.stream>>>(
          s.channels, a.in[2].f32(), a.in[size_t(ops->bias)].f32(), a.in[3].f32(), a.in[4].f32(),
          a.attrs().getFloat("epsilon", 1e-5), pre);
      HGP_TRY(checkLaunch(a, "inferenceCoefficientsKernel"));
      fa.pre = pre;
    }
    BwdFinalize fin{double(s.count()), a.attrs().getFloat("epsilon", 1e-5), a.in[2].f32(),
                    a.in[3].f32(), a.in[4].f32(), batchStats, a.out[1].f32(), a.out[2].f32(), coef};
    HGP_TRY(launchSums<T>(a, s, sp, BwdSums<T, S>{dy, dy2, x, fa, gOut, a.in[3].f32(), xPitch}, fin,
                          partials));
    if (gOut) // dX from G, which holds dY summed and through the activation's gradient
      return launchApply<T>(a, s, nhwc, {gOut, x, a.out[0].data},
                            BwdApply<T, false>{gOut, nullptr, x, {}, coef, a.out[0].as<T>(),
                                               batchStats, xPitch});
    return launchApply<T>(a, s, nhwc, {dy, dy2, x, z, a.out[0].data},
                          BwdApply<T, S>{dy, dy2, x, fa, coef, a.out[0].as<T>(), batchStats,
                                         xPitch});
  };
  return smooth(ops->act) ? passes(std::true_type{}) : passes(std::false_type{});
}

} // namespace

Status execBatchNorm(CudaArgs& a) {
  HGP_TRY(checkArity(a, 5, 5, 1, 1));
  bool nhwc = false;
  HGP_TRY(readLayout(a, nhwc));
  HGP_TRY(checkChannelOperands(a, 0, 1, 4, nhwc));
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) { return batchNorm<decltype(t)>(a, nhwc); });
}

Status execBatchNormTrain(CudaArgs& a) {
  HGP_TRY(checkArity(a, 3, 6, 3, 3));
  bool nhwc = false;
  HGP_TRY(readLayout(a, nhwc));
  HGP_TRY(checkChannelOperands(a, 0, 1, 2, nhwc));
  auto ops = bnTrainOperands(a.attrs(), a.in.size());
  if (!ops) return a.fail(ops.status().message());
  if (ops->givenStats()) HGP_TRY(checkChannelOperands(a, 0, size_t(ops->sum), 2, nhwc));
  return dispatchFloat(a, a.in[0].dtype,
                       [&](auto t) { return batchNormTrain<decltype(t)>(a, nhwc); });
}

Status execBatchNormBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 5, 7, 3, 4));
  bool nhwc = false;
  HGP_TRY(readLayout(a, nhwc));
  HGP_TRY(checkChannelOperands(a, 1, 2, 3, nhwc));
  return dispatchFloat(a, a.in[1].dtype,
                       [&](auto t) { return batchNormBwd<decltype(t)>(a, nhwc); });
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

} // namespace hgp::cuda

namespace hgp::cuda {

// ---- The channel sums of a convolution's result (Conv stats=1, ConvOps.cpp) ----------------

namespace {

template <typename T>
Status channelSumsAs(const CudaArgs& a, const DeviceTensor& y, bool nhwc, void* scratch,
                     size_t* bytes, float* sum, float* sumsq) {
  ChannelShape s = channelsOf(*y.shape, nhwc);
  const T* x = y.as<T>();
  uint32_t pitch = 0;
  HGP_TRY(pitchOf(a, y, s, nhwc, pitch));
  SumsPlan sp;
  HGP_TRY((planSums<T, StatsSums<T>>(a, s, nhwc, {x}, sp, pitch)));
  if (bytes) {
    *bytes = sp.bytes(s);
    return Status::ok();
  }
  StatsFinalize<T> fin{x, s.inner, double(s.count()), 0.0, nullptr, nullptr, nullptr, nullptr,
                       nullptr, sum, sumsq};
  return launchSums<T>(a, s, sp, StatsSums<T>{x, s.inner, pitch}, fin, static_cast<double*>(scratch));
}

} // namespace

Status channelSumsScratch(const CudaArgs& a, const DeviceTensor& y, bool nhwc, size_t& bytes) {
  return dispatchFloat(a, y.dtype, [&](auto t) {
    return channelSumsAs<decltype(t)>(a, y, nhwc, nullptr, &bytes, nullptr, nullptr);
  });
}

Status launchChannelSums(const CudaArgs& a, const DeviceTensor& y, bool nhwc, void* scratch,
                         float* sum, float* sumsq) {
  return dispatchFloat(a, y.dtype, [&](auto t) {
    return channelSumsAs<decltype(t)>(a, y, nhwc, scratch, nullptr, sum, sumsq);
  });
}

} // namespace hgp::cuda
