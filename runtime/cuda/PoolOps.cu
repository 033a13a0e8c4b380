// CUDA executors for max, average and global average pooling and their gradients (PoolOps.cpp
// on the CPU), for 1-D, 2-D and 3-D windows (lower ranks get leading unit dims).
//
// The forward ops run a thread per output. The gradients are gathers, a thread per input
// element, so they need no atomics: an input element visits the outputs whose windows cover it
// in row-major order and adds their shares starting from zero, which is the order in which the
// CPU reference accumulates them, so results agree bit for bit. MaxPoolBwd first stores each
// window's argmax (first maximum in row-major window order; padding never wins; a NaN wins and
// stays) as a byte in the step's scratch, then takes dY only where the argmax is this element;
// windows of 255 elements or more recompute the argmax of each covering window instead. For the
// common 2x2 and 3x3 windows on planes that fit in shared memory, one kernel does both passes a
// block per plane, reading X once from global memory. Every kernel is templated on the element
// type T (float, or bf16/f16 under mixed precision): it compares and sums in float and rounds
// its result once on store.
//
// Channels-last (layout="nhwc", DeviceUtil.cuh): 2-D windows over X [N, H, W, C], with the
// geometry read from the NCHW shapes (x_shape, where an op has it, stays the NCHW shape: the
// attributes do not depend on the layout). A thread takes one position and V consecutive
// channels (a 16-byte vector when C allows, 8 bytes for 16-bit data when C is a multiple of 4
// only, one channel for odd C), so neighbouring threads read neighbouring memory, and applies to
// each channel the operations of the NCHW kernels in their order: the same first-maximum and NaN
// rule, the same double sums and float gradient sums, so both layouts and the CPU agree bit for
// bit. MaxPool issues a 3x3 or 2x2 window's loads before comparing. MaxPoolBwd stores each
// output's argmax as a window offset (a byte; two for windows of 255 elements or more) in the
// step's scratch, then gathers per input vector over the covering windows (strides of 2 known
// at compile time), without atomics. GlobalAveragePool gives a block one image and a tile of
// channels (NhwcTiling): each thread sums its rows in double, the block adds them in a fixed
// tree; Y [N, 1, 1, C] is the same memory as [N, C, 1, 1].
#include "runtime/cuda/DeviceUtil.cuh"
#include "runtime/plan/Window.h"

#include <type_traits>

namespace hgp::cuda {

namespace {

/// Window geometry in 32-bit ints (one plane is far below 2^31 elements; readPoolGeometry
/// checks), which keeps the index arithmetic of these kernels cheap.
struct PoolGeometry {
  int64_t planes = 0; ///< N * C.
  int in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int stride[3] = {1, 1, 1}, padBegin[3] = {0, 0, 0}, padEnd[3] = {0, 0, 0};
  int dilation[3] = {1, 1, 1};
  bool countIncludePad = false;

