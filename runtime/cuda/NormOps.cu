// CUDA executors for BatchNorm (inference, training, gradient, running statistics)
// (NormOps.cpp on the CPU).
//
// BatchNormTrain makes three passes: per-channel partial sums over chunks of each channel
// (bnPartialsKernel: sum(x - K) and sum((x - K)^2), shifted by the channel's first element K so
// that a large mean does not cancel the variance away), a per-channel finalize that adds the
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
// G, writes the masked dY in its sums pass and reads it back in its dX pass.
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
// Channels-last (layout="nhwc", DeviceUtil.cuh): X and every rank-4 operand are [N, H, W, C],
// an [M, C] matrix with M = N * H * W, viewed as ChannelShape [M, C, 1] (the finalize kernels
// read it unchanged: channel c's first element, the shift K, is x[c]). A channel's elements are
// strided there, so these passes run threads along C instead (NhwcTiling): a thread owns V
// consecutive channels (a 16-byte vector when C allows, 8 bytes for 16-bit data when C is a
// multiple of 4 only, one channel for odd C) and walks down the rows, so a warp reads contiguous
// memory and every element of a vector has its own channel. The apply pass (nhwcMapKernel)
// keeps its channels' coefficients in registers for all its rows and has two rows' loads in
// flight; it makes the same float operations per element as the NCHW pass. The sums pass
// (nhwcPartialsKernel) gives each block one part of the rows, about one wave of resident blocks
// in all but at least 128 bytes of X per channel in a part (so that the partials stay a small
// fraction of the traffic); a thread sums kFlush rows in float, adds them into double, the block
// adds its rows in a fixed tree and writes [part][C][2] partials, coalesced; combinePartsKernel
// then adds the parts in a fixed order into one [C][2] part for the finalize kernels. Sums run
// in another order than in NCHW, so the two layouts agree to rounding, not bit for bit.
#include "runtime/cuda/DeviceUtil.cuh"

#include <type_traits>

namespace hgp::cuda {

namespace {

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

/// Reads activation= ("none" or "relu").
Status reluOf(const CudaArgs& a, bool& relu) {
  std::string act = a.attrs().getString("activation", "none");
  if (act != "none" && act != "relu") return a.fail("unknown activation '" + act + "'");
  relu = act == "relu";
  return Status::ok();
}

/// Unsigned division of n < 2^31 by a fixed divisor d < 2^31 with a multiply-high (Granlund and
/// Montgomery's round-up method): t = umulhi(n, m), q = (t + ((n - t) >> 1)) >> (l - 1), with
/// l = ceil(log2 d) and m = floor(2^32 (2^l - d) / d) + 1.
struct FastDiv {
  uint32_t d = 1, m = 0, l = 0;
  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor) {
    while ((uint64_t(1) << l) < d) ++l;
    m = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << l) - d)) / d + 1);
  }
  __device__ __forceinline__ uint32_t div(uint32_t n) const {
    if (l == 0) return n;
    uint32_t t = __umulhi(n, m);
    return (t + ((n - t) >> 1)) >> (l - 1);
  }
};

/// Relu as the Relu op computes it (NaN passes through).
__device__ __forceinline__ float reluOf(float v) {
  return v > 0.f ? v : (isnan(v) ? v : 0.f);
}

// ---- Passes over [N, C, inner] -------------------------------------------------------------

/// Whether 32-bit element indices and the fast kernels apply (fewer than 2^31 elements).
bool fitsIn32(const ChannelShape& s) {
  return s.outer * s.channels * s.inner < (int64_t(1) << 31);
}

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

/// Vectors a thread sums in float before it adds the run into its double accumulators.
constexpr int kFlush = 8;

struct BnSplit {
  int parts = 1;
  uint32_t chunk = 0; ///< Elements per part (a multiple of the vector width).
  int width = 1;      ///< Elements per access (vectorWidth).
  FastDiv inner;
};

/// About two waves of 256-thread blocks in all (16 per SM), at least 4096 elements a part.
BnSplit planBnSplit(const CudaArgs& a, const ChannelShape& s, int width) {
  BnSplit sp;
  sp.width = width;
  const int64_t V = width;
  int64_t count = s.count();
  int64_t target = int64_t(smCount(a)) * 16;
  int64_t parts = (target + s.channels - 1) / s.channels;
  int64_t maxParts = (count + 4095) / 4096;
  parts = parts < 1 ? 1 : parts > maxParts ? maxParts : parts;
  if (parts < 1) parts = 1;
  int64_t chunk = (count + parts - 1) / parts;
  chunk = (chunk + V - 1) / V * V;
  sp.parts = int((count + chunk - 1) / chunk);
  sp.chunk = uint32_t(chunk);
  sp.inner = FastDiv(uint32_t(s.inner));
  return sp;
}

