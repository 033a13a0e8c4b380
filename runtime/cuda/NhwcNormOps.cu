// Channels-last (layout="nhwc") passes of the BatchNorm executors. NormOps.cu holds the ops,
// the NCHW passes and the per-channel finalize kernels; NormKernels.cuh what both share.
//
// DeviceUtil.cuh defines the layout: X and every rank-4 operand are [N, H, W, C],
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
// adds its rows in a fixed tree and writes [part][C][2] partials, coalesced;
// combineFinalizeKernel then adds the parts in a fixed order and runs the pass's finalizer
// (NormKernels.cuh) on each channel's totals, in the same launch. Sums run in another order than
// in NCHW, so the two layouts agree to rounding, not bit for bit. X may be a pitched view (a run
// of channels of a Concat written in place, OpList.def's HGP_PITCHED): the kernels pass each
// load its row r, and X's element (r, c) is read at r * xPitch + c; every other operand is dense
// (r * C + c).
#include "runtime/cuda/NormKernels.cuh"

namespace hgp::cuda::norm {

// ---- The functors' channels-last views ------------------------------------------------------

/// AffineApply, NHWC: channels c0 .. c0 + N - 1 with their coefficients in registers
/// (nhwcMapKernel).
template <typename T, bool S> template <int N> struct AffineApply<T, S>::Columns {
  AffineApply f;
  BnAffine k[N];
  uint32_t c0;
  struct Loaded {
    PackN<T, N> x, r;
  };
  __device__ __forceinline__ void load(uint32_t i, uint32_t row, Loaded& l) const {
    l.x = loadPack<N>(f.x + row * f.xPitch + c0);
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

template <typename T, bool S>
template <int N>
__device__ auto AffineApply<T, S>::columns(uint32_t c0) const -> Columns<N> {
  Columns<N> c{*this, {}, c0};
#pragma unroll
  for (int q = 0; q < N; ++q) c.k[q] = affine[c0 + q];
  return c;
}

/// StatsSums, NHWC: channels c0 .. c0 + N - 1, whose first elements are row 0's
/// (nhwcPartialsKernel).
template <typename T> template <int N> struct StatsSums<T>::Columns {
  const T* x;
  float k[N];
  uint32_t c0, xPitch;
  struct Loaded {
    PackN<T, N> x;
  };
  __device__ __forceinline__ void load(uint32_t, uint32_t row, Loaded& l) const {
    l.x = loadPack<N>(x + row * xPitch + c0);
  }
  __device__ __forceinline__ void add(float (&run)[2][N], const Loaded& l, uint32_t) const {
#pragma unroll
    for (int q = 0; q < N; ++q) {
      float d = toFloat(l.x.e[q]) - k[q];
      run[0][q] += d;
      run[1][q] += d * d;
    }
  }
};

template <typename T>
template <int N>
__device__ auto StatsSums<T>::columns(uint32_t c0) const -> Columns<N> {
  Columns<N> c{x, {}, c0, xPitch};
#pragma unroll
  for (int q = 0; q < N; ++q) c.k[q] = toFloat(x[c0 + q]);
  return c;
}

/// BwdSums, NHWC: channels c0 .. c0 + N - 1 (nhwcPartialsKernel).
template <typename T, bool S> template <int N> struct BwdSums<T, S>::Columns {
  const T *dy, *dy2, *x, *z;
  T* gOut;
  float mu[N];
  uint32_t c0, xPitch;
  BnActivation act;
  BnAffine pre[S ? N : 1]; ///< Only a Smooth kernel keeps the coefficients in registers.
  struct Loaded {
    PackN<T, N> g, v, g2, m;
  };
  __device__ __forceinline__ void load(uint32_t off, uint32_t row, Loaded& l) const {
    l.g = loadPack<N>(dy + off);
    l.v = loadPack<N>(x + row * xPitch + c0);
    if (dy2) l.g2 = loadPack<N>(dy2 + off);
    if (z) l.m = loadPack<N>(z + off);
  }
  __device__ __forceinline__ void add(float (&run)[2][N], const Loaded& l, uint32_t off) const {
    float gm[N];
#pragma unroll
    for (int q = 0; q < N; ++q) {
      gm[q] = dy2 ? summedGrad<T>(toFloat(l.g.e[q]), toFloat(l.g2.e[q])) : toFloat(l.g.e[q]);
      if (act != BnActivation::None)
        gm[q] = fusedGrad<T, S>(act, gm[q], z ? toFloat(l.m.e[q]) : 0.f, toFloat(l.v.e[q]),
                                pre[S ? q : 0]);
    }
    if (gOut) storeVec<N>(gOut + off, gm);
#pragma unroll
    for (int q = 0; q < N; ++q) {
      run[0][q] += gm[q];
      run[1][q] += gm[q] * (toFloat(l.v.e[q]) - mu[q]);
    }
  }
};

template <typename T, bool S>
template <int N>
__device__ auto BwdSums<T, S>::columns(uint32_t c0) const -> Columns<N> {
  Columns<N> c{dy, dy2, x, fa.z, gOut, {}, c0, xPitch, fa.act, {}};
#pragma unroll
  for (int q = 0; q < N; ++q) {
    c.mu[q] = mean[c0 + q];
    if constexpr (S) c.pre[q] = fa.pre[c0 + q];
  }
  return c;
}

/// BwdApply, NHWC: channels c0 .. c0 + N - 1 with their coefficients in registers
/// (nhwcMapKernel). The frozen form does not read X.
template <typename T, bool S> template <int N> struct BwdApply<T, S>::Columns {
  BwdApply f;
  BwdCoefficients k[N];
  uint32_t c0;
  BnAffine pre[S ? N : 1]; ///< As BwdSums' Columns.
  struct Loaded {
    PackN<T, N> g, g2, x, z;
  };
  __device__ __forceinline__ void load(uint32_t i, uint32_t row, Loaded& l) const {
    l.g = loadPack<N>(f.dy + i);
    if (f.dy2) l.g2 = loadPack<N>(f.dy2 + i);
    if (f.readsX()) l.x = loadPack<N>(f.x + row * f.xPitch + c0);
    if (f.fa.z) l.z = loadPack<N>(f.fa.z + i);
  }
  __device__ __forceinline__ void store(uint32_t i, const Loaded& l) const {
    float v[N];
#pragma unroll
    for (int q = 0; q < N; ++q) {
      float g = f.dy2 ? summedGrad<T>(toFloat(l.g.e[q]), toFloat(l.g2.e[q])) : toFloat(l.g.e[q]);
      float xv = f.readsX() ? toFloat(l.x.e[q]) : 0.f;
      if (f.fa.act != BnActivation::None)
        g = fusedGrad<T, S>(f.fa.act, g, f.fa.z ? toFloat(l.z.e[q]) : 0.f, xv, pre[S ? q : 0]);
      v[q] = f.at(k[q], g, xv);
    }
    storeVec<N>(f.dx + i, v);
  }
};

template <typename T, bool S>
template <int N>
__device__ auto BwdApply<T, S>::columns(uint32_t c0) const -> Columns<N> {
  Columns<N> c{*this, {}, c0, {}};
#pragma unroll
  for (int q = 0; q < N; ++q) {
    c.k[q] = coef[c0 + q];
    if constexpr (S) c.pre[q] = fa.pre[c0 + q];
  }
  return c;
}

// ---- Passes over channels-last [M, C] --------------------------------------------------------

namespace {

/// Elementwise pass over NHWC rows (NhwcTiling): a thread takes channels V*j .. V*j + V - 1,
/// fetches their coefficients once (f.columns<V>), then walks down the rows, four at a time so
/// that all four loads are in flight before the first result is stored.
template <int V, typename F>
__global__ void __launch_bounds__(kBlock, KernelShape<F>::kMinBlocks)
    nhwcMapKernel(NhwcTiling t, F f) {
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
    k.load(i, r, l0);
    k.load(i + d, r + step, l1);
    k.load(i + 2 * d, r + 2 * step, l2);
    k.load(i + 3 * d, r + 3 * step, l3);
    k.store(i, l0);
    k.store(i + d, l1);
    k.store(i + 2 * d, l2);
    k.store(i + 3 * d, l3);
  }
  for (; r < t.rows; r += step) {
    uint32_t i = r * t.channels + j * V;
    Loaded l0;
    k.load(i, r, l0);
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

/// Block (p, tile) sums rows [p * chunk, (p + 1) * chunk) of its channels: each thread its
/// channels V*j .. V*j + V - 1 (F::Columns k = f.columns<V>(V * j); k.load(offset, loaded), then
/// k.add(run, loaded, offset)) over every rowsPerBlock-th row, kFlush rows a float run, runs
/// added into doubles; the block's rows are then added in a fixed tree, and
/// partials[(p * C + c) * 2 + k] receives sum k of channel c.
template <int V, typename F>
__global__ void __launch_bounds__(kBlock, KernelShape<F>::kMinBlocks)
    nhwcPartialsKernel(NhwcTiling t, uint32_t chunk, F f, double* partials) {
  constexpr int kRows = KernelShape<F>::kRows; // rows loaded together, summed in float
  __shared__ double tree[2][kBlock * V];
  uint32_t row = threadIdx.x / t.cols, j = blockIdx.y * t.cols + threadIdx.x % t.cols;
  double acc[2][V];
#pragma unroll
  for (int q = 0; q < V; ++q) acc[0][q] = acc[1][q] = 0.0;
  if (j < t.vecs) {
    auto k = f.template columns<V>(j * V);
    uint32_t begin = blockIdx.x * chunk, end = min(t.rows, begin + chunk);
    uint32_t step = t.rowsPerBlock;
    for (uint32_t r0 = begin + row; r0 < end; r0 += kRows * step) {
      float run[2][V];
#pragma unroll
      for (int q = 0; q < V; ++q) run[0][q] = run[1][q] = 0.f;
      if (r0 + (kRows - 1) * step < end) {
        // A whole run in range: every row's operands are loaded before the first sum, so that
        // all kRows rows' loads are in flight together (the memory-level parallelism HBM
        // needs). Written out in two loops because a functor that stores (BwdSums' G) would
        // otherwise keep the compiler from moving a later row's loads above an earlier row's
        // store: one row in flight, half of HBM's bandwidth. The additions keep their order.
        typename decltype(k)::Loaded l[kRows];
#pragma unroll
        for (int u = 0; u < kRows; ++u)
          k.load((r0 + u * step) * t.channels + j * V, r0 + u * step, l[u]);
#pragma unroll
        for (int u = 0; u < kRows; ++u) k.add(run, l[u], (r0 + u * step) * t.channels + j * V);
      } else {
#pragma unroll
        for (int u = 0; u < kRows; ++u) {
          uint32_t r = r0 + u * step;
          if (r >= end) break;
          typename decltype(k)::Loaded l;
          k.load(r * t.channels + j * V, r, l);
          k.add(run, l, r * t.channels + j * V);
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

/// Adds the [parts][C][2] partials over the parts and finalizes each channel: block b takes
/// channels 16 b .. 16 b + 15 (32 sums); lane y of its 32 x 32 threads adds parts y, y + 32, ...
/// in turn, lane 0 then adds the 32 lanes in order, and one thread per channel runs `fin` on the
/// channel's two totals. The order of the additions depends only on the part count.
template <typename Fin>
__global__ void combineFinalizeKernel(int parts, uint32_t channels, const double* partials,
                                      Fin fin) {
  __shared__ double lanes[32][33];
  __shared__ double totals[32];
  uint32_t n = channels * 2, v = blockIdx.x * 32 + threadIdx.x;
  double s = 0.0;
  if (v < n)
    for (int p = int(threadIdx.y); p < parts; p += 32) s += partials[size_t(p) * n + v];
  lanes[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0) {
    double total = 0.0;
    for (int y = 0; y < 32; ++y) total += lanes[y][threadIdx.x];
    totals[threadIdx.x] = total;
  }
  __syncthreads();
  uint32_t c = blockIdx.x * 16 + threadIdx.x;
  if (threadIdx.y == 0 && threadIdx.x < 16 && c < channels) {
    double sum[2] = {totals[2 * threadIdx.x], totals[2 * threadIdx.x + 1]};
    fin(int64_t(c), sum);
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

template <int V, typename F>
void launchNhwcPartials(const CudaArgs& a, const NhwcSplit& sp, const F& f, double* out) {
  dim3 grid(unsigned(sp.parts), sp.t.tiles);
  nhwcPartialsKernel<V><<<grid, sp.t.threads(), 0, a.stream>>>(sp.t, sp.chunk, f, out);
}

} // namespace

ChannelShape nhwcChannels(const Shape& s) {
  ChannelShape c;
  c.outer = s[0] * s[1] * s[2];
  c.channels = s[3];
  c.inner = 1;
  return c;
}

template <typename T, typename F>
Status planNhwcSums(const CudaArgs& a, const ChannelShape& s, int width, NhwcSplit& sp) {
  if (!fitsIn32(s)) return a.fail("more than 2^31 elements");
  if (width == kVec<T>) return planNhwcSumsAs<kVec<T>, F>(a, s, sizeof(T), sp);
  if (width == 4) return planNhwcSumsAs<4, F>(a, s, sizeof(T), sp);
  return planNhwcSumsAs<1, F>(a, s, sizeof(T), sp);
}

template <typename T, typename F>
Status launchNhwcSums(const CudaArgs& a, const NhwcSplit& sp, const F& f,
                      const typename F::Finalize& fin, double* partials) {
  if (sp.width == kVec<T>) launchNhwcPartials<kVec<T>>(a, sp, f, partials);
  else if (sp.width == 4) launchNhwcPartials<4>(a, sp, f, partials);
  else launchNhwcPartials<1>(a, sp, f, partials);
  HGP_TRY(checkLaunch(a, "nhwcPartialsKernel"));
  combineFinalizeKernel<<<(sp.t.channels + 15) / 16, dim3(32, 32), 0, a.stream>>>(
      sp.parts, sp.t.channels, partials, fin);
  return checkLaunch(a, "combineFinalizeKernel");
}

template <typename T, typename F>
Status launchNhwcMap(CudaArgs& a, const ChannelShape& s, int width, const F& f) {
  if (!fitsIn32(s)) return a.fail("more than 2^31 elements");
  if (width == kVec<T>) return launchNhwcMapAs<kVec<T>>(a, s, f);
  if (width == 4) return launchNhwcMapAs<4>(a, s, f);
  return launchNhwcMapAs<1>(a, s, f);
}

// The launchers NormOps.cu calls, for each functor and element type.
#define HGP_NHWC_NORM_INSTANCES(T)                                                                 \
  HGP_NHWC_NORM_STATS(T) HGP_NHWC_NORM_ACT(T, false) HGP_NHWC_NORM_ACT(T, true)
#define HGP_NHWC_NORM_STATS(T)                                                                     \
  template Status planNhwcSums<T, StatsSums<T>>(const CudaArgs&, const ChannelShape&, int,        \
                                                NhwcSplit&);                                       \
  template Status launchNhwcSums<T, StatsSums<T>>(const CudaArgs&, const NhwcSplit&,              \
                                                  const StatsSums<T>&, const StatsFinalize<T>&,    \
                                                  double*);
// Each activation functor twice: for none and relu, and for silu and hardswish (Smooth).
#define HGP_NHWC_NORM_ACT(T, S)                                                                    \
  template Status planNhwcSums<T, BwdSums<T, S>>(const CudaArgs&, const ChannelShape&, int,       \
                                                 NhwcSplit&);                                      \
  template Status launchNhwcSums<T, BwdSums<T, S>>(const CudaArgs&, const NhwcSplit&,             \
                                                   const BwdSums<T, S>&, const BwdFinalize&,       \
                                                   double*);                                       \
  template Status launchNhwcMap<T, AffineApply<T, S>>(CudaArgs&, const ChannelShape&, int,        \
                                                      const AffineApply<T, S>&);                   \
  template Status launchNhwcMap<T, BwdApply<T, S>>(CudaArgs&, const ChannelShape&, int,           \
                                                   const BwdApply<T, S>&);

HGP_NHWC_NORM_INSTANCES(float)
HGP_NHWC_NORM_INSTANCES(__nv_bfloat16)
HGP_NHWC_NORM_INSTANCES(__half)

} // namespace hgp::cuda::norm