  __host__ __device__ int inVol() const { return in[0] * in[1] * in[2]; }
  __host__ __device__ int outVol() const { return out[0] * out[1] * out[2]; }
  __host__ __device__ int windowVol() const { return k[0] * k[1] * k[2]; }
};

/// Reads the window attributes and checks that y is the pooled shape of x.
Status readPoolGeometry(const CudaArgs& a, const Shape& x, const Shape& y, PoolGeometry& g) {
  size_t rank = x.size();
  if (rank < 3 || rank > 5 || y.size() != rank || y[0] != x[0] || y[1] != x[1])
    return a.fail("pooling shapes " + shapeToString(x) + " -> " + shapeToString(y) + " do not fit");
  size_t r = rank - 2, lead = 3 - r;
  std::vector<int64_t> k, s, p, d(r, 1);
  HGP_TRY(readInts(a, "kernel_shape", r, k));
  HGP_TRY(readInts(a, "strides", r, s));
  HGP_TRY(readInts(a, "pads", 2 * r, p));
  if (a.attrs().has("dilations")) HGP_TRY(readInts(a, "dilations", r, d));
  bool ceil = a.attrs().getInt("ceil_mode", 0) != 0;
  g = PoolGeometry();
  g.planes = x[0] * x[1];
  g.countIncludePad = a.attrs().getInt("count_include_pad", 0) != 0;
  int64_t inVol = 1, outVol = 1;
  for (size_t i = 0; i < r; ++i) {
    inVol *= x[2 + i];
    outVol *= y[2 + i];
  }
  if (inVol >= (int64_t(1) << 31) || outVol >= (int64_t(1) << 31))
    return a.fail("a pooling plane has 2^31 elements or more");
  for (size_t i = 0; i < r; ++i) {
    if (k[i] < 1 || s[i] < 1 || d[i] < 1 || p[i] < 0 || p[r + i] < 0)
      return a.fail("kernel, strides and dilations must be positive and pads non-negative");
    if (k[i] * d[i] >= (int64_t(1) << 30) || s[i] >= (int64_t(1) << 30) ||
        p[i] >= (int64_t(1) << 30) || p[r + i] >= (int64_t(1) << 30))
      return a.fail("pooling window attributes are out of range");
    if (y[2 + i] != windowOutputSize(x[2 + i], k[i], s[i], p[i], p[r + i], d[i], ceil))
      return a.fail("output " + shapeToString(y) + " is not the pooled shape of " +
                    shapeToString(x));
    g.in[lead + i] = int(x[2 + i]);
    g.out[lead + i] = int(y[2 + i]);
    g.k[lead + i] = int(k[i]);
    g.stride[lead + i] = int(s[i]);
    g.padBegin[lead + i] = int(p[i]);
    g.padEnd[lead + i] = int(p[r + i]);
    g.dilation[lead + i] = int(d[i]);
  }
  return Status::ok();
}

/// Grid-stride launches over `total` elements, one per thread. Index spaces below 2^31 elements
/// use 32-bit index arithmetic (the decomposition into positions is most of these kernels'
/// integer work).
struct FlatLaunch {
  unsigned grid, threads;
  int64_t total;
  bool narrow() const { return total < (int64_t(1) << 31); }
};

FlatLaunch flatLaunch(const CudaArgs& a, int64_t total) {
  return {blocksFor(a, total, kBlock, 32), unsigned(kBlock), total};
}

/// The most shared memory maxPoolBwdPlaneKernel may take (two blocks still fit on an H100/H200
/// multiprocessor); larger planes take the two-pass path.
constexpr size_t kPlaneSmemLimit = 100 * 1024;

/// Every operand and the result share one float dtype (the element type T of the kernels).
Status checkFloatOperands(const CudaArgs& a) {
  HGP_TRY(checkFloat(a, a.out[0], "result"));
  for (const auto& v : a.in) HGP_TRY(checkDType(a, v, a.out[0].dtype, "operand"));
  return Status::ok();
}

/// A read-only load as float (through the texture path for float).
template <typename T> __device__ __forceinline__ float ldg(const T* p) {
  if constexpr (std::is_same_v<T, float>)
    return __ldg(p);
  else
    return toFloat(*p);
}

/// The argmax of output position (od, oh, ow) within one plane, as an index into the plane and
/// as an offset in row-major window order; -1 for an empty window.
template <typename T>
__device__ int maxIndex(const PoolGeometry& g, const T* x, int od, int oh, int ow,
                        int* windowOffset = nullptr) {
  int best = -1, bestOffset = -1;
  float bestVal = 0.f;
  for (int kd = 0; kd < g.k[0]; ++kd) {
    int id = od * g.stride[0] - g.padBegin[0] + kd * g.dilation[0];
    if (id < 0 || id >= g.in[0]) continue;
    for (int kh = 0; kh < g.k[1]; ++kh) {
      int ih = oh * g.stride[1] - g.padBegin[1] + kh * g.dilation[1];
      if (ih < 0 || ih >= g.in[1]) continue;
      int rowIdx = (id * g.in[1] + ih) * g.in[2], iw0 = ow * g.stride[2] - g.padBegin[2];
      const T* row = x + rowIdx;
      for (int kw0 = 0; kw0 < g.k[2]; kw0 += 4) {
        // Four loads from always-valid addresses first, so they are in flight together.
        float v[4];
        bool ok[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          int iw = iw0 + (kw0 + j) * g.dilation[2];
          ok[j] = kw0 + j < g.k[2] && iw >= 0 && iw < g.in[2];
          v[j] = ldg(row + (ok[j] ? iw : 0));
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          // Strictly greater: the first of equal values wins. A NaN wins and stays.
          if (ok[j] && (best < 0 || v[j] > bestVal || (isnan(v[j]) && !isnan(bestVal)))) {
            best = rowIdx + iw0 + (kw0 + j) * g.dilation[2];
            bestVal = v[j];
            bestOffset = (kd * g.k[1] + kh) * g.k[2] + kw0 + j;
          }
        }
      }
    }
  }
  if (windowOffset) *windowOffset = bestOffset;
  return best;
}


/// The kernels below run a thread per element of their result: (plane, d, h, w) of a row-major
/// [planes, n0, n1, n2] index space, neighbouring threads along w.
struct Pos {
  int64_t p; ///< The plane.
  int d, h, w;
};

template <typename I>
__device__ __forceinline__ Pos posOf(I i, const int n[3]) {
  I t = i / I(n[2]);
  int w = int(i - t * I(n[2]));
  I u = t / I(n[1]);
  int h = int(t - u * I(n[1]));
  I p = u / I(n[0]);
  return {int64_t(p), int(u - p * I(n[0])), h, w};
}

#define HGP_FLAT_LOOP(I, i, n)                                                                     \
  for (I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); i < (n); i += I(gridDim.x) * I(blockDim.x))

/// maxIndex for a 2-D window of compile-time size KH x KW (k[0] == 1): every load is issued
/// before the comparisons, which run in window order.
template <int KH, int KW, bool Shared = false, typename T = float>
__device__ __forceinline__ int maxIndex2d(const PoolGeometry& g, const T* x, int oh, int ow,
                                          int* windowOffset) {
  int ih0 = oh * g.stride[1] - g.padBegin[1], iw0 = ow * g.stride[2] - g.padBegin[2];
  float v[KH * KW];
  bool ok[KH * KW];
#pragma unroll
  for (int kh = 0; kh < KH; ++kh) {
    int ih = ih0 + kh * g.dilation[1];
    bool rowOk = ih >= 0 && ih < g.in[1];
#pragma unroll
    for (int kw = 0; kw < KW; ++kw) {
      int iw = iw0 + kw * g.dilation[2];
      bool in = rowOk && iw >= 0 && iw < g.in[2];
      ok[kh * KW + kw] = in;
      int at = in ? ih * g.in[2] + iw : 0;
      v[kh * KW + kw] = Shared ? toFloat(x[at]) : ldg(x + at);
    }
  }
  int best = -1;
  float bestVal = 0.f;
#pragma unroll
  for (int j = 0; j < KH * KW; ++j)
    if (ok[j] && (best < 0 || v[j] > bestVal || (isnan(v[j]) && !isnan(bestVal)))) {
      best = j;
      bestVal = v[j];
    }
  if (windowOffset) *windowOffset = best;
  if (best < 0) return -1;
  return (ih0 + best / KW * g.dilation[1]) * g.in[2] + iw0 + best % KW * g.dilation[2];
}

/// The argmax (index and window offset) for window sizes K (KH x KW, 0 x 0: any).
template <int KH, int KW, typename T>
__device__ __forceinline__ int windowMax(const PoolGeometry& g, const T* x, int od, int oh,
                                         int ow, int* windowOffset = nullptr) {
  if constexpr (KH > 0)
    return maxIndex2d<KH, KW>(g, x, oh, ow, windowOffset);
  else
    return maxIndex(g, x, od, oh, ow, windowOffset);
}

template <typename T, int KH, int KW, typename I>
__global__ void maxPoolKernel(PoolGeometry g, const T* x, T* y, I total) {
  HGP_FLAT_LOOP(I, i, total) {
    Pos q = posOf(i, g.out);
    const T* xp = x + q.p * g.inVol();
    int idx = windowMax<KH, KW>(g, xp, q.d, q.h, q.w);
    y[i] = idx < 0 ? fromFloat<T>(-INFINITY) : xp[idx];
  }
}

/// MaxPoolBwd, pass 1: each output's argmax as its offset in window order (255: empty).
template <typename T, int KH, int KW, typename I>
__global__ void maxArgKernel(PoolGeometry g, const T* x, uint8_t* arg, I total) {
  HGP_FLAT_LOOP(I, i, total) {
    Pos q = posOf(i, g.out);
    int offset;
    windowMax<KH, KW>(g, x + q.p * g.inVol(), q.d, q.h, q.w, &offset);
    arg[i] = offset < 0 ? uint8_t(255) : uint8_t(offset);
  }
}

/// Launches kernel<T, KH, KW, I> for the common 2-D windows (2x2, 3x3) and kernel<T, 0, 0, I>
/// otherwise, with I the narrowest index type for l.total.
#define HGP_WINDOW_DISPATCH_I(T, g, kernel, I, l, stream, ...)                                     \
  do {                                                                                             \
    if ((g).k[0] == 1 && (g).k[1] == 3 && (g).k[2] == 3)                                           \
      kernel<T, 3, 3, I><<<(l).grid, (l).threads, 0, stream>>>(__VA_ARGS__, I((l).total));        \
    else if ((g).k[0] == 1 && (g).k[1] == 2 && (g).k[2] == 2)                                      \
      kernel<T, 2, 2, I><<<(l).grid, (l).threads, 0, stream>>>(__VA_ARGS__, I((l).total));        \
    else                                                                                           \
      kernel<T, 0, 0, I><<<(l).grid, (l).threads, 0, stream>>>(__VA_ARGS__, I((l).total));        \
  } while (0)
#define HGP_WINDOW_DISPATCH(T, g, kernel, l, stream, ...)                                          \
  do {                                                                                             \
    if ((l).narrow())                                                                              \
      HGP_WINDOW_DISPATCH_I(T, g, kernel, uint32_t, l, stream, __VA_ARGS__);                       \
    else                                                                                           \
      HGP_WINDOW_DISPATCH_I(T, g, kernel, uint64_t, l, stream, __VA_ARGS__);                       \
  } while (0)
/// Launches kernel<T, I> with I the narrowest index type for l.total.
#define HGP_FLAT_DISPATCH(T, kernel, l, stream, ...)                                               \
  do {                                                                                             \
    if ((l).narrow())                                                                              \
      kernel<T, uint32_t><<<(l).grid, (l).threads, 0, stream>>>(__VA_ARGS__, uint32_t((l).total)); \
    else                                                                                           \
      kernel<T, uint64_t><<<(l).grid, (l).threads, 0, stream>>>(__VA_ARGS__, uint64_t((l).total)); \
  } while (0)

/// The output positions of dim d whose undilated window [o*s - pad, o*s - pad + k) holds input
/// index i: [lo, hi], ascending (empty when lo > hi).
__device__ __forceinline__ void coveringRange(const PoolGeometry& g, int d, int i, int& lo,
                                              int& hi) {
  int t = i + g.padBegin[d] - g.k[d] + 1;
  lo = t <= 0 ? 0 : (t + g.stride[d] - 1) / g.stride[d];
  hi = min((i + g.padBegin[d]) / g.stride[d], g.out[d] - 1);
}

/// Calls fn(o, k) for each output position o of dim d whose (dilated) max window reads input
/// index i at window position k, in ascending o (window positions from the last to the first).
template <typename Fn>
__device__ __forceinline__ void maxCovering(const PoolGeometry& g, int d, int i, Fn&& fn) {
  for (int k = g.k[d] - 1; k >= 0; --k) {
    int t = i + g.padBegin[d] - k * g.dilation[d];
    if (t < 0) continue;
    int o = t / g.stride[d];
    if (o * g.stride[d] != t || o >= g.out[d]) continue;
    fn(o, k);
  }
}

/// Division of non-negative ints below 2^31 by a divisor fixed at launch: a multiply-high and a
/// shift (Granlund and Montgomery), where the plane kernel would otherwise spend most of its
/// instructions in integer division.
struct FastDiv {
  uint32_t d = 1, mul = 0, shift = 0;
  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor) {
    while ((uint64_t(1) << shift) < d) ++shift;
    mul = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d)) / d + 1);
  }
  __device__ __forceinline__ int operator()(int n) const {
    return int((__umulhi(uint32_t(n), mul) + uint32_t(n)) >> shift);
  }
};