/// Block (p, c) sums chunk p of channel c (its elements in channel order, image by image) into
/// two doubles: partials[(c * parts + p) * 2 + k]. F::Channel ch = f.channel(c) adds one element
/// with ch.one(acc, offset) and a vector with ch.vec(acc, offset) into float accumulators.
template <int V, typename F>
__global__ void bnPartialsKernel(ChannelShape s, BnSplit sp, F f, double* partials) {
  __shared__ double scratch[32];
  int64_t c = blockIdx.y;
  int p = int(blockIdx.x);
  auto ch = f.channel(c);
  double acc[2] = {0.0, 0.0};
  uint32_t count = uint32_t(s.count());
  uint32_t begin = uint32_t(p) * sp.chunk;
  uint32_t end = uint32_t(min(int64_t(count), int64_t(p + 1) * sp.chunk));
  int64_t planeStride = s.channels * s.inner, base = c * s.inner;
  uint32_t inner = uint32_t(s.inner), step = V * blockDim.x;
  for (uint32_t e0 = begin + V * threadIdx.x; e0 < end; e0 += kFlush * step) {
    float run[2] = {0.f, 0.f};
#pragma unroll
    for (int k = 0; k < kFlush; ++k) {
      uint32_t e = e0 + k * step;
      if (e >= end) break;
      uint32_t i = sp.inner.div(e), j = e - i * inner;
      int64_t off = base + int64_t(i) * planeStride + j;
      if constexpr (V == 1) ch.one(run, off);
      else ch.template vec<V>(run, off);
    }
    acc[0] += double(run[0]);
    acc[1] += double(run[1]);
  }
  for (int k = 0; k < 2; ++k) {
    double v = blockSum(acc[k], scratch);
    if (threadIdx.x == 0) partials[(c * sp.parts + p) * 2 + k] = v;
  }
}

template <typename T, typename F>
Status launchBnPartials(const CudaArgs& a, const ChannelShape& s, const BnSplit& sp, const F& f,
                        double* partials) {
  if (!fitsIn32(s)) return a.fail("more than 2^31 elements");
  if (s.channels > 65535) return a.fail("more than 65535 channels");
  dim3 grid(unsigned(sp.parts), unsigned(s.channels));
  if (sp.width == kVec<T>) bnPartialsKernel<kVec<T>><<<grid, kBlock, 0, a.stream>>>(s, sp, f, partials);
  else if (sp.width == 4) bnPartialsKernel<4><<<grid, kBlock, 0, a.stream>>>(s, sp, f, partials);
  else bnPartialsKernel<1><<<grid, kBlock, 0, a.stream>>>(s, sp, f, partials);
  return checkLaunch(a, "bnPartialsKernel");
}

// ---- Passes over channels-last [M, C] --------------------------------------------------------

/// The [M, C, 1] view of an NHWC shape [N, H, W, C] (M = N * H * W): what the finalize kernels
/// read, count() = M and channel c's first element at x[c].
ChannelShape nhwcChannels(const Shape& s) {
  ChannelShape c;
  c.outer = s[0] * s[1] * s[2];
  c.channels = s[3];
  c.inner = 1;
  return c;
}

/// Elementwise pass over NHWC rows (NhwcTiling): a thread takes channels V*j .. V*j + V - 1,
/// fetches their coefficients once (f.columns<V>), then walks down the rows, four at a time so
/// that all four loads are in flight before the first result is stored.
template <int V, typename F>
__global__ void __launch_bounds__(kBlock) nhwcMapKernel(NhwcTiling t, F f) {
  uint32_t j = blockIdx.y * t.cols + threadIdx.x % t.cols;
  if (j >= t.vecs) return;
  auto k = f.template columns<V>(j * V);
  using Loaded = typename decltype(k)::Loaded;
  uint32_t step = gridDim.x * t.rowsPerBlock;
  uint32_t r = blockIdx.x * t.rowsPerBlock + threadIdx.x / t.cols;
  // Four rows at a time while they are all in range, so that four loads are in flight.
  for (; r + 3 * step < t.rows; r += 4 * step) {
    uint32_t i = r * t.channels + j * V, d = step * t.channels;
    Loaded l0, l1, l2, l3;
    k.load(i, l0);
    k.load(i + d, l1);
    k.load(i + 2 * d, l2);
    k.load(i + 3 * d, l3);
    k.store(i, l0);
    k.store(i + d, l1);
    k.store(i + 2 * d, l2);
    k.store(i + 3 * d, l3);
  }
  for (; r < t.rows; r += step) {
    uint32_t i = r * t.channels + j * V;
    Loaded l0;
    k.load(i, l0);
    k.store(i, l0);
  }
}

