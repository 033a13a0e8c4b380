// CUDA executors for max, average and global average pooling and their gradients (PoolOps.cpp
// on the CPU), for 1-D, 2-D and 3-D windows (lower ranks get leading unit dims).
//
// The forward ops run a thread per output. The gradients are gathers, a thread per input
// element, so they need no atomics: an input element visits the outputs whose windows cover it
// in row-major order and adds their shares starting from zero, which is the order in which the
// CPU reference accumulates them, so results agree bit for bit. MaxPoolBwd first stores each
// window's argmax (first maximum in row-major window order; padding never wins; a NaN wins and
// stays) as a byte in the step's scratch, then takes dY only where the argmax is this element;
// windows of 255 elements or more recompute the argmax of each covering window instead.
#include "runtime/cuda/DeviceUtil.cuh"
#include "runtime/plan/Window.h"

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

/// A block per row of `width` elements: 32 to 256 threads, about 16 waves of blocks at most.
struct RowLaunch {
  unsigned grid, threads;
  int64_t rows;
};

RowLaunch rowLaunch(const CudaArgs& a, int64_t rows, int width) {
  int threads = std::min(kBlock, std::max(32, (width + 31) / 32 * 32));
  int64_t cap = int64_t(smCount(a)) * 16 * (2048 / threads) / 8;
  return {unsigned(std::max<int64_t>(1, std::min(rows, cap))), unsigned(threads), rows};
}

Status checkF32Operands(const CudaArgs& a) {
  for (const auto& v : a.in) HGP_TRY(checkF32(a, v, "operand"));
  return checkF32(a, a.out[0], "result");
}