/// coveringRange with the stride S (1 or 2) known at compile time: no division.
template <int S>
__device__ __forceinline__ void coveringRangeS(const PoolGeometry& g, int d, int i, int& lo,
                                               int& hi) {
  int t = i + g.padBegin[d] - g.k[d] + 1;
  lo = t <= 0 ? 0 : (t + S - 1) / S;
  hi = min((i + g.padBegin[d]) / S, g.out[d] - 1);
}

/// MaxPoolBwd for one 2-D KH x KW undilated window shape of stride S in both dims, when a plane of
/// X and its argmax bytes fit in shared memory: a block per plane loads X once, computes every
/// window's argmax from shared memory, then gathers dY for each input element, in the same order
/// as maxPoolBwdKernel.
template <int KH, int KW, int S, typename T>
__global__ void maxPoolBwdPlaneKernel(PoolGeometry g, FastDiv byInW, FastDiv byOutW,
                                      const T* dy, const T* x, T* dx) {
  extern __shared__ float sx[];
  int inVol = g.in[1] * g.in[2], outVol = g.out[1] * g.out[2];
  uint8_t* sarg = reinterpret_cast<uint8_t*>(sx + inVol);
  for (int64_t p = blockIdx.x; p < g.planes; p += gridDim.x) {
    const T* xp = x + p * inVol;
    const T* dyp = dy + p * outVol;
    for (int i = threadIdx.x; i < inVol; i += blockDim.x) sx[i] = toFloat(xp[i]);
    __syncthreads();
    for (int o = threadIdx.x; o < outVol; o += blockDim.x) {
      int offset, oh = byOutW(o);
      maxIndex2d<KH, KW, true>(g, sx, oh, o - oh * g.out[2], &offset);
      sarg[o] = offset < 0 ? uint8_t(255) : uint8_t(offset);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < inVol; i += blockDim.x) {
      int ih = byInW(i), iw = i - ih * g.in[2];
      int lo1, hi1, lo2, hi2;
      coveringRangeS<S>(g, 1, ih, lo1, hi1);
      coveringRangeS<S>(g, 2, iw, lo2, hi2);
      float acc = 0.f;
      for (int oh = lo1; oh <= hi1; ++oh) {
        int o = oh * g.out[2] + lo2;
        int k = (ih + g.padBegin[1] - oh * S) * KW + iw + g.padBegin[2] - lo2 * S;
        for (int ow = lo2; ow <= hi2; ++ow, ++o, k -= S) {
          float dv = ldg(dyp + o);
          acc = int(sarg[o]) == k ? __fadd_rn(acc, dv) : acc;
        }
      }
      dx[p * inVol + i] = fromFloat<T>(acc);
    }
    __syncthreads();
  }
}

/// MaxPoolBwd, pass 2: each input element sums dY over the windows whose argmax it is, in
/// row-major output order. With arg == nullptr (windows of 255 elements or more) each covering
/// window's argmax is recomputed instead.
template <typename T, typename I>
__global__ void maxPoolBwdKernel(PoolGeometry g, const T* dy, const T* x, const uint8_t* arg,
                                 T* dx, bool undilated, I total) {
  int inVol = g.inVol(), outVol = g.outVol();
  HGP_FLAT_LOOP(I, i, total) {
    Pos q = posOf(i, g.in);
    const T* dyp = dy + q.p * outVol;
    float acc = 0.f;
    if (arg && undilated) {
      const uint8_t* ap = arg + q.p * outVol;
      int lo0, hi0, lo1, hi1, lo2, hi2;
      coveringRange(g, 0, q.d, lo0, hi0);
      coveringRange(g, 1, q.h, lo1, hi1);
      coveringRange(g, 2, q.w, lo2, hi2);
      for (int od = lo0; od <= hi0; ++od) {
        int kd = q.d + g.padBegin[0] - od * g.stride[0];
        for (int oh = lo1; oh <= hi1; ++oh) {
          int kdh = (kd * g.k[1] + q.h + g.padBegin[1] - oh * g.stride[1]) * g.k[2];
          int o = (od * g.out[1] + oh) * g.out[2] + lo2;
          int k = kdh + q.w + g.padBegin[2] - lo2 * g.stride[2];
          for (int ow = lo2; ow <= hi2; ++ow, ++o, k -= g.stride[2]) {
            float dv = toFloat(dyp[o]);
            acc = int(ap[o]) == k ? __fadd_rn(acc, dv) : acc;
          }
        }
      }
    } else {
      const T* xp = x + q.p * inVol;
      const uint8_t* ap = arg ? arg + q.p * outVol : nullptr;
      int idx = (q.d * g.in[1] + q.h) * g.in[2] + q.w;
      maxCovering(g, 0, q.d, [&](int od, int kd) {
        maxCovering(g, 1, q.h, [&](int oh, int kh) {
          maxCovering(g, 2, q.w, [&](int ow, int kw) {
            int o = (od * g.out[1] + oh) * g.out[2] + ow;
            bool mine = ap ? ap[o] == (kd * g.k[1] + kh) * g.k[2] + kw
                           : maxIndex(g, xp, od, oh, ow) == idx;
            if (mine) acc = __fadd_rn(acc, toFloat(dyp[o]));
          });
        });
      });
    }
    dx[i] = fromFloat<T>(acc);
  }
}

/// One dim of an average-pooling window: valid input [lo, hi), and the padded extent.
struct AvgSpan {
  int lo, hi, extent;
};