/// The grid of an NHWC pass: the column tiles times one wave of resident blocks down the rows (or
/// a block per rowsPerBlock rows when there are fewer rows), so that a thread keeps its channels
/// for many rows.
template <typename K>
Status nhwcGrid(const CudaArgs& a, K kernel, const NhwcTiling& t, dim3& grid) {
  if (t.tiles > 65535) return a.fail("too many channels for one grid");
  int resident;
  HGP_TRY(residentBlocks(kernel, int(t.threads()), resident));
  int64_t rowBlocks = (int64_t(t.rows) + t.rowsPerBlock - 1) / t.rowsPerBlock;
  int64_t wave = std::max<int64_t>(1, int64_t(resident) * smCount(a) / t.tiles);
  grid = dim3(unsigned(std::min(rowBlocks, wave)), t.tiles);
  return Status::ok();
}

template <int V, typename F>
Status launchNhwcMapAs(CudaArgs& a, const ChannelShape& s, const F& f) {
  NhwcTiling t = nhwcTiling(s.outer, s.channels, V);
  dim3 grid;
  HGP_TRY(nhwcGrid(a, nhwcMapKernel<V, F>, t, grid));
  nhwcMapKernel<V><<<grid, t.threads(), 0, a.stream>>>(t, f);
  return checkLaunch(a, "nhwcMapKernel");
}

/// The NHWC pass with vectors of `width` channels (vectorWidth over C).
template <typename T, typename F>
Status launchNhwcMap(CudaArgs& a, const ChannelShape& s, int width, const F& f) {
  if (!fitsIn32(s)) return a.fail("more than 2^31 elements");
  if (width == kVec<T>) return launchNhwcMapAs<kVec<T>>(a, s, f);
  if (width == 4) return launchNhwcMapAs<4>(a, s, f);
  return launchNhwcMapAs<1>(a, s, f);
}

/// The per-channel sums of an NHWC pass: `parts` blocks down the rows (times the column tiles),
/// `chunk` rows each.
struct NhwcSplit {
  NhwcTiling t;
  int width = 1;
  int parts = 1;
  uint32_t chunk = 0;
  /// Scratch for the sums: [C][2] combined sums, then [parts][C][2] partials when parts > 1.
  size_t bytes() const {
    return size_t(t.channels) * 2 * sizeof(double) * (parts > 1 ? size_t(parts) + 1 : 1);
  }
};

/// Block (p, tile) sums rows [p * chunk, (p + 1) * chunk) of its channels: each thread its
/// channels V*j .. V*j + V - 1 (F::Columns k = f.columns<V>(V * j), k.add(run, offset)) over
/// every rowsPerBlock-th row, kFlush rows a float run, runs added into doubles; the block's rows
/// are then added in a fixed tree, and partials[(p * C + c) * 2 + k] receives sum k of channel c.
template <int V, typename F>
__global__ void __launch_bounds__(kBlock) nhwcPartialsKernel(NhwcTiling t, uint32_t chunk, F f,
                                                              double* partials) {
  __shared__ double tree[2][kBlock * V];
  uint32_t row = threadIdx.x / t.cols, j = blockIdx.y * t.cols + threadIdx.x % t.cols;
  double acc[2][V];
#pragma unroll
  for (int q = 0; q < V; ++q) acc[0][q] = acc[1][q] = 0.0;
  if (j < t.vecs) {
    auto k = f.template columns<V>(j * V);
    uint32_t begin = blockIdx.x * chunk, end = min(t.rows, begin + chunk);
    uint32_t step = t.rowsPerBlock;
    for (uint32_t r0 = begin + row; r0 < end; r0 += kFlush * step) {
      float run[2][V];
#pragma unroll
      for (int q = 0; q < V; ++q) run[0][q] = run[1][q] = 0.f;
      if (r0 + (kFlush - 1) * step < end) {
        // A whole run in range: no exit in the unrolled loop, so that all kFlush loads can be
        // issued before the first sum (the memory-level parallelism HBM needs); the order of
        // the additions is the same as below.
#pragma unroll
        for (int u = 0; u < kFlush; ++u) k.add(run, (r0 + u * step) * t.channels + j * V);
      } else {
#pragma unroll
        for (int u = 0; u < kFlush; ++u) {
          uint32_t r = r0 + u * step;
          if (r >= end) break;
          k.add(run, r * t.channels + j * V);
        }
      }
#pragma unroll
      for (int q = 0; q < V; ++q) {
        acc[0][q] += double(run[0][q]);
        acc[1][q] += double(run[1][q]);
      }
    }
  }
#pragma unroll
  for (int q = 0; q < V; ++q) {
    tree[0][threadIdx.x * V + q] = acc[0][q];
    tree[1][threadIdx.x * V + q] = acc[1][q];
  }
  __syncthreads();
  for (uint32_t h = t.rowHalf; h > 0; h >>= 1) {
    if (row < h && row + h < t.rowsPerBlock) {
      uint32_t other = (threadIdx.x + h * t.cols) * V;
#pragma unroll
      for (int q = 0; q < V; ++q) {
        tree[0][threadIdx.x * V + q] += tree[0][other + q];
        tree[1][threadIdx.x * V + q] += tree[1][other + q];
      }
    }
    __syncthreads();
  }
  if (row == 0 && j < t.vecs) {
    double* out = partials + (size_t(blockIdx.x) * t.channels + j * V) * 2;
#pragma unroll
    for (int q = 0; q < V; ++q) {
      out[2 * q] = tree[0][threadIdx.x * V + q];
      out[2 * q + 1] = tree[1][threadIdx.x * V + q];
    }
  }
}