/// The argmax of output position (od, oh, ow) within one plane, as an index into the plane and
/// as an offset in row-major window order; -1 for an empty window.
__device__ int maxIndex(const PoolGeometry& g, const float* x, int od, int oh, int ow,
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
      const float* row = x + rowIdx;
      for (int kw0 = 0; kw0 < g.k[2]; kw0 += 4) {
        // Four loads from always-valid addresses first, so they are in flight together.
        float v[4];
        bool ok[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          int iw = iw0 + (kw0 + j) * g.dilation[2];
          ok[j] = kw0 + j < g.k[2] && iw >= 0 && iw < g.in[2];
          v[j] = __ldg(row + (ok[j] ? iw : 0));
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

/// The kernels below run a block per row (plane, d, h) of their result's index space and a thread
/// per position w along it: the row's decomposition and its d and h window ranges are uniform
/// over the block, which keeps per-thread integer division to the w dim.
struct Row {
  int64_t p; ///< The plane.
  int d, h;
};

__device__ __forceinline__ Row rowOf(int64_t r, int dims0, int dims1) {
  int64_t per = int64_t(dims0) * dims1;
  int64_t p = r / per;
  int rest = int(r - p * per);
  return {p, rest / dims1, rest % dims1};
}

#define HGP_ROW_LOOP(r, rows) for (int64_t r = blockIdx.x; r < (rows); r += gridDim.x)

/// maxIndex for a 2-D window of compile-time size KH x KW (k[0] == 1): every load is issued
/// before the comparisons, which run in window order.
template <int KH, int KW>
__device__ __forceinline__ int maxIndex2d(const PoolGeometry& g, const float* x, int oh, int ow,
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
      v[kh * KW + kw] = __ldg(x + (in ? ih * g.in[2] + iw : 0));
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
template <int KH, int KW>
__device__ __forceinline__ int windowMax(const PoolGeometry& g, const float* x, int od, int oh,
                                         int ow, int* windowOffset = nullptr) {
  if constexpr (KH > 0)
    return maxIndex2d<KH, KW>(g, x, oh, ow, windowOffset);
  else
    return maxIndex(g, x, od, oh, ow, windowOffset);
}

template <int KH, int KW>
__global__ void maxPoolKernel(PoolGeometry g, const float* x, float* y, int64_t rows) {
  HGP_ROW_LOOP(r, rows) {
    Row q = rowOf(r, g.out[0], g.out[1]);
    const float* xp = x + q.p * g.inVol();
    for (int ow = threadIdx.x; ow < g.out[2]; ow += blockDim.x) {
      int idx = windowMax<KH, KW>(g, xp, q.d, q.h, ow);
      y[r * g.out[2] + ow] = idx < 0 ? -INFINITY : xp[idx];
    }
  }
}

/// MaxPoolBwd, pass 1: each output's argmax as its offset in window order (255: empty).
template <int KH, int KW>
__global__ void maxArgKernel(PoolGeometry g, const float* x, uint8_t* arg, int64_t rows) {
  HGP_ROW_LOOP(r, rows) {
    Row q = rowOf(r, g.out[0], g.out[1]);
    const float* xp = x + q.p * g.inVol();
    for (int ow = threadIdx.x; ow < g.out[2]; ow += blockDim.x) {
      int offset;
      windowMax<KH, KW>(g, xp, q.d, q.h, ow, &offset);
      arg[r * g.out[2] + ow] = offset < 0 ? uint8_t(255) : uint8_t(offset);
    }
  }
}

/// Launches kernel<KH, KW> for the common 2-D windows (2x2, 3x3) and kernel<0, 0> otherwise.
#define HGP_WINDOW_DISPATCH(g, kernel, grid, threads, stream, ...)                                 \
  do {                                                                                             \
    if ((g).k[0] == 1 && (g).k[1] == 3 && (g).k[2] == 3)                                           \
      kernel<3, 3><<<grid, threads, 0, stream>>>(__VA_ARGS__);                                     \
    else if ((g).k[0] == 1 && (g).k[1] == 2 && (g).k[2] == 2)                                      \
      kernel<2, 2><<<grid, threads, 0, stream>>>(__VA_ARGS__);                                     \
    else                                                                                           \
      kernel<0, 0><<<grid, threads, 0, stream>>>(__VA_ARGS__);                                     \
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

/// MaxPoolBwd, pass 2: each input element sums dY over the windows whose argmax it is, in
/// row-major output order. With arg == nullptr (windows of 255 elements or more) each covering
/// window's argmax is recomputed instead.
__global__ void maxPoolBwdKernel(PoolGeometry g, const float* dy, const float* x,
                                 const uint8_t* arg, float* dx, int64_t rows, bool undilated) {
  int inVol = g.inVol(), outVol = g.outVol();
  HGP_ROW_LOOP(r, rows) {
    Row q = rowOf(r, g.in[0], g.in[1]);
    const float* dyp = dy + q.p * outVol;
    if (arg && undilated) {
      const uint8_t* ap = arg + q.p * outVol;
      int lo0, hi0, lo1, hi1;
      coveringRange(g, 0, q.d, lo0, hi0);
      coveringRange(g, 1, q.h, lo1, hi1);
      // A thread per stride cell c along w: inputs iw = c*s + j - pad (j < s) are covered by
      // the windows ow in [c + 1 - ceil((K - j) / s), c], with no per-element division.
      int sw = g.stride[2], kw = g.k[2], pw = g.padBegin[2];
      int back0 = (kw + sw - 1) / sw, m = (back0 - 1) * sw;
      int c0 = pw / sw, c1 = (g.in[2] - 1 + pw) / sw;
      for (int c = c0 + int(threadIdx.x); c <= c1; c += blockDim.x) {
        for (int j = 0; j < sw; ++j) {
          int iw = c * sw + j - pw;
          if (iw < 0 || iw >= g.in[2]) continue;
          int lo2 = max(c + 1 - (kw - j > m ? back0 : back0 - 1), 0), hi2 = min(c, g.out[2] - 1);
          float acc = 0.f;
          for (int od = lo0; od <= hi0; ++od) {
            int kd = q.d + g.padBegin[0] - od * g.stride[0];
            for (int oh = lo1; oh <= hi1; ++oh) {
              int kdh = kd * g.k[1] + q.h + g.padBegin[1] - oh * g.stride[1];
              int o = (od * g.out[1] + oh) * g.out[2] + lo2;
              int k = kdh * kw + (c - lo2) * sw + j;
              for (int ow = lo2; ow <= hi2; ++ow, ++o, k -= sw) {
                int av = ap[o];
                float dv = dyp[o];
                acc = av == k ? __fadd_rn(acc, dv) : acc;
              }
            }
          }
          dx[r * g.in[2] + iw] = acc;
        }
      }
    } else {
      const float* xp = x + q.p * inVol;
      const uint8_t* ap = arg ? arg + q.p * outVol : nullptr;
      for (int iw = threadIdx.x; iw < g.in[2]; iw += blockDim.x) {
        int idx = (q.d * g.in[1] + q.h) * g.in[2] + iw;
        float acc = 0.f;
        maxCovering(g, 0, q.d, [&](int od, int kd) {
          maxCovering(g, 1, q.h, [&](int oh, int kh) {
            maxCovering(g, 2, iw, [&](int ow, int kw) {
              int o = (od * g.out[1] + oh) * g.out[2] + ow;
              bool mine = ap ? ap[o] == (kd * g.k[1] + kh) * g.k[2] + kw
                             : maxIndex(g, xp, od, oh, ow) == idx;
              if (mine) acc = __fadd_rn(acc, dyp[o]);
            });
          });
        });
        dx[r * g.in[2] + iw] = acc;
      }
    }
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

__global__ void avgPoolKernel(PoolGeometry g, const float* x, float* y, int64_t rows) {
  HGP_ROW_LOOP(r, rows) {
    Row q = rowOf(r, g.out[0], g.out[1]);
    const float* xp = x + q.p * g.inVol();
    for (int ow = threadIdx.x; ow < g.out[2]; ow += blockDim.x) {
      AvgSpan s[3];
      int64_t divisor = avgWindow(g, q.d, q.h, ow, s);
      double sum = 0;
      for (int id = s[0].lo; id < s[0].hi; ++id)
        for (int ih = s[1].lo; ih < s[1].hi; ++ih)
          for (int iw = s[2].lo; iw < s[2].hi; ++iw) sum += xp[(id * g.in[1] + ih) * g.in[2] + iw];
      y[r * g.out[2] + ow] = divisor ? float(sum / double(divisor)) : 0.f;
    }
  }
}

__global__ void avgPoolBwdKernel(PoolGeometry g, const float* dy, float* dx, int64_t rows) {
  HGP_ROW_LOOP(r, rows) {
    Row q = rowOf(r, g.in[0], g.in[1]);
    const float* dyp = dy + q.p * g.outVol();
    int lo0, hi0, lo1, hi1;
    coveringRange(g, 0, q.d, lo0, hi0);
    coveringRange(g, 1, q.h, lo1, hi1);
    for (int iw = threadIdx.x; iw < g.in[2]; iw += blockDim.x) {
      int lo2, hi2;
      coveringRange(g, 2, iw, lo2, hi2);
      float acc = 0.f;
      for (int od = lo0; od <= hi0; ++od)
        for (int oh = lo1; oh <= hi1; ++oh)
          for (int ow = lo2; ow <= hi2; ++ow) {
            AvgSpan s[3];
            int64_t divisor = avgWindow(g, od, oh, ow, s);
            if (!divisor) continue;
            acc = __fadd_rn(acc, dyp[(od * g.out[1] + oh) * g.out[2] + ow] / float(divisor));
          }
      dx[r * g.in[2] + iw] = acc;
    }
  }
}

/// A warp per plane: the mean of vol elements, summed in double.
__global__ void globalAvgWarpKernel(const float* x, float* y, int64_t planes, int64_t vol) {
  int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) >> 5;
  int lane = int(threadIdx.x & 31);
  int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  for (int64_t p = warp; p < planes; p += warps) {
    const float* xp = x + p * vol;
    double sum = 0;
    for (int64_t i = lane; i < vol; i += 32) sum += xp[i];
    sum = warpSum(sum);
    if (lane == 0) y[p] = float(sum / double(vol));
  }
}

/// A block per plane, for large planes.
__global__ void globalAvgBlockKernel(const float* x, float* y, int64_t planes, int64_t vol) {
  __shared__ double scratch[32];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const float* xp = x + p * vol;
    double sum = 0;
    for (int64_t i = threadIdx.x; i < vol; i += blockDim.x) sum += xp[i];
    sum = blockSum(sum, scratch);
    if (threadIdx.x == 0) y[p] = float(sum / double(vol));
  }
}

__global__ void globalAvgBwdKernel(const float* dy, float* dx, int64_t total, int64_t vol) {
  HGP_GRID_LOOP(i, total) dx[i] = dy[i / vol] / float(vol);
}

} // namespace

Status execMaxPool(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32Operands(a));
  PoolGeometry g;
  HGP_TRY(readPoolGeometry(a, *a.in[0].shape, *a.out[0].shape, g));
  RowLaunch l = rowLaunch(a, g.planes * g.out[0] * g.out[1], g.out[2]);
  HGP_WINDOW_DISPATCH(g, maxPoolKernel, l.grid, l.threads, a.stream, g, a.in[0].f32(),
                      a.out[0].f32(), l.rows);
  return checkLaunch(a, "maxPoolKernel");
}

Status execMaxPoolBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  HGP_TRY(checkF32Operands(a));
  PoolGeometry g;
  HGP_TRY(readPoolGeometry(a, *a.in[1].shape, *a.in[0].shape, g));
  HGP_TRY(checkShape(a, a.out[0], *a.in[1].shape, "dX"));
  uint8_t* arg = nullptr;
  if (g.windowVol() < 255) {
    // A byte per output in the step's scratch: the argmaxes, computed once.
    HGP_TRY(stepScratch(a, size_t(g.planes * g.outVol()), arg));
    RowLaunch l = rowLaunch(a, g.planes * g.out[0] * g.out[1], g.out[2]);
    HGP_WINDOW_DISPATCH(g, maxArgKernel, l.grid, l.threads, a.stream, g, a.in[1].f32(), arg,
                        l.rows);
    HGP_TRY(checkLaunch(a, "maxArgKernel"));
  }
  bool undilated = g.dilation[0] == 1 && g.dilation[1] == 1 && g.dilation[2] == 1;
  RowLaunch l =
      rowLaunch(a, g.planes * g.in[0] * g.in[1],
                arg && undilated ? (g.in[2] + g.stride[2] - 1) / g.stride[2] + 1 : g.in[2]);
  maxPoolBwdKernel<<<l.grid, l.threads, 0, a.stream>>>(g, a.in[0].f32(), a.in[1].f32(), arg,
                                                       a.out[0].f32(), l.rows, undilated);
  return checkLaunch(a, "maxPoolBwdKernel");
}

Status execAveragePool(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32Operands(a));
  PoolGeometry g;
  HGP_TRY(readPoolGeometry(a, *a.in[0].shape, *a.out[0].shape, g));
  for (int d : g.dilation)
    if (d != 1) return a.fail("AveragePool with dilations is not supported");
  RowLaunch l = rowLaunch(a, g.planes * g.out[0] * g.out[1], g.out[2]);
  avgPoolKernel<<<l.grid, l.threads, 0, a.stream>>>(g, a.in[0].f32(), a.out[0].f32(), l.rows);
  return checkLaunch(a, "avgPoolKernel");
}

Status execAveragePoolBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32Operands(a));
  std::vector<int64_t> xShape;
  HGP_TRY(readInts(a, "x_shape", a.out[0].shape->size(), xShape));
  HGP_TRY(checkShape(a, a.out[0], xShape, "dX"));
  PoolGeometry g;
  HGP_TRY(readPoolGeometry(a, xShape, *a.in[0].shape, g));
  for (int d : g.dilation)
    if (d != 1) return a.fail("AveragePool with dilations is not supported");
  RowLaunch l = rowLaunch(a, g.planes * g.in[0] * g.in[1], g.in[2]);
  avgPoolBwdKernel<<<l.grid, l.threads, 0, a.stream>>>(g, a.in[0].f32(), a.out[0].f32(), l.rows);
  return checkLaunch(a, "avgPoolBwdKernel");
}