__device__ __forceinline__ AvgSpan avgSpan(const PoolGeometry& g, int d, int o) {
  int start = o * g.stride[d] - g.padBegin[d];
  int end = min(start + g.k[d], g.in[d] + g.padEnd[d]);
  return {max(start, 0), min(end, g.in[d]), end - start};
}

/// The divisor of an output position's average (0 when its window is empty).
__device__ int64_t avgWindow(const PoolGeometry& g, int od, int oh, int ow, AvgSpan s[3]) {
  s[0] = avgSpan(g, 0, od);
  s[1] = avgSpan(g, 1, oh);
  s[2] = avgSpan(g, 2, ow);
  if (s[0].hi <= s[0].lo || s[1].hi <= s[1].lo || s[2].hi <= s[2].lo) return 0;
  if (g.countIncludePad) return int64_t(s[0].extent) * s[1].extent * s[2].extent;
  return int64_t(s[0].hi - s[0].lo) * (s[1].hi - s[1].lo) * (s[2].hi - s[2].lo);
}

template <typename T, typename I>
__global__ void avgPoolKernel(PoolGeometry g, const T* x, T* y, I total) {
  HGP_FLAT_LOOP(I, i, total) {
    Pos q = posOf(i, g.out);
    const T* xp = x + q.p * g.inVol();
    AvgSpan s[3];
    int64_t divisor = avgWindow(g, q.d, q.h, q.w, s);
    double sum = 0;
    for (int id = s[0].lo; id < s[0].hi; ++id)
      for (int ih = s[1].lo; ih < s[1].hi; ++ih)
        for (int iw = s[2].lo; iw < s[2].hi; ++iw)
          sum += toFloat(xp[(id * g.in[1] + ih) * g.in[2] + iw]);
    y[i] = fromFloat<T>(divisor ? float(sum / double(divisor)) : 0.f);
  }
}

template <typename T, typename I>
__global__ void avgPoolBwdKernel(PoolGeometry g, const T* dy, T* dx, I total) {
  HGP_FLAT_LOOP(I, i, total) {
    Pos q = posOf(i, g.in);
    const T* dyp = dy + q.p * g.outVol();
    int lo0, hi0, lo1, hi1, lo2, hi2;
    coveringRange(g, 0, q.d, lo0, hi0);
    coveringRange(g, 1, q.h, lo1, hi1);
    coveringRange(g, 2, q.w, lo2, hi2);
    float acc = 0.f;
    for (int od = lo0; od <= hi0; ++od)
      for (int oh = lo1; oh <= hi1; ++oh)
        for (int ow = lo2; ow <= hi2; ++ow) {
          AvgSpan s[3];
          int64_t divisor = avgWindow(g, od, oh, ow, s);
          if (!divisor) continue;
          acc = __fadd_rn(acc, toFloat(dyp[(od * g.out[1] + oh) * g.out[2] + ow]) / float(divisor));
        }
    dx[i] = fromFloat<T>(acc);
  }
}

/// A warp per plane: the mean of vol elements, summed in double.
template <typename T>
__global__ void globalAvgWarpKernel(const T* x, T* y, int64_t planes, int64_t vol) {
  int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) >> 5;
  int lane = int(threadIdx.x & 31);
  int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  for (int64_t p = warp; p < planes; p += warps) {
    const T* xp = x + p * vol;
    double sum = 0;
    for (int64_t i = lane; i < vol; i += 32) sum += toFloat(xp[i]);
    sum = warpSum(sum);
    if (lane == 0) y[p] = fromFloat<T>(float(sum / double(vol)));
  }
}

/// A block per plane, for large planes.
template <typename T>
__global__ void globalAvgBlockKernel(const T* x, T* y, int64_t planes, int64_t vol) {
  __shared__ double scratch[32];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const T* xp = x + p * vol;
    double sum = 0;
    for (int64_t i = threadIdx.x; i < vol; i += blockDim.x) sum += toFloat(xp[i]);
    sum = blockSum(sum, scratch);
    if (threadIdx.x == 0) y[p] = fromFloat<T>(float(sum / double(vol)));
  }
}

template <typename T>
__global__ void globalAvgBwdKernel(const T* dy, T* dx, int64_t total, int64_t vol) {
  HGP_GRID_LOOP(i, total) dx[i] = fromFloat<T>(toFloat(dy[i / vol]) / float(vol));
}

// ---- Channels-last (NHWC) 2-D pooling -----------------------------------------------------
//
// X is [N, H, W, C] and Y [N, OH, OW, C]. A thread takes one position of V consecutive channels
// (a 16-byte vector when C allows), so neighbouring threads read neighbouring memory; each
// channel of the vector follows the rules of the NCHW kernels above, in the same order.

/// A position of an NHWC index space [N, rows, cols, C / V]: image, row, column, channel vector.
struct NhwcPos {
  int n, h, w;
  uint32_t j;
};

/// Splits flat indices (below 2^31) of the index space [N, rows, cols, C / V], vectors fastest.
struct NhwcIndex {
  FastDiv vecs, cols, rows;
  __device__ __forceinline__ NhwcPos operator()(uint32_t i) const {
    int t = vecs(int(i)), u = cols(t), n = rows(u);
    return {n, u - n * int(rows.d), t - u * int(cols.d), i - uint32_t(t) * vecs.d};
  }
};

NhwcIndex nhwcIndex(int64_t vecs, int rows, int cols) {
  return {FastDiv(uint32_t(vecs)), FastDiv(uint32_t(cols)), FastDiv(uint32_t(rows))};
}

/// The argmax per channel of window (oh, ow) in image xn (offset to the thread's channels; c
/// channels per position), with maxIndex's rule: the first maximum in row-major window order,
/// padding never wins, a NaN wins and stays. arg[q] is the window offset (-1: empty window) and
/// best.e[q] the element itself. A KH x KW window known at compile time issues every load
/// (from a valid address) before the comparisons.
template <int KH, int KW, int V, typename T>
__device__ __forceinline__ void nhwcWindowMax(const PoolGeometry& g, uint32_t c, const T* xn,
                                              int oh, int ow, PackN<T, V>& best, int (&arg)[V]) {
  float bestVal[V];
#pragma unroll
  for (int q = 0; q < V; ++q) {
    arg[q] = -1;
    bestVal[q] = 0.f;
  }
  int ih0 = oh * g.stride[1] - g.padBegin[1], iw0 = ow * g.stride[2] - g.padBegin[2];
  auto take = [&](const PackN<T, V>& p, int k) {
#pragma unroll
    for (int q = 0; q < V; ++q) {
      float v = toFloat(p.e[q]);
      if (arg[q] < 0 || v > bestVal[q] || (isnan(v) && !isnan(bestVal[q]))) {
        arg[q] = k;
        bestVal[q] = v;
        best.e[q] = p.e[q];
      }
    }
  };
  if constexpr (KH > 0) {
    PackN<T, V> p[KH * KW];
    bool ok[KH * KW];
#pragma unroll
    for (int kh = 0; kh < KH; ++kh) {
      int ih = ih0 + kh * g.dilation[1];
      bool rowOk = ih >= 0 && ih < g.in[1];
#pragma unroll
      for (int kw = 0; kw < KW; ++kw) {
        int iw = iw0 + kw * g.dilation[2];
        bool in = rowOk && iw >= 0 && iw < g.in[2];
        ok[kh * KW + kw] = in;
        p[kh * KW + kw] = loadPack<V>(xn + (in ? uint32_t(ih * g.in[2] + iw) * c : 0u));
      }
    }
#pragma unroll
    for (int k = 0; k < KH * KW; ++k)
      if (ok[k]) take(p[k], k);
  } else {
    for (int kh = 0; kh < g.k[1]; ++kh) {
      int ih = ih0 + kh * g.dilation[1];
      if (ih < 0 || ih >= g.in[1]) continue;
      for (int kw = 0; kw < g.k[2]; ++kw) {
        int iw = iw0 + kw * g.dilation[2];
        if (iw < 0 || iw >= g.in[2]) continue;
        take(loadPack<V>(xn + uint32_t(ih * g.in[2] + iw) * c), kh * g.k[2] + kw);
      }
    }
  }
}