/// Adds [parts][n] doubles over the parts into [n], in a fixed order: lane y of a 32 x 32 block
/// adds parts y, y + 32, ... in turn, then lane 0 adds the 32 lanes in order.
__global__ void combinePartsKernel(int parts, uint32_t n, const double* partials, double* out) {
  __shared__ double lanes[32][33];
  uint32_t v = blockIdx.x * 32 + threadIdx.x;
  double s = 0.0;
  if (v < n)
    for (int p = int(threadIdx.y); p < parts; p += 32) s += partials[size_t(p) * n + v];
  lanes[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && v < n) {
    double total = 0.0;
    for (int y = 0; y < 32; ++y) total += lanes[y][threadIdx.x];
    out[v] = total;
  }
}

template <int V, typename F>
Status planNhwcSumsAs(const CudaArgs& a, const ChannelShape& s, size_t elementBytes,
                      NhwcSplit& sp) {
  sp.t = nhwcTiling(s.outer, s.channels, V);
  sp.width = V;
  dim3 grid;
  HGP_TRY(nhwcGrid(a, nhwcPartialsKernel<V, F>, sp.t, grid));
  // At least 128 bytes of X per channel in a part, so that the partials (16 bytes per channel
  // and part) stay a small fraction of the traffic.
  int64_t minRows = std::max<int64_t>(sp.t.rowsPerBlock, int64_t(128 / elementBytes));
  int64_t parts = std::min<int64_t>(grid.x, (s.outer + minRows - 1) / minRows);
  parts = std::max<int64_t>(parts, 1);
  int64_t chunk = (s.outer + parts - 1) / parts;
  sp.parts = int((s.outer + chunk - 1) / chunk);
  sp.chunk = uint32_t(chunk);
  return Status::ok();
}

/// Plans the NHWC sums pass of functor F over elements of T with accesses of `width` channels.
template <typename T, typename F>
Status planNhwcSums(const CudaArgs& a, const ChannelShape& s, int width, NhwcSplit& sp) {
  if (!fitsIn32(s)) return a.fail("more than 2^31 elements");
  if (width == kVec<T>) return planNhwcSumsAs<kVec<T>, F>(a, s, sizeof(T), sp);
  if (width == 4) return planNhwcSumsAs<4, F>(a, s, sizeof(T), sp);
  return planNhwcSumsAs<1, F>(a, s, sizeof(T), sp);
}

template <int V, typename F>
void launchNhwcPartials(const CudaArgs& a, const NhwcSplit& sp, const F& f, double* out) {
  dim3 grid(unsigned(sp.parts), sp.t.tiles);
  nhwcPartialsKernel<V><<<grid, sp.t.threads(), 0, a.stream>>>(sp.t, sp.chunk, f, out);
}

