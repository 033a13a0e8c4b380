// CUDA executors for max, average and global average pooling and their gradients (PoolOps.cpp
// on the CPU), for 1-D, 2-D and 3-D windows (lower ranks get leading unit dims).
//
// The forward ops run a thread per output. The gradients are gathers, a thread per input
// element, so they need no atomics and no scratch: an input element visits the outputs whose
// windows cover it in row-major order and adds their shares starting from zero, which is the
// order in which the CPU reference accumulates them, so results agree bit for bit. MaxPoolBwd
// recomputes each covering window's argmax (first maximum in row-major window order; padding
// never wins; a NaN wins and stays) and takes dY only where the argmax is this element.
#include "runtime/cuda/DeviceUtil.cuh"

namespace hgp::cuda {

namespace {

struct PoolGeometry {
  int64_t planes = 0; ///< N * C.
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, padBegin[3] = {0, 0, 0}, padEnd[3] = {0, 0, 0};
  int64_t dilation[3] = {1, 1, 1};
  bool countIncludePad = false;

  __host__ __device__ int64_t inVol() const { return in[0] * in[1] * in[2]; }
  __host__ __device__ int64_t outVol() const { return out[0] * out[1] * out[2]; }
};

int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t padBegin,
                         int64_t padEnd, int64_t dilation, bool ceilMode) {
  int64_t span = in + padBegin + padEnd - dilation * (kernel - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  // The last window must start inside the input or the leading padding.
  if (ceilMode && (out - 1) * stride >= in + padBegin) --out;
  return out;
}

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
  for (size_t i = 0; i < r; ++i) {
    if (k[i] < 1 || s[i] < 1 || d[i] < 1 || p[i] < 0 || p[r + i] < 0)
      return a.fail("kernel, strides and dilations must be positive and pads non-negative");
    if (y[2 + i] != windowOutputSize(x[2 + i], k[i], s[i], p[i], p[r + i], d[i], ceil))
      return a.fail("output " + shapeToString(y) + " is not the pooled shape of " +
                    shapeToString(x));
    g.in[lead + i] = x[2 + i];
    g.out[lead + i] = y[2 + i];
    g.k[lead + i] = k[i];
    g.stride[lead + i] = s[i];
    g.padBegin[lead + i] = p[i];
    g.padEnd[lead + i] = p[r + i];
    g.dilation[lead + i] = d[i];
  }
  return Status::ok();
}

Status checkF32Operands(const CudaArgs& a) {
  for (const auto& v : a.in) HGP_TRY(checkF32(a, v, "operand"));
  return checkF32(a, a.out[0], "result");
}

/// The argmax of output position (od, oh, ow) within one plane, or -1 for an empty window.
__device__ int64_t maxIndex(const PoolGeometry& g, const float* x, int64_t od, int64_t oh,
                            int64_t ow) {
  int64_t best = -1;
  float bestVal = 0.f;
  for (int64_t kd = 0; kd < g.k[0]; ++kd) {
    int64_t id = od * g.stride[0] - g.padBegin[0] + kd * g.dilation[0];
    if (id < 0 || id >= g.in[0]) continue;
    for (int64_t kh = 0; kh < g.k[1]; ++kh) {
      int64_t ih = oh * g.stride[1] - g.padBegin[1] + kh * g.dilation[1];
      if (ih < 0 || ih >= g.in[1]) continue;
      for (int64_t kw = 0; kw < g.k[2]; ++kw) {
        int64_t iw = ow * g.stride[2] - g.padBegin[2] + kw * g.dilation[2];
        if (iw < 0 || iw >= g.in[2]) continue;
        int64_t idx = (id * g.in[1] + ih) * g.in[2] + iw;
        float v = x[idx];
        if (best < 0 || v > bestVal || (isnan(v) && !isnan(bestVal))) {
          best = idx;
          bestVal = v;
        }
      }
    }
  }
  return best;
}

__global__ void maxPoolKernel(PoolGeometry g, const float* x, float* y) {
  int64_t outVol = g.outVol();
  HGP_GRID_LOOP(e, g.planes * outVol) {
    int64_t p = e / outVol, o = e - p * outVol;
    int64_t ow = o % g.out[2], oh = (o / g.out[2]) % g.out[1], od = o / (g.out[2] * g.out[1]);
    const float* xp = x + p * g.inVol();
    int64_t idx = maxIndex(g, xp, od, oh, ow);
    y[e] = idx < 0 ? -INFINITY : xp[idx];
  }
}

/// Calls fn(o) for each output position of dim d whose max window reads input index i, in
/// ascending order (window offsets taken from the last to the first).
template <typename Fn>
__device__ __forceinline__ void maxCovering(const PoolGeometry& g, int d, int64_t i, Fn&& fn) {
  for (int64_t k = g.k[d] - 1; k >= 0; --k) {
    int64_t t = i + g.padBegin[d] - k * g.dilation[d];
    if (t < 0 || t % g.stride[d] != 0) continue;
    int64_t o = t / g.stride[d];
    if (o < g.out[d]) fn(o);
  }
}

__global__ void maxPoolBwdKernel(PoolGeometry g, const float* dy, const float* x, float* dx) {
  int64_t inVol = g.inVol(), outVol = g.outVol();
  HGP_GRID_LOOP(e, g.planes * inVol) {
    int64_t p = e / inVol, idx = e - p * inVol;
    int64_t iw = idx % g.in[2], ih = (idx / g.in[2]) % g.in[1], id = idx / (g.in[2] * g.in[1]);
    const float* xp = x + p * inVol;
    const float* dyp = dy + p * outVol;
    float acc = 0.f;
    maxCovering(g, 0, id, [&](int64_t od) {
      maxCovering(g, 1, ih, [&](int64_t oh) {
        maxCovering(g, 2, iw, [&](int64_t ow) {
          if (maxIndex(g, xp, od, oh, ow) == idx)
            acc = __fadd_rn(acc, dyp[(od * g.out[1] + oh) * g.out[2] + ow]);
        });
      });
    });
    dx[e] = acc;
  }
}

/// One dim of an average-pooling window: valid input [lo, hi), and the padded extent.
struct AvgSpan {
  int64_t lo, hi, extent;
};

__device__ __forceinline__ AvgSpan avgSpan(const PoolGeometry& g, int d, int64_t o) {
  int64_t start = o * g.stride[d] - g.padBegin[d];
  int64_t end = min(start + g.k[d], g.in[d] + g.padEnd[d]);
  return {max(start, int64_t(0)), min(end, g.in[d]), end - start};
}

/// The divisor of an output position's average (0 when its window is empty).
__device__ int64_t avgWindow(const PoolGeometry& g, int64_t od, int64_t oh, int64_t ow,
                             AvgSpan s[3]) {
  s[0] = avgSpan(g, 0, od);
  s[1] = avgSpan(g, 1, oh);
  s[2] = avgSpan(g, 2, ow);
  if (s[0].hi <= s[0].lo || s[1].hi <= s[1].lo || s[2].hi <= s[2].lo) return 0;
  if (g.countIncludePad) return s[0].extent * s[1].extent * s[2].extent;
  return (s[0].hi - s[0].lo) * (s[1].hi - s[1].lo) * (s[2].hi - s[2].lo);
}

__global__ void avgPoolKernel(PoolGeometry g, const float* x, float* y) {
  int64_t outVol = g.outVol();
  HGP_GRID_LOOP(e, g.planes * outVol) {
    int64_t p = e / outVol, o = e - p * outVol;
    int64_t ow = o % g.out[2], oh = (o / g.out[2]) % g.out[1], od = o / (g.out[2] * g.out[1]);
    AvgSpan s[3];
    int64_t divisor = avgWindow(g, od, oh, ow, s);
    const float* xp = x + p * g.inVol();
    double sum = 0;
    for (int64_t id = s[0].lo; id < s[0].hi; ++id)
      for (int64_t ih = s[1].lo; ih < s[1].hi; ++ih)
        for (int64_t iw = s[2].lo; iw < s[2].hi; ++iw)
          sum += xp[(id * g.in[1] + ih) * g.in[2] + iw];
    y[e] = divisor ? float(sum / double(divisor)) : 0.f;
  }
}

/// The output positions of dim d whose average window holds input index i: [lo, hi].
__device__ __forceinline__ void avgCovering(const PoolGeometry& g, int d, int64_t i, int64_t& lo,
                                            int64_t& hi) {
  int64_t t = i + g.padBegin[d] - g.k[d] + 1;
  lo = t <= 0 ? 0 : (t + g.stride[d] - 1) / g.stride[d];
  hi = min((i + g.padBegin[d]) / g.stride[d], g.out[d] - 1);
}

__global__ void avgPoolBwdKernel(PoolGeometry g, const float* dy, float* dx) {
  int64_t inVol = g.inVol(), outVol = g.outVol();
  HGP_GRID_LOOP(e, g.planes * inVol) {
    int64_t p = e / inVol, idx = e - p * inVol;
    int64_t iw = idx % g.in[2], ih = (idx / g.in[2]) % g.in[1], id = idx / (g.in[2] * g.in[1]);
    const float* dyp = dy + p * outVol;
    int64_t lo[3], hi[3];
    avgCovering(g, 0, id, lo[0], hi[0]);
    avgCovering(g, 1, ih, lo[1], hi[1]);
    avgCovering(g, 2, iw, lo[2], hi[2]);
    float acc = 0.f;
    for (int64_t od = lo[0]; od <= hi[0]; ++od)
      for (int64_t oh = lo[1]; oh <= hi[1]; ++oh)
        for (int64_t ow = lo[2]; ow <= hi[2]; ++ow) {
          AvgSpan s[3];
          int64_t divisor = avgWindow(g, od, oh, ow, s);
          if (!divisor) continue;
          acc = __fadd_rn(acc, dyp[(od * g.out[1] + oh) * g.out[2] + ow] / float(divisor));
        }
    dx[e] = acc;
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
  maxPoolKernel<<<blocksFor(a, g.planes * g.outVol()), kBlock, 0, a.stream>>>(g, a.in[0].f32(),
                                                                              a.out[0].f32());
  return checkLaunch(a, "maxPoolKernel");
}

Status execMaxPoolBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  HGP_TRY(checkF32Operands(a));
  PoolGeometry g;
  HGP_TRY(readPoolGeometry(a, *a.in[1].shape, *a.in[0].shape, g));
  HGP_TRY(checkShape(a, a.out[0], *a.in[1].shape, "dX"));
  maxPoolBwdKernel<<<blocksFor(a, g.planes * g.inVol()), kBlock, 0, a.stream>>>(
      g, a.in[0].f32(), a.in[1].f32(), a.out[0].f32());
  return checkLaunch(a, "maxPoolBwdKernel");
}

Status execAveragePool(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32Operands(a));
  PoolGeometry g;
  HGP_TRY(readPoolGeometry(a, *a.in[0].shape, *a.out[0].shape, g));
  for (int64_t d : g.dilation)
    if (d != 1) return a.fail("AveragePool with dilations is not supported");
  avgPoolKernel<<<blocksFor(a, g.planes * g.outVol()), kBlock, 0, a.stream>>>(g, a.in[0].f32(),
                                                                              a.out[0].f32());
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
  for (int64_t d : g.dilation)
    if (d != 1) return a.fail("AveragePool with dilations is not supported");
  avgPoolBwdKernel<<<blocksFor(a, g.planes * g.inVol()), kBlock, 0, a.stream>>>(g, a.in[0].f32(),
                                                                                a.out[0].f32());
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