/// MaxPool (Out = T: the maximum, -inf for an empty window) or MaxPoolBwd's first pass (Out =
/// uint8_t or uint16_t: the argmax's window offset, all ones for an empty window), a thread per
/// output vector.
template <typename T, int V, int KH, int KW, typename Out>
__global__ void maxPoolNhwcKernel(PoolGeometry g, NhwcIndex ix, uint32_t c, const T* x, Out* out,
                                  uint32_t total) {
  uint32_t image = uint32_t(g.in[1] * g.in[2]) * c;
  HGP_FLAT_LOOP(uint32_t, i, total) {
    NhwcPos p = ix(i);
    PackN<T, V> best;
    int arg[V];
    nhwcWindowMax<KH, KW, V>(g, c, x + p.n * image + p.j * V, p.h, p.w, best, arg);
    PackN<Out, V> o;
#pragma unroll
    for (int q = 0; q < V; ++q) {
      if constexpr (std::is_same_v<Out, T>)
        o.e[q] = arg[q] < 0 ? fromFloat<T>(-INFINITY) : best.e[q];
      else
        o.e[q] = arg[q] < 0 ? Out(~Out(0)) : Out(arg[q]);
    }
    *reinterpret_cast<decltype(o.raw)*>(out + size_t(i) * V) = o.raw;
  }
}

/// MaxPoolBwd's second pass, a thread per input vector: each channel adds dY over the windows
/// whose argmax it is, in row-major output order, as maxPoolBwdKernel does. S = 2: undilated
/// windows of stride 2 in both dims, known at compile time (no division).
template <typename T, int V, typename A, int S>
__global__ void maxPoolBwdNhwcKernel(PoolGeometry g, NhwcIndex ix, uint32_t c, const T* dy,
                                     const A* arg, T* dx, bool undilated, uint32_t total) {
  uint32_t image = uint32_t(g.out[1] * g.out[2]) * c;
  HGP_FLAT_LOOP(uint32_t, i, total) {
    NhwcPos p = ix(i);
    const T* dyn = dy + p.n * image + p.j * V;
    const A* an = arg + p.n * image + p.j * V;
    float acc[V];
#pragma unroll
    for (int q = 0; q < V; ++q) acc[q] = 0.f;
    auto visit = [&](int oh, int ow, int k) {
      uint32_t o = uint32_t(oh * g.out[2] + ow) * c;
      PackN<T, V> d = loadPack<V>(dyn + o);
      PackN<A, V> m = loadPack<V>(an + o);
#pragma unroll
      for (int q = 0; q < V; ++q)
        acc[q] = int(m.e[q]) == k ? __fadd_rn(acc[q], toFloat(d.e[q])) : acc[q];
    };
    if (S > 0 || undilated) {
      int lo1, hi1, lo2, hi2;
      if constexpr (S > 0) {
        coveringRangeS<S>(g, 1, p.h, lo1, hi1);
        coveringRangeS<S>(g, 2, p.w, lo2, hi2);
      } else {
        coveringRange(g, 1, p.h, lo1, hi1);
        coveringRange(g, 2, p.w, lo2, hi2);
      }
      int s1 = S > 0 ? S : g.stride[1], s2 = S > 0 ? S : g.stride[2];
      for (int oh = lo1; oh <= hi1; ++oh) {
        int kh = p.h + g.padBegin[1] - oh * s1;
        for (int ow = lo2; ow <= hi2; ++ow)
          visit(oh, ow, kh * g.k[2] + p.w + g.padBegin[2] - ow * s2);
      }
    } else {
      maxCovering(g, 1, p.h, [&](int oh, int kh) {
        maxCovering(g, 2, p.w, [&](int ow, int kw) { visit(oh, ow, kh * g.k[2] + kw); });
      });
    }
    storeVec<V>(dx + size_t(i) * V, acc);
  }
}

/// AveragePool, a thread per output vector: each channel's window summed in double in row-major
/// order, as avgPoolKernel.
template <typename T, int V>
__global__ void avgPoolNhwcKernel(PoolGeometry g, NhwcIndex ix, uint32_t c, const T* x, T* y,
                                  uint32_t total) {
  uint32_t image = uint32_t(g.in[1] * g.in[2]) * c;
  HGP_FLAT_LOOP(uint32_t, i, total) {
    NhwcPos p = ix(i);
    const T* xn = x + p.n * image + p.j * V;
    AvgSpan s[3];
    int64_t divisor = avgWindow(g, 0, p.h, p.w, s);
    double sum[V];
#pragma unroll
    for (int q = 0; q < V; ++q) sum[q] = 0.0;
    for (int ih = s[1].lo; ih < s[1].hi; ++ih)
      for (int iw = s[2].lo; iw < s[2].hi; ++iw) {
        PackN<T, V> v = loadPack<V>(xn + uint32_t(ih * g.in[2] + iw) * c);
#pragma unroll
        for (int q = 0; q < V; ++q) sum[q] += toFloat(v.e[q]);
      }
    float out[V];
#pragma unroll
    for (int q = 0; q < V; ++q) out[q] = divisor ? float(sum[q] / double(divisor)) : 0.f;
    storeVec<V>(y + size_t(i) * V, out);
  }
}

/// AveragePoolBwd, a thread per input vector, as avgPoolBwdKernel.
template <typename T, int V>
__global__ void avgPoolBwdNhwcKernel(PoolGeometry g, NhwcIndex ix, uint32_t c, const T* dy, T* dx,
                                     uint32_t total) {
  uint32_t image = uint32_t(g.out[1] * g.out[2]) * c;
  HGP_FLAT_LOOP(uint32_t, i, total) {
    NhwcPos p = ix(i);
    const T* dyn = dy + p.n * image + p.j * V;
    int lo1, hi1, lo2, hi2;
    coveringRange(g, 1, p.h, lo1, hi1);
    coveringRange(g, 2, p.w, lo2, hi2);
    float acc[V];
#pragma unroll
    for (int q = 0; q < V; ++q) acc[q] = 0.f;
    for (int oh = lo1; oh <= hi1; ++oh)
      for (int ow = lo2; ow <= hi2; ++ow) {
        AvgSpan s[3];
        int64_t divisor = avgWindow(g, 0, oh, ow, s);
        if (!divisor) continue;
        PackN<T, V> d = loadPack<V>(dyn + uint32_t(oh * g.out[2] + ow) * c);
#pragma unroll
        for (int q = 0; q < V; ++q) acc[q] = __fadd_rn(acc[q], toFloat(d.e[q]) / float(divisor));
      }
    storeVec<V>(dx + size_t(i) * V, acc);
  }
}