Status execGlobalAveragePool(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32Operands(a));
  const Shape& x = *a.in[0].shape;
  if (x.size() < 3) return a.fail("GlobalAveragePool needs rank 3 or more");
  Shape y = x;
  for (size_t i = 2; i < y.size(); ++i) y[i] = 1;
  HGP_TRY(checkShape(a, a.out[0], y, "Y"));
  int64_t planes = x[0] * x[1], vol = a.in[0].numel() / planes;
  if (vol >= 8192)
    globalAvgBlockKernel<<<blocksFor(a, planes * kBlock), kBlock, 0, a.stream>>>(
        a.in[0].f32(), a.out[0].f32(), planes, vol);
  else
    globalAvgWarpKernel<<<blocksFor(a, planes * 32), kBlock, 0, a.stream>>>(
        a.in[0].f32(), a.out[0].f32(), planes, vol);
  return checkLaunch(a, "globalAvgKernel");
}

Status execGlobalAveragePoolBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32Operands(a));
  std::vector<int64_t> x;
  HGP_TRY(readInts(a, "x_shape", a.out[0].shape->size(), x));
  HGP_TRY(checkShape(a, a.out[0], x, "dX"));
  if (x.size() < 3) return a.fail("GlobalAveragePoolBwd needs rank 3 or more");
  Shape y = x;
  for (size_t i = 2; i < y.size(); ++i) y[i] = 1;
  HGP_TRY(checkShape(a, a.in[0], y, "dY"));
  int64_t planes = x[0] * x[1], total = numElements(x), vol = total / planes;
  globalAvgBwdKernel<<<blocksFor(a, total), kBlock, 0, a.stream>>>(a.in[0].f32(), a.out[0].f32(),
                                                                   total, vol);
  return checkLaunch(a, "globalAvgBwdKernel");
}

} // namespace hgp::cuda
