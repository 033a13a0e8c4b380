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
// Channels-last (layout="nhwc"): the dispatchers below hand those ops to NhwcPoolOps.cu;
// PoolKernels.cuh holds the geometry and window arithmetic both layouts share.
#include "runtime/cuda/PoolKernels.cuh"
#include "runtime/plan/PoolWindow.h"

#include <type_traits>

namespace hgp::cuda {

namespace pool {

/// Reads the window attributes and checks that y is the pooled shape of x (PoolWindow.h), and
/// that the geometry fits the kernels' 32-bit index arithmetic.
Status readPoolGeometry(const CudaArgs& a, const Shape& x, const Shape& y, PoolGeometry& g) {
  Expected<PoolWindow> w = readPoolWindow(a.attrs(), x, y);
  if (!w) return a.fail(w.status().message());
  int64_t inVol = w->in[0] * w->in[1] * w->in[2], outVol = w->out[0] * w->out[1] * w->out[2];
  if (inVol >= (int64_t(1) << 31) || outVol >= (int64_t(1) << 31))
    return a.fail("a pooling plane has 2^31 elements or more");
  g = PoolGeometry();
  g.planes = w->planes;
  g.countIncludePad = w->countIncludePad;
  for (int i = 0; i < 3; ++i) {
    if (w->kernel[i] * w->dilation[i] >= (int64_t(1) << 30) || w->stride[i] >= (int64_t(1) << 30) ||
        w->padBegin[i] >= (int64_t(1) << 30) || w->padEnd[i] >= (int64_t(1) << 30))
      return a.fail("pooling window attributes are out of range");
    g.in[i] = int(w->in[i]);
    g.out[i] = int(w->out[i]);
    g.k[i] = int(w->kernel[i]);
    g.stride[i] = int(w->stride[i]);
    g.padBegin[i] = int(w->padBegin[i]);
    g.padEnd[i] = int(w->padEnd[i]);
    g.dilation[i] = int(w->dilation[i]);
  }
  return Status::ok();
}

} // namespace pool

namespace {

using namespace pool;

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

} // namespace

Status execMaxPool(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkFloatOperands(a));
  bool nhwc = false;
  HGP_TRY(readLayout(a, nhwc));
  if (nhwc)
    return maxPoolNhwc(a);
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
    return maxPoolBwdNhwc(a);
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) { return maxPoolBwd<decltype(t)>(a); });
}

Status execAveragePool(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkFloatOperands(a));
  bool nhwc = false;
  HGP_TRY(readLayout(a, nhwc));
  if (nhwc)
    return avgPoolNhwc(a);
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
    return avgPoolBwdNhwc(a, xShape);
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
    return globalAvgNhwc(a);
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
    return globalAvgBwdNhwc(a, x);
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