/// GlobalAveragePool: block (n, tile) sums image n's rows (NhwcTiling over the H * W positions)
/// for its channels, each thread every rowsPerBlock-th row in double, then the block's rows in
/// a fixed tree; Y is [N, 1, 1, C].
template <typename T, int V>
__global__ void __launch_bounds__(kBlock) globalAvgNhwcKernel(NhwcTiling t, const T* x, T* y) {
  __shared__ double tree[kBlock * V];
  uint32_t row = threadIdx.x / t.cols, j = blockIdx.y * t.cols + threadIdx.x % t.cols;
  double acc[V];
#pragma unroll
  for (int q = 0; q < V; ++q) acc[q] = 0.0;
  if (j < t.vecs) {
    const T* xn = x + size_t(blockIdx.x) * t.rows * t.channels + j * V;
#pragma unroll 4
    for (uint32_t r = row; r < t.rows; r += t.rowsPerBlock) {
      PackN<T, V> v = loadPack<V>(xn + size_t(r) * t.channels);
#pragma unroll
      for (int q = 0; q < V; ++q) acc[q] += toFloat(v.e[q]);
    }
  }
#pragma unroll
  for (int q = 0; q < V; ++q) tree[threadIdx.x * V + q] = acc[q];
  __syncthreads();
  for (uint32_t h = t.rowHalf; h > 0; h >>= 1) {
    if (row < h && row + h < t.rowsPerBlock) {
      uint32_t other = (threadIdx.x + h * t.cols) * V;
#pragma unroll
      for (int q = 0; q < V; ++q) tree[threadIdx.x * V + q] += tree[other + q];
    }
    __syncthreads();
  }
  if (row == 0 && j < t.vecs) {
    float out[V];
#pragma unroll
    for (int q = 0; q < V; ++q) out[q] = float(tree[threadIdx.x * V + q] / double(t.rows));
    storeVec<V>(y + size_t(blockIdx.x) * t.channels + j * V, out);
  }
}

/// GlobalAveragePoolBwd, a thread per dX vector: dY[n, c] / (H * W).
template <typename T, int V>
__global__ void globalAvgBwdNhwcKernel(FastDiv vecs, FastDiv positions, uint32_t c, float vol,
                                       const T* dy, T* dx, uint32_t total) {
  HGP_FLAT_LOOP(uint32_t, i, total) {
    int row = vecs(int(i)), n = positions(row);
    uint32_t j = i - uint32_t(row) * vecs.d;
    PackN<T, V> d = loadPack<V>(dy + uint32_t(n) * c + j * V);
    float v[V];
#pragma unroll
    for (int q = 0; q < V; ++q) v[q] = toFloat(d.e[q]) / vol;
    storeVec<V>(dx + size_t(i) * V, v);
  }
}

/// The geometry of a 2-D NHWC pooling from x to y (both [N, H, W, C], read through their NCHW
/// shapes), which must be non-empty and below 2^31 elements.
Status readNhwcGeometry(const CudaArgs& a, const Shape& x, const Shape& y, PoolGeometry& g) {
  if (x.size() != 4 || y.size() != 4)
    return a.fail("layout=nhwc pools rank-4 [N, H, W, C] tensors only, got " + shapeToString(x) +
                  " -> " + shapeToString(y));
  if (numElements(x) == 0 || numElements(y) == 0) return a.fail("layout=nhwc with an empty tensor");
  if (numElements(x) >= (int64_t(1) << 31) || numElements(y) >= (int64_t(1) << 31))
    return a.fail("layout=nhwc pooling of 2^31 elements or more");
  return readPoolGeometry(a, channelsFirstShape(x), channelsFirstShape(y), g);
}

/// Launches maxPoolNhwcKernel over the outputs of g, with loads first for 3x3 and 2x2 windows.
template <typename T, int V, typename Out>
Status launchMaxNhwcAs(const CudaArgs& a, const PoolGeometry& g, int64_t c, const T* x, Out* out) {
  uint32_t total = uint32_t(g.planes / c * g.outVol() * (c / V));
  FlatLaunch l = flatLaunch(a, total);
  NhwcIndex ix = nhwcIndex(c / V, g.out[1], g.out[2]);
  bool planar = g.k[0] == 1;
  if (planar && g.k[1] == 3 && g.k[2] == 3)
    maxPoolNhwcKernel<T, V, 3, 3><<<l.grid, l.threads, 0, a.stream>>>(g, ix, uint32_t(c), x, out,
                                                                      total);
  else if (planar && g.k[1] == 2 && g.k[2] == 2)
    maxPoolNhwcKernel<T, V, 2, 2><<<l.grid, l.threads, 0, a.stream>>>(g, ix, uint32_t(c), x, out,
                                                                      total);
  else
    maxPoolNhwcKernel<T, V, 0, 0><<<l.grid, l.threads, 0, a.stream>>>(g, ix, uint32_t(c), x, out,
                                                                      total);
  return checkLaunch(a, "maxPoolNhwcKernel");
}

/// Calls fn(std::integral_constant<int, V>{}) for the access width V of `width`.
template <typename T, typename Fn> Status dispatchWidth(int width, Fn&& fn) {
  if (width == kVec<T>) return fn(std::integral_constant<int, kVec<T>>{});
  if (width == 4) return fn(std::integral_constant<int, 4>{});
  return fn(std::integral_constant<int, 1>{});
}

template <typename T> Status maxPoolNhwc(CudaArgs& a) {
  const Shape& x = *a.in[0].shape;
  PoolGeometry g;
  HGP_TRY(readNhwcGeometry(a, x, *a.out[0].shape, g));
  return dispatchWidth<T>(vectorWidth<T>(x[3], {a.in[0].data, a.out[0].data}), [&](auto v) {
    return launchMaxNhwcAs<T, decltype(v)::value>(a, g, x[3], a.in[0].as<T>(), a.out[0].as<T>());
  });
}

/// MaxPoolBwd in NHWC: the argmaxes as window offsets (a byte each, two bytes for windows of 255
/// elements or more) in the step's scratch, then the gather.
template <typename T, typename A> Status maxPoolBwdNhwcWith(CudaArgs& a, const PoolGeometry& g) {
  const Shape& x = *a.in[1].shape;
  int64_t c = x[3];
  A* arg;
  HGP_TRY(stepScratch(a, size_t(a.in[0].numel()) * sizeof(A), arg));
  bool undilated = g.dilation[1] == 1 && g.dilation[2] == 1;
  const void* ps[] = {a.in[0].data, a.in[1].data, a.out[0].data};
  return dispatchWidth<T>(vectorWidth<T>(c, {ps[0], ps[1], ps[2]}), [&](auto v) {
    constexpr int V = decltype(v)::value;
    HGP_TRY((launchMaxNhwcAs<T, V>(a, g, c, a.in[1].as<T>(), arg)));
    uint32_t total = uint32_t(a.in[1].numel() / V);
    FlatLaunch l = flatLaunch(a, total);
    NhwcIndex ix = nhwcIndex(c / V, g.in[1], g.in[2]);
    if (undilated && g.stride[1] == 2 && g.stride[2] == 2)
      maxPoolBwdNhwcKernel<T, V, A, 2><<<l.grid, l.threads, 0, a.stream>>>(
          g, ix, uint32_t(c), a.in[0].as<T>(), arg, a.out[0].as<T>(), undilated, total);
    else
      maxPoolBwdNhwcKernel<T, V, A, 0><<<l.grid, l.threads, 0, a.stream>>>(
          g, ix, uint32_t(c), a.in[0].as<T>(), arg, a.out[0].as<T>(), undilated, total);
    return checkLaunch(a, "maxPoolBwdNhwcKernel");
  });
}