/// Runs the planned sums into `sums` ([C][2]: the layout of a single part, which the finalize
/// kernels read with parts = 1); with more than one part, through the partials that follow it.
template <typename T, typename F>
Status launchNhwcSums(const CudaArgs& a, const NhwcSplit& sp, const F& f, double* sums) {
  double* partials = sp.parts > 1 ? sums + size_t(sp.t.channels) * 2 : sums;
  if (sp.width == kVec<T>) launchNhwcPartials<kVec<T>>(a, sp, f, partials);
  else if (sp.width == 4) launchNhwcPartials<4>(a, sp, f, partials);
  else launchNhwcPartials<1>(a, sp, f, partials);
  HGP_TRY(checkLaunch(a, "nhwcPartialsKernel"));
  if (sp.parts == 1) return Status::ok();
  uint32_t n = sp.t.channels * 2;
  combinePartsKernel<<<(n + 31) / 32, dim3(32, 32), 0, a.stream>>>(sp.parts, n, partials, sums);
  return checkLaunch(a, "combinePartsKernel");
}

// ---- Forward -------------------------------------------------------------------------------

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

/// The affine map with the CPU's roundings (no FMA); then the fused epilogue: + residual (after
/// rounding to T, as the unfused Y was stored), relu.
template <typename T> struct AffineApply {
  const T* x;
  const BnAffine* affine;
  const T* residual; ///< Null unless fused with a residual Add.
  bool relu;
  T* y;
  __device__ __forceinline__ float at(float v, const BnAffine& f, float r) const {
    float b = __fadd_rn(__fmul_rn(__fsub_rn(__fsub_rn(v, f.hi), f.lo), f.alpha), f.bias);
    if (residual) b = __fadd_rn(toFloat(fromFloat<T>(b)), r);
    return relu ? reluOf(b) : b;
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
  /// NHWC: channels c0 .. c0 + N - 1 with their coefficients in registers (nhwcMapKernel).
  template <int N> struct Columns {
    AffineApply f;
    BnAffine k[N];
    struct Loaded {
      PackN<T, N> x, r;
    };
    __device__ __forceinline__ void load(uint32_t i, Loaded& l) const {
      l.x = loadPack<N>(f.x + i);
      if (f.residual) l.r = loadPack<N>(f.residual + i);
    }
    __device__ __forceinline__ void store(uint32_t i, const Loaded& l) const {
      float v[N];
#pragma unroll
      for (int q = 0; q < N; ++q)
        v[q] = f.at(toFloat(l.x.e[q]), k[q], f.residual ? toFloat(l.r.e[q]) : 0.f);
      storeVec<N>(f.y + i, v);
    }
  };
  template <int N> __device__ Columns<N> columns(uint32_t c0) const {
    Columns<N> c{*this, {}};
#pragma unroll
    for (int q = 0; q < N; ++q) c.k[q] = affine[c0 + q];
    return c;
  }
};

/// Shifted sums: run[0] += x - K, run[1] += (x - K)^2, K = the channel's first element.
template <typename T> struct StatsSums {
  const T* x;
  int64_t inner;
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
  /// NHWC: channels c0 .. c0 + N - 1, whose first elements are row 0's (nhwcPartialsKernel).
  template <int N> struct Columns {
    const T* x;
    float k[N];
    __device__ __forceinline__ void add(float (&run)[2][N], uint32_t off) const {
      PackN<T, N> p = loadPack<N>(x + off);
#pragma unroll
      for (int q = 0; q < N; ++q) {
        float d = toFloat(p.e[q]) - k[q];
        run[0][q] += d;
        run[1][q] += d * d;
      }
    }
  };
  template <int N> __device__ Columns<N> columns(uint32_t c0) const {
    Columns<N> c{x, {}};
#pragma unroll
    for (int q = 0; q < N; ++q) c.k[q] = toFloat(x[c0 + q]);
    return c;
  }
};

template <typename T>
__global__ void statsFinalizeKernel(ChannelShape s, int parts, const double* partials,
                                    const T* x, const float* scale, const float* bias,
                                    double eps, float* meanOut, float* varOut, BnAffine* affine) {
  HGP_GRID_LOOP(c, s.channels) {
    double sum[2];
    sumParts<2>(partials, parts, c, sum);
    double n = double(s.count()), k = double(toFloat(x[c * s.inner]));
    double mean = k + sum[0] / n;
    double var = (sum[1] - sum[0] * sum[0] / n) / n;
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

// ---- Backward ------------------------------------------------------------------------------

/// dY as the BatchNorm sees it: through the fused Relu's mask (Z > 0) when z is set.
template <typename T> __device__ __forceinline__ float maskedGrad(float g, const T* z, int64_t i) {
  return z && !(toFloat(z[i]) > 0.f) ? 0.f : g;
}

/// run[0] += dy, run[1] += dy * (x - mean[c]), dy masked by Z > 0 when fused with ReluBwd; the
/// masked dy is also stored into gOut when set (exact: it is dy or zero).
template <typename T> struct BwdSums {
  const T *dy, *x, *z;
  T* gOut;
  const float* mean;
  struct Channel {
    const T *dy, *x, *z;
    T* gOut;
    float mu;
    __device__ __forceinline__ void one(float (&run)[2], int64_t off) const {
      float g = maskedGrad(toFloat(dy[off]), z, off);
      if (gOut) gOut[off] = fromFloat<T>(g);
      run[0] += g;
      run[1] += g * (toFloat(x[off]) - mu);
    }
    template <int N> __device__ __forceinline__ void vec(float (&run)[2], int64_t off) const {
      float g[N], v[N], m[N];
      loadVec<N>(dy + off, g);
      loadVec<N>(x + off, v);
      if (z) loadVec<N>(z + off, m);
#pragma unroll
      for (int q = 0; q < N; ++q) g[q] = z && !(m[q] > 0.f) ? 0.f : g[q];
      if (gOut) storeVec<N>(gOut + off, g);
#pragma unroll
      for (int q = 0; q < N; ++q) {
        run[0] += g[q];
        run[1] += g[q] * (v[q] - mu);
      }
    }
  };
  __device__ Channel channel(int64_t c) const { return {dy, x, z, gOut, mean[c]}; }
  /// NHWC: channels c0 .. c0 + N - 1 (nhwcPartialsKernel).
  template <int N> struct Columns {
    const T *dy, *x, *z;
    T* gOut;
    float mu[N];
    __device__ __forceinline__ void add(float (&run)[2][N], uint32_t off) const {
      PackN<T, N> g = loadPack<N>(dy + off), v = loadPack<N>(x + off), m;
      if (z) m = loadPack<N>(z + off);
      float gm[N];
#pragma unroll
      for (int q = 0; q < N; ++q) gm[q] = z && !(toFloat(m.e[q]) > 0.f) ? 0.f : toFloat(g.e[q]);
      if (gOut) storeVec<N>(gOut + off, gm);
#pragma unroll
      for (int q = 0; q < N; ++q) {
        run[0][q] += gm[q];
        run[1][q] += gm[q] * (toFloat(v.e[q]) - mu[q]);
      }
    }
  };
  template <int N> __device__ Columns<N> columns(uint32_t c0) const {
    Columns<N> c{dy, x, z, gOut, {}};
#pragma unroll
    for (int q = 0; q < N; ++q) c.mu[q] = mean[c0 + q];
    return c;
  }
};

/// Per channel: k = scale * invstd, the mean of dy, k * invstd * mean(dy * (x - mu)), mu.
struct BwdCoefficients {
  float k, meanDy, slope, mu;
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
    coef[c] = batchStats ? BwdCoefficients{float(k), float(sum[0] / m),
                                           float(k * invstd * sumDyXhat / m), mean[c]}
                         : BwdCoefficients{float(k), 0.f, 0.f, 0.f};
  }
}

/// dx = k * (dy - mean(dy)) - slope * (x - mu) in float; the frozen form has only k * dy. dy is
/// masked by Z > 0 when fused with ReluBwd.
template <typename T> struct BwdApply {
  const T *dy, *x, *z;
  const BwdCoefficients* coef;
  T* dx;
  bool batchStats;
  __device__ __forceinline__ float at(const BwdCoefficients& q, float g, float v) const {
    if (!batchStats) return g * q.k;
    return q.k * (g - q.meanDy) - q.slope * (v - q.mu);
  }
  __device__ void one(int64_t c, int64_t i) const {
    dx[i] = fromFloat<T>(at(coef[c], maskedGrad(toFloat(dy[i]), z, i), toFloat(x[i])));
  }
  template <int N> __device__ void vec(int64_t c, int64_t i) const {
    BwdCoefficients q = coef[c];
    float g[N], v[N], m[N];
    loadVec<N>(dy + i, g);
    loadVec<N>(x + i, v);
    if (z) loadVec<N>(z + i, m);
#pragma unroll
    for (int k = 0; k < N; ++k) g[k] = at(q, z && !(m[k] > 0.f) ? 0.f : g[k], v[k]);
    storeVec<N>(dx + i, g);
  }
  /// NHWC: channels c0 .. c0 + N - 1 with their coefficients in registers (nhwcMapKernel). The
  /// frozen form does not read X.
  template <int N> struct Columns {
    BwdApply f;
    BwdCoefficients k[N];
    struct Loaded {
      PackN<T, N> g, x, z;
    };
    __device__ __forceinline__ void load(uint32_t i, Loaded& l) const {
      l.g = loadPack<N>(f.dy + i);
      if (f.batchStats) l.x = loadPack<N>(f.x + i);
      if (f.z) l.z = loadPack<N>(f.z + i);
    }
    __device__ __forceinline__ void store(uint32_t i, const Loaded& l) const {
      float v[N];
#pragma unroll
      for (int q = 0; q < N; ++q) {
        float g = f.z && !(toFloat(l.z.e[q]) > 0.f) ? 0.f : toFloat(l.g.e[q]);
        v[q] = f.at(k[q], g, f.batchStats ? toFloat(l.x.e[q]) : 0.f);
      }
      storeVec<N>(f.dx + i, v);
    }
  };
  template <int N> __device__ Columns<N> columns(uint32_t c0) const {
    Columns<N> c{*this, {}};
#pragma unroll
    for (int q = 0; q < N; ++q) c.k[q] = coef[c0 + q];
    return c;
  }
};

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
template <typename T, typename F>
Status launchApply(CudaArgs& a, const ChannelShape& s, bool nhwc,
                   std::initializer_list<const void*> ps, const F& f) {
  if (nhwc) return launchNhwcMap<T>(a, s, vectorWidth<T>(s.channels, ps), f);
  return launchChannelMap<T>(a, s, vectorWidth<T>(s.inner, ps), f);
}

/// The sums pass in X's layout. Either way it leaves [C][parts][2] partials at the start of its
/// scratch for the finalize kernels, which add them in part order (the NHWC pass combines its own
/// parts first and leaves one).
struct SumsPlan {
  bool nhwc = false;
  BnSplit nchw;
  NhwcSplit nhwcSplit;
  size_t bytes(const ChannelShape& s) const {
    return nhwc ? nhwcSplit.bytes() : size_t(s.channels * nchw.parts * 2) * sizeof(double);
  }
  int finalizeParts() const { return nhwc ? 1 : nchw.parts; }
};

template <typename T, typename F>
Status planSums(const CudaArgs& a, const ChannelShape& s, bool nhwc,
                std::initializer_list<const void*> ps, SumsPlan& p) {
  p.nhwc = nhwc;
  if (nhwc) return planNhwcSums<T, F>(a, s, vectorWidth<T>(s.channels, ps), p.nhwcSplit);
  p.nchw = planBnSplit(a, s, vectorWidth<T>(s.inner, ps));
  return Status::ok();
}

template <typename T, typename F>
Status launchSums(const CudaArgs& a, const ChannelShape& s, const SumsPlan& p, const F& f,
                  double* partials) {
  if (p.nhwc) return launchNhwcSums<T>(a, p.nhwcSplit, f, partials);
  return launchBnPartials<T>(a, s, p.nchw, f, partials);
}

template <typename T> Status batchNorm(CudaArgs& a, bool nhwc) {
  HGP_TRY(checkDType(a, a.out[0], a.in[0].dtype, "Y"));
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "Y"));
  bool relu = false;
  HGP_TRY(reluOf(a, relu));
  ChannelShape s = channelsOf(*a.in[0].shape, nhwc);
  BnAffine* affine;
  HGP_TRY(stepScratch(a, size_t(s.channels) * sizeof(BnAffine), affine));
  double eps = a.attrs().getFloat("epsilon", 1e-5);
  inferenceCoefficientsKernel<<<blocksFor(a, s.channels), kBlock, 0, a.stream>>>(
      s.channels, a.in[1].f32(), a.in[2].f32(), a.in[3].f32(), a.in[4].f32(), eps, affine);
  HGP_TRY(checkLaunch(a, "inferenceCoefficientsKernel"));
  return launchApply<T>(
      a, s, nhwc, {a.in[0].data, a.out[0].data},
      AffineApply<T>{a.in[0].as<T>(), affine, nullptr, relu, a.out[0].as<T>()});
}

