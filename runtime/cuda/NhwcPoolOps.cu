// Channels-last (layout="nhwc") executors of the pooling ops: PoolOps.cu dispatches to them;
// PoolKernels.cuh holds the geometry and window arithmetic both layouts share.
//
// DeviceUtil.cuh defines the layout. 2-D windows over X [N, H, W, C], with the
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
#include "runtime/cuda/PoolKernels.cuh"

#include <numeric>
#include <type_traits>

namespace hgp::cuda::pool {

namespace {

// X is [N, H, W, C] and Y [N, OH, OW, C]. A thread takes one position of V consecutive channels
// (a 16-byte vector when C allows), so neighbouring threads read neighbouring memory; each
// channel of the vector follows the rules of the NCHW kernels (PoolOps.cu), in the same order.

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

/// Where position p's vector lies in a result whose pixels are `pitch` elements apart (the
/// channel count when dense; a larger tensor's when the result is a pitched view, a Concat part
/// written in place).
__device__ __forceinline__ size_t pitchedAt(const NhwcIndex& ix, const NhwcPos& p, uint32_t pitch,
                                            int V) {
  size_t pixel = (size_t(p.n) * ix.rows.d + uint32_t(p.h)) * ix.cols.d + uint32_t(p.w);
  return pixel * pitch + size_t(p.j) * V;
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
                                  uint32_t outPitch, uint32_t total) {
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
    *reinterpret_cast<decltype(o.raw)*>(out + pitchedAt(ix, p, outPitch, V)) = o.raw;
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
                                  uint32_t yPitch, uint32_t total) {
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
    storeVec<V>(y + pitchedAt(ix, p, yPitch, V), out);
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
Status launchMaxNhwcAs(const CudaArgs& a, const PoolGeometry& g, int64_t c, const T* x, Out* out,
                       int64_t outPitch) {
  uint32_t total = uint32_t(g.planes / c * g.outVol() * (c / V));
  FlatLaunch l = flatLaunch(a, total);
  NhwcIndex ix = nhwcIndex(c / V, g.out[1], g.out[2]);
  bool planar = g.k[0] == 1;
  if (planar && g.k[1] == 3 && g.k[2] == 3)
    maxPoolNhwcKernel<T, V, 3, 3><<<l.grid, l.threads, 0, a.stream>>>(g, ix, uint32_t(c), x, out,
                                                                      uint32_t(outPitch), total);
  else if (planar && g.k[1] == 2 && g.k[2] == 2)
    maxPoolNhwcKernel<T, V, 2, 2><<<l.grid, l.threads, 0, a.stream>>>(g, ix, uint32_t(c), x, out,
                                                                      uint32_t(outPitch), total);
  else
    maxPoolNhwcKernel<T, V, 0, 0><<<l.grid, l.threads, 0, a.stream>>>(g, ix, uint32_t(c), x, out,
                                                                      uint32_t(outPitch), total);
  return checkLaunch(a, "maxPoolNhwcKernel");
}

/// Calls fn(std::integral_constant<int, V>{}) for the access width V of `width`.
template <typename T, typename Fn> Status dispatchWidth(int width, Fn&& fn) {
  if (width == kVec<T>) return fn(std::integral_constant<int, kVec<T>>{});
  if (width == 4) return fn(std::integral_constant<int, 4>{});
  return fn(std::integral_constant<int, 1>{});
}

template <typename T> Status maxPoolNhwcAs(CudaArgs& a) {
  const Shape& x = *a.in[0].shape;
  PoolGeometry g;
  HGP_TRY(readNhwcGeometry(a, x, *a.out[0].shape, g));
  int64_t pitch = a.out[0].pixelPitch(); // a Concat part written in place, or x[3]
  return dispatchWidth<T>(vectorWidth<T>(std::gcd(x[3], pitch), {a.in[0].data, a.out[0].data}),
                          [&](auto v) {
    return launchMaxNhwcAs<T, decltype(v)::value>(a, g, x[3], a.in[0].as<T>(), a.out[0].as<T>(),
                                                  pitch);
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
    HGP_TRY((launchMaxNhwcAs<T, V>(a, g, c, a.in[1].as<T>(), arg, c)));
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

template <typename T> Status maxPoolBwdNhwcAs(CudaArgs& a) {
  PoolGeometry g;
  HGP_TRY(readNhwcGeometry(a, *a.in[1].shape, *a.in[0].shape, g));
  HGP_TRY(checkShape(a, a.out[0], *a.in[1].shape, "dX"));
  if (g.windowVol() < 255) return maxPoolBwdNhwcWith<T, uint8_t>(a, g);
  if (g.windowVol() < 65535) return maxPoolBwdNhwcWith<T, uint16_t>(a, g);
  return a.fail("layout=nhwc MaxPoolBwd supports windows of fewer than 65535 elements");
}

template <typename T> Status avgPoolNhwcAs(CudaArgs& a) {
  const Shape& x = *a.in[0].shape;
  PoolGeometry g;
  HGP_TRY(readNhwcGeometry(a, x, *a.out[0].shape, g));
  for (int d : g.dilation)
    if (d != 1) return a.fail("AveragePool with dilations is not supported");
  int64_t c = x[3], pitch = a.out[0].pixelPitch();
  return dispatchWidth<T>(vectorWidth<T>(std::gcd(c, pitch), {a.in[0].data, a.out[0].data}),
                          [&](auto v) {
    constexpr int V = decltype(v)::value;
    uint32_t total = uint32_t(a.out[0].numel() / V);
    FlatLaunch l = flatLaunch(a, total);
    avgPoolNhwcKernel<T, V><<<l.grid, l.threads, 0, a.stream>>>(
        g, nhwcIndex(c / V, g.out[1], g.out[2]), uint32_t(c), a.in[0].as<T>(), a.out[0].as<T>(),
        uint32_t(pitch), total);
    return checkLaunch(a, "avgPoolNhwcKernel");
  });
}

/// AveragePoolBwd in NHWC; x_shape is the NCHW shape, as the op's attributes do not depend on
/// the layout.
template <typename T> Status avgPoolBwdNhwcAs(CudaArgs& a, const Shape& xNchw) {
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

template <typename T> Status globalAvgNhwcAs(CudaArgs& a) {
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
template <typename T> Status globalAvgBwdNhwcAs(CudaArgs& a, const Shape& xNchw) {
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

Status maxPoolNhwc(CudaArgs& a) {
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) { return maxPoolNhwcAs<decltype(t)>(a); });
}

Status maxPoolBwdNhwc(CudaArgs& a) {
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) { return maxPoolBwdNhwcAs<decltype(t)>(a); });
}

Status avgPoolNhwc(CudaArgs& a) {
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) { return avgPoolNhwcAs<decltype(t)>(a); });
}

Status avgPoolBwdNhwc(CudaArgs& a, const Shape& xNchw) {
  return dispatchFloat(a, a.in[0].dtype,
                       [&](auto t) { return avgPoolBwdNhwcAs<decltype(t)>(a, xNchw); });
}

Status globalAvgNhwc(CudaArgs& a) {
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) { return globalAvgNhwcAs<decltype(t)>(a); });
}

Status globalAvgBwdNhwc(CudaArgs& a, const Shape& xNchw) {
  return dispatchFloat(a, a.in[0].dtype,
                       [&](auto t) { return globalAvgBwdNhwcAs<decltype(t)>(a, xNchw); });
}

} // namespace hgp::cuda::pool