template <typename T> Status maxPoolBwdNhwc(CudaArgs& a) {
  PoolGeometry g;
  HGP_TRY(readNhwcGeometry(a, *a.in[1].shape, *a.in[0].shape, g));
  HGP_TRY(checkShape(a, a.out[0], *a.in[1].shape, "dX"));
  if (g.windowVol() < 255) return maxPoolBwdNhwcWith<T, uint8_t>(a, g);
  if (g.windowVol() < 65535) return maxPoolBwdNhwcWith<T, uint16_t>(a, g);
  return a.fail("layout=nhwc MaxPoolBwd supports windows of fewer than 65535 elements");
}

template <typename T> Status avgPoolNhwc(CudaArgs& a) {
  const Shape& x = *a.in[0].shape;
  PoolGeometry g;
  HGP_TRY(readNhwcGeometry(a, x, *a.out[0].shape, g));
  for (int d : g.dilation)
    if (d != 1) return a.fail("AveragePool with dilations is not supported");
  int64_t c = x[3];
  return dispatchWidth<T>(vectorWidth<T>(c, {a.in[0].data, a.out[0].data}), [&](auto v) {
    constexpr int V = decltype(v)::value;
    uint32_t total = uint32_t(a.out[0].numel() / V);
    FlatLaunch l = flatLaunch(a, total);
    avgPoolNhwcKernel<T, V><<<l.grid, l.threads, 0, a.stream>>>(
        g, nhwcIndex(c / V, g.out[1], g.out[2]), uint32_t(c), a.in[0].as<T>(), a.out[0].as<T>(),
        total);
    return checkLaunch(a, "avgPoolNhwcKernel");
  });
}

/// AveragePoolBwd in NHWC; x_shape is the NCHW shape, as the op's attributes do not depend on
/// the layout.
template <typename T> Status avgPoolBwdNhwc(CudaArgs& a, const Shape& xNchw) {
  if (xNchw.size() != 4) return a.fail("layout=nhwc pools rank-4 tensors only");
  HGP_TRY(checkShape(a, a.out[0], channelsLastShape(xNchw), "dX"));
  PoolGeometry g;
  HGP_TRY(readNhwcGeometry(a, *a.out[0].shape, *a.in[0].shape, g));
  for (int d : g.dilation)
    if (d != 1) return a.fail("AveragePool with dilations is not supported");
  int64_t c = xNchw[1];
  return dispatchWidth<T>(vectorWidth<T>(c, {a.in[0].data, a.out[0].data}), [&](auto v) {
    constexpr int V = decltype(v)::value;
    uint32_t total = uint32_t(a.out[0].numel() / V);
    FlatLaunch l = flatLaunch(a, total);
    avgPoolBwdNhwcKernel<T, V><<<l.grid, l.threads, 0, a.stream>>>(
        g, nhwcIndex(c / V, g.in[1], g.in[2]), uint32_t(c), a.in[0].as<T>(), a.out[0].as<T>(),
        total);
    return checkLaunch(a, "avgPoolBwdNhwcKernel");
  });
}

template <typename T> Status globalAvgNhwc(CudaArgs& a) {
  const Shape& x = *a.in[0].shape;
  if (x.size() != 4 || a.in[0].numel() == 0)
    return a.fail("layout=nhwc needs a non-empty rank-4 X [N, H, W, C], got " + shapeToString(x));
  HGP_TRY(checkShape(a, a.out[0], {x[0], 1, 1, x[3]}, "Y"));
  if (a.in[0].numel() >= (int64_t(1) << 31)) return a.fail("more than 2^31 elements");
  if (x[0] > 0x7fffffff) return a.fail("too many images");
  return dispatchWidth<T>(vectorWidth<T>(x[3], {a.in[0].data, a.out[0].data}), [&](auto v) {
    constexpr int V = decltype(v)::value;
    NhwcTiling t = nhwcTiling(x[1] * x[2], x[3], V);
    if (t.tiles > 65535) return a.fail("too many channels for one grid");
    globalAvgNhwcKernel<T, V><<<dim3(unsigned(x[0]), t.tiles), t.threads(), 0, a.stream>>>(
        t, a.in[0].as<T>(), a.out[0].as<T>());
    return checkLaunch(a, "globalAvgNhwcKernel");
  });
}

/// GlobalAveragePoolBwd in NHWC; x_shape is the NCHW shape.
template <typename T> Status globalAvgBwdNhwc(CudaArgs& a, const Shape& xNchw) {
  if (xNchw.size() != 4) return a.fail("layout=nhwc pools rank-4 tensors only");
  Shape x = channelsLastShape(xNchw);
  HGP_TRY(checkShape(a, a.out[0], x, "dX"));
  HGP_TRY(checkShape(a, a.in[0], {x[0], 1, 1, x[3]}, "dY"));
  int64_t total = numElements(x);
  if (total == 0) return a.fail("layout=nhwc with an empty tensor");
  if (total >= (int64_t(1) << 31)) return a.fail("more than 2^31 elements");
  int64_t c = x[3];
  return dispatchWidth<T>(vectorWidth<T>(c, {a.in[0].data, a.out[0].data}), [&](auto v) {
    constexpr int V = decltype(v)::value;
    FlatLaunch l = flatLaunch(a, total / V);
    globalAvgBwdNhwcKernel<T, V><<<l.grid, l.threads, 0, a.stream>>>(
        FastDiv(uint32_t(c / V)), FastDiv(uint32_t(x[1] * x[2])), uint32_t(c),
        float(x[1] * x[2]), a.in[0].as<T>(), a.out[0].as<T>(), uint32_t(total / V));
    return checkLaunch(a, "globalAvgBwdNhwcKernel");
  });
}

} // namespace

Status execMaxPool(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkFloatOperands(a));
  bool nhwc = false;
  HGP_TRY(readLayout(a, nhwc));
  if (nhwc)
    return dispatchFloat(a, a.in[0].dtype, [&](auto t) { return maxPoolNhwc<decltype(t)>(a); });
  PoolGeometry g;
  HGP_TRY(readPoolGeometry(a, *a.in[0].shape, *a.out[0].shape, g));
  FlatLaunch l = flatLaunch(a, g.planes * g.outVol());
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) {
    using T = decltype(t);
    HGP_WINDOW_DISPATCH(T, g, maxPoolKernel, l, a.stream, g, a.in[0].as<T>(), a.out[0].as<T>());
    return checkLaunch(a, "maxPoolKernel");
  });
}

template <int KH, int KW, int S, typename T>
Status launchPlaneBwd(CudaArgs& a, const PoolGeometry& g, size_t smem) {
  // Once per process (in the first, eager run): allow more than the default 48 KiB.
  static const cudaError_t allowed = cudaFuncSetAttribute(
      maxPoolBwdPlaneKernel<KH, KW, S, T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      int(kPlaneSmemLimit));
  HGP_CUDA_TRY(allowed);
  // A thread per element of the plane, up to 512; small planes get small blocks, many per SM.
  int threads = std::min(512, std::max(64, (g.inVol() + 31) / 32 * 32));
  unsigned grid = unsigned(std::min<int64_t>(g.planes, int64_t(smCount(a)) * (4096 / threads)));
  maxPoolBwdPlaneKernel<KH, KW, S, T><<<grid, threads, smem, a.stream>>>(
      g, FastDiv(uint32_t(g.in[2])), FastDiv(uint32_t(g.out[2])), a.in[0].as<T>(), a.in[1].as<T>(),
      a.out[0].as<T>());
  return checkLaunch(a, "maxPoolBwdPlaneKernel");
}