template <typename T> Status batchNormTrain(CudaArgs& a, bool nhwc) {
  HGP_TRY(checkDType(a, a.out[0], a.in[0].dtype, "Y"));
  HGP_TRY(checkF32(a, a.out[1], "batch_mean"));
  HGP_TRY(checkF32(a, a.out[2], "batch_var"));
  ChannelShape s = channelsOf(*a.in[0].shape, nhwc);
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "Y"));
  HGP_TRY(checkShape(a, a.out[1], {s.channels}, "batch_mean"));
  HGP_TRY(checkShape(a, a.out[2], {s.channels}, "batch_var"));
  bool relu = false;
  HGP_TRY(reluOf(a, relu));
  const T* residual = nullptr;
  if (a.in.size() == 4) {
    if (!relu) return a.fail("a residual input needs activation=relu");
    HGP_TRY(checkDType(a, a.in[3], a.in[0].dtype, "residual"));
    HGP_TRY(checkShape(a, a.in[3], *a.in[0].shape, "residual"));
    if (a.in[3].data == a.out[0].data) return a.fail("the residual must not share Y's storage");
    residual = a.in[3].as<T>();
  }
  const T* x = a.in[0].as<T>();
  SumsPlan sp;
  HGP_TRY((planSums<T, StatsSums<T>>(a, s, nhwc, {x}, sp)));
  size_t partialBytes = sp.bytes(s);
  double* partials;
  HGP_TRY(stepScratch(a, partialBytes + size_t(s.channels) * sizeof(BnAffine), partials));
  auto* affine = reinterpret_cast<BnAffine*>(reinterpret_cast<char*>(partials) + partialBytes);
  HGP_TRY(launchSums<T>(a, s, sp, StatsSums<T>{x, s.inner}, partials));
  statsFinalizeKernel<<<blocksFor(a, s.channels), kBlock, 0, a.stream>>>(
      s, sp.finalizeParts(), partials, x, a.in[1].f32(), a.in[2].f32(),
      a.attrs().getFloat("epsilon", 1e-5), a.out[1].f32(), a.out[2].f32(), affine);
  HGP_TRY(checkLaunch(a, "statsFinalizeKernel"));
  return launchApply<T>(a, s, nhwc, {x, a.out[0].data, residual},
                        AffineApply<T>{x, affine, residual, relu, a.out[0].as<T>()});
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
  bool relu = false;
  HGP_TRY(reluOf(a, relu));
  if (relu != (a.in.size() == 6)) return a.fail("activation=relu and the mask source Z come together");
  const T* z = nullptr;
  if (relu) {
    HGP_TRY(checkDType(a, a.in[5], a.in[1].dtype, "Z"));
    HGP_TRY(checkShape(a, a.in[5], *a.in[1].shape, "Z"));
    z = a.in[5].as<T>();
  }
  // The masked dY as a result of its own (G): written by the sums pass, read by the dX pass.
  T* gOut = nullptr;
  if (a.out.size() == 4) {
    if (!relu) return a.fail("the result G needs activation=relu");
    HGP_TRY(checkDType(a, a.out[3], a.in[1].dtype, "G"));
    HGP_TRY(checkShape(a, a.out[3], *a.in[1].shape, "G"));
    for (const void* p : {a.in[0].data, a.in[1].data, a.in[5].data, a.out[0].data})
      if (p == a.out[3].data) return a.fail("G must not share storage with another operand");
    gOut = a.out[3].as<T>();
  }
  const T *dy = a.in[0].as<T>(), *x = a.in[1].as<T>();
  bool batchStats = a.attrs().getInt("batch_stats", 1) != 0;
  SumsPlan sp;
  HGP_TRY((planSums<T, BwdSums<T>>(a, s, nhwc, {dy, x, z, gOut}, sp)));
  size_t partialBytes = sp.bytes(s);
  double* partials;
  HGP_TRY(stepScratch(a, partialBytes + size_t(s.channels) * sizeof(BwdCoefficients), partials));
  auto* coef = reinterpret_cast<BwdCoefficients*>(reinterpret_cast<char*>(partials) + partialBytes);
  HGP_TRY(launchSums<T>(a, s, sp, BwdSums<T>{dy, x, z, gOut, a.in[3].f32()}, partials));
  bwdFinalizeKernel<<<blocksFor(a, s.channels), kBlock, 0, a.stream>>>(
      s, sp.finalizeParts(), partials, a.in[2].f32(), a.in[3].f32(), a.in[4].f32(),
      a.attrs().getFloat("epsilon", 1e-5), batchStats, a.out[1].f32(), a.out[2].f32(), coef);
  HGP_TRY(checkLaunch(a, "bwdFinalizeKernel"));
  if (gOut) { // dX from G, which holds the masked dY
    dy = gOut;
    z = nullptr;
  }
  return launchApply<T>(a, s, nhwc, {dy, x, z, a.out[0].data},
                        BwdApply<T>{dy, x, z, coef, a.out[0].as<T>(), batchStats});
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
  HGP_TRY(checkArity(a, 3, 4, 3, 3));
  bool nhwc = false;
  HGP_TRY(readLayout(a, nhwc));
  HGP_TRY(checkChannelOperands(a, 0, 1, 2, nhwc));
  return dispatchFloat(a, a.in[0].dtype,
                       [&](auto t) { return batchNormTrain<decltype(t)>(a, nhwc); });
}

Status execBatchNormBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 5, 6, 3, 4));
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