template <typename T> Status maxPoolBwd(CudaArgs& a) {
  HGP_TRY(checkFloatOperands(a));
  PoolGeometry g;
  HGP_TRY(readPoolGeometry(a, *a.in[1].shape, *a.in[0].shape, g));
  HGP_TRY(checkShape(a, a.out[0], *a.in[1].shape, "dX"));
  bool undilated = g.dilation[0] == 1 && g.dilation[1] == 1 && g.dilation[2] == 1;
  bool planar = g.k[0] == 1 && g.in[0] == 1 && g.out[0] == 1 && undilated &&
                g.stride[1] == g.stride[2] && (g.stride[1] == 1 || g.stride[1] == 2);
  size_t smem = size_t(g.inVol()) * sizeof(float) + size_t(g.outVol());
  if (planar && smem <= kPlaneSmemLimit) {
    bool s1 = g.stride[1] == 1;
    if (g.k[1] == 3 && g.k[2] == 3)
      return s1 ? launchPlaneBwd<3, 3, 1, T>(a, g, smem) : launchPlaneBwd<3, 3, 2, T>(a, g, smem);
    if (g.k[1] == 2 && g.k[2] == 2)
      return s1 ? launchPlaneBwd<2, 2, 1, T>(a, g, smem) : launchPlaneBwd<2, 2, 2, T>(a, g, smem);
  }
  uint8_t* arg = nullptr;
  if (g.windowVol() < 255) {
    // A byte per output in the step's scratch: the argmaxes, computed once.
    HGP_TRY(stepScratch(a, size_t(g.planes * g.outVol()), arg));
    FlatLaunch l = flatLaunch(a, g.planes * g.outVol());
    HGP_WINDOW_DISPATCH(T, g, maxArgKernel, l, a.stream, g, a.in[1].as<T>(), arg);
    HGP_TRY(checkLaunch(a, "maxArgKernel"));
  }
  FlatLaunch l = flatLaunch(a, g.planes * g.inVol());
  HGP_FLAT_DISPATCH(T, maxPoolBwdKernel, l, a.stream, g, a.in[0].as<T>(), a.in[1].as<T>(), arg,
                    a.out[0].as<T>(), undilated);
  return checkLaunch(a, "maxPoolBwdKernel");
}

Status execMaxPoolBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  HGP_TRY(checkFloatOperands(a));
  bool nhwc = false;
  HGP_TRY(readLayout(a, nhwc));
  if (nhwc)
    return dispatchFloat(a, a.in[0].dtype, [&](auto t) { return maxPoolBwdNhwc<decltype(t)>(a); });
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) { return maxPoolBwd<decltype(t)>(a); });
}

Status execAveragePool(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkFloatOperands(a));
  bool nhwc = false;
  HGP_TRY(readLayout(a, nhwc));
  if (nhwc)
    return dispatchFloat(a, a.in[0].dtype, [&](auto t) { return avgPoolNhwc<decltype(t)>(a); });
  PoolGeometry g;
  HGP_TRY(readPoolGeometry(a, *a.in[0].shape, *a.out[0].shape, g));
  for (int d : g.dilation)
    if (d != 1) return a.fail("AveragePool with dilations is not supported");
  FlatLaunch l = flatLaunch(a, g.planes * g.outVol());
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) {
    using T = decltype(t);
    HGP_FLAT_DISPATCH(T, avgPoolKernel, l, a.stream, g, a.in[0].as<T>(), a.out[0].as<T>());
    return checkLaunch(a, "avgPoolKernel");
  });
}

Status execAveragePoolBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkFloatOperands(a));
  std::vector<int64_t> xShape;
  HGP_TRY(readInts(a, "x_shape", a.out[0].shape->size(), xShape));
  bool nhwc = false;
  HGP_TRY(readLayout(a, nhwc));
  if (nhwc)
    return dispatchFloat(a, a.in[0].dtype,
                         [&](auto t) { return avgPoolBwdNhwc<decltype(t)>(a, xShape); });
  HGP_TRY(checkShape(a, a.out[0], xShape, "dX"));
  PoolGeometry g;
  HGP_TRY(readPoolGeometry(a, xShape, *a.in[0].shape, g));
  for (int d : g.dilation)
    if (d != 1) return a.fail("AveragePool with dilations is not supported");
  FlatLaunch l = flatLaunch(a, g.planes * g.inVol());
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) {
    using T = decltype(t);
    HGP_FLAT_DISPATCH(T, avgPoolBwdKernel, l, a.stream, g, a.in[0].as<T>(), a.out[0].as<T>());
    return checkLaunch(a, "avgPoolBwdKernel");
  });
}

Status execGlobalAveragePool(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkFloatOperands(a));
  bool nhwc = false;
  HGP_TRY(readLayout(a, nhwc));
  if (nhwc)
    return dispatchFloat(a, a.in[0].dtype, [&](auto t) { return globalAvgNhwc<decltype(t)>(a); });
  const Shape& x = *a.in[0].shape;
  if (x.size() < 3) return a.fail("GlobalAveragePool needs rank 3 or more");
  Shape y = x;
  for (size_t i = 2; i < y.size(); ++i) y[i] = 1;
  HGP_TRY(checkShape(a, a.out[0], y, "Y"));
  int64_t planes = x[0] * x[1], vol = a.in[0].numel() / planes;
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) {
    using T = decltype(t);
    if (vol >= 8192)
      globalAvgBlockKernel<<<blocksFor(a, planes * kBlock), kBlock, 0, a.stream>>>(
          a.in[0].as<T>(), a.out[0].as<T>(), planes, vol);
    else
      globalAvgWarpKernel<<<blocksFor(a, planes * 32), kBlock, 0, a.stream>>>(
          a.in[0].as<T>(), a.out[0].as<T>(), planes, vol);
    return checkLaunch(a, "globalAvgKernel");
  });
}

Status execGlobalAveragePoolBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkFloatOperands(a));
  std::vector<int64_t> x;
  HGP_TRY(readInts(a, "x_shape", a.out[0].shape->size(), x));
  bool nhwc = false;
  HGP_TRY(readLayout(a, nhwc));
  if (nhwc)
    return dispatchFloat(a, a.in[0].dtype,
                         [&](auto t) { return globalAvgBwdNhwc<decltype(t)>(a, x); });
  HGP_TRY(checkShape(a, a.out[0], x, "dX"));
  if (x.size() < 3) return a.fail("GlobalAveragePoolBwd needs rank 3 or more");
  Shape y = x;
  for (size_t i = 2; i < y.size(); ++i) y[i] = 1;
  HGP_TRY(checkShape(a, a.in[0], y, "dY"));
  int64_t planes = x[0] * x[1], total = numElements(x), vol = total / planes;
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) {
    using T = decltype(t);
    globalAvgBwdKernel<<<blocksFor(a, total), kBlock, 0, a.stream>>>(a.in[0].as<T>(),
                                                                     a.out[0].as<T>(), total, vol);
    return checkLaunch(a, "globalAvgBwdKernel");
  });
}

} // namespace hgp::cuda
