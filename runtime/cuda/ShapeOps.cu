// CUDA executors for data movement: Concat, Split, Slice, Reshape, Transpose, Pad, Expand, and
// the gradients of Slice and Pad (ShapeOps.cpp on the CPU).
//
// The pure data-movement ops move elements of dtypeSize bytes, so they work for every dtype:
// Concat and Split are one vectorized launch per 32 parts (StackCopy.h), Reshape a flat copy, and
// Slice, Transpose and Expand one strided gather (merged dims, strides that may be zero or
// negative), SliceBwd a strided scatter: with 32-bit index math, 16 bytes a thread on the dense
// side, where the offsets fit in 31 bits (StridedWalk.h), else one element a thread. Pad and
// the gradients compute in float on f32, bf16 or f16 tensors. PadBwd is a gather: each input
// element sums the padded positions that read it, in row-major order starting from zero, which
// is exactly the order in which the CPU reference accumulates them.
#include "runtime/cuda/DeviceUtil.cuh"
#include "runtime/cuda/StackCopy.h"
#include "runtime/cuda/StridedWalk.h"
#include "runtime/plan/Layout.h"

namespace hgp::cuda {

namespace {

Status checkSameDType(const CudaArgs& a) {
  for (const auto& v : a.in)
    if (v.dtype != a.in[0].dtype) return a.fail("operands must have the same dtype");
  for (const auto& v : a.out)
    if (v.dtype != a.in[0].dtype) return a.fail("results must have the dtype of the operands");
  return Status::ok();
}

template <typename T>
__global__ void gatherKernel(T* dst, const T* src, Dims d, int64_t base, int64_t n) {
  HGP_GRID_LOOP(i, n) dst[i] = src[base + stridedOffset(d, i)];
}

template <typename T>
__global__ void scatterKernel(T* dst, const T* src, Dims d, int64_t base, int64_t n) {
  HGP_GRID_LOOP(i, n) dst[base + stridedOffset(d, i)] = src[i];
}

/// V elements of T as one aligned access.
template <typename T, int V> struct alignas(sizeof(T) * V) Run {
  T e[V];
};

/// dst[i] = src[offset of i] (StridedWalk.h), V consecutive results a thread stored as one
/// access; n % V == 0 and dst is aligned to the access.
template <typename T, int V>
__global__ void walkGatherKernel(T* dst, const T* src, StridedDims d, uint32_t n) {
  uint32_t step = gridDim.x * blockDim.x * V;
  for (uint32_t i = (blockIdx.x * blockDim.x + threadIdx.x) * V; i < n; i += step) {
    StridedWalk w;
    w.start(d, i);
    Run<T, V> r;
#pragma unroll
    for (int u = 0; u < V; ++u) {
      r.e[u] = src[w.off];
      if (u + 1 < V) w.next(d);
    }
    *reinterpret_cast<Run<T, V>*>(dst + i) = r;
  }
}

/// dst[offset of i] = src[i], V consecutive sources a thread loaded as one access.
template <typename T, int V>
__global__ void walkScatterKernel(T* dst, const T* src, StridedDims d, uint32_t n) {
  uint32_t step = gridDim.x * blockDim.x * V;
  for (uint32_t i = (blockIdx.x * blockDim.x + threadIdx.x) * V; i < n; i += step) {
    StridedWalk w;
    w.start(d, i);
    Run<T, V> r = *reinterpret_cast<const Run<T, V>*>(src + i);
#pragma unroll
    for (int u = 0; u < V; ++u) {
      dst[w.off] = r.e[u];
      if (u + 1 < V) w.next(d);
    }
  }
}

/// The 32-bit walk of n elements of T: 16 bytes a thread where n and the dense side allow.
template <typename T>
Status launchWalk(const CudaArgs& a, bool scatter, void* dst, const void* src,
                  const StridedDims& d, int64_t n) {
  constexpr int V = int(16 / sizeof(T));
  auto* y = static_cast<T*>(dst);
  auto* x = static_cast<const T*>(src);
  bool packed = n % V == 0 && aligned16({scatter ? src : dst});
  unsigned grid = blocksFor(a, packed ? n / V : n);
  uint32_t m = uint32_t(n);
  if (scatter && packed) walkScatterKernel<T, V><<<grid, kBlock, 0, a.stream>>>(y, x, d, m);
  else if (scatter) walkScatterKernel<T, 1><<<grid, kBlock, 0, a.stream>>>(y, x, d, m);
  else if (packed) walkGatherKernel<T, V><<<grid, kBlock, 0, a.stream>>>(y, x, d, m);
  else walkGatherKernel<T, 1><<<grid, kBlock, 0, a.stream>>>(y, x, d, m);
  return checkLaunch(a, scatter ? "walkScatterKernel" : "walkGatherKernel");
}

/// launchWalk for elements of `elemSize` bytes.
Status walkBySize(const CudaArgs& a, bool scatter, void* dst, const void* src,
                  const StridedDims& d, int64_t n, int64_t elemSize) {
  switch (elemSize) {
  case 1: return launchWalk<uint8_t>(a, scatter, dst, src, d, n);
  case 2: return launchWalk<uint16_t>(a, scatter, dst, src, d, n);
  case 4: return launchWalk<uint32_t>(a, scatter, dst, src, d, n);
  case 8: return launchWalk<uint64_t>(a, scatter, dst, src, d, n);
  default: return a.fail("unsupported element size " + std::to_string(elemSize));
  }
}

/// dst[i] = src[base + offset of i] over `shape`, elements of `elemSize` bytes: the 32-bit walk
/// where it fits (StridedWalk.h), else one 64-bit decomposition per element.
Status stridedGather(CudaArgs& a, void* dst, const void* src, Shape shape,
                     std::vector<int64_t> strides, int64_t base, int64_t elemSize) {
  int64_t n = numElements(shape);
  coalesceDims(shape, {&strides});
  StridedDims walk;
  if (n > 0 && fitsStrided32(shape, strides, base, walk))
    return walkBySize(a, false, dst, src, walk, n, elemSize);
  Dims d;
  HGP_TRY(toDims(a, shape, strides, d));
  unsigned grid = blocksFor(a, n);
  switch (elemSize) {
  case 1:
    gatherKernel<<<grid, kBlock, 0, a.stream>>>(static_cast<uint8_t*>(dst),
                                                static_cast<const uint8_t*>(src), d, base, n);
    break;
  case 2:
    gatherKernel<<<grid, kBlock, 0, a.stream>>>(static_cast<uint16_t*>(dst),
                                                static_cast<const uint16_t*>(src), d, base, n);
    break;
  case 4:
    gatherKernel<<<grid, kBlock, 0, a.stream>>>(static_cast<uint32_t*>(dst),
                                                static_cast<const uint32_t*>(src), d, base, n);
    break;
  case 8:
    gatherKernel<<<grid, kBlock, 0, a.stream>>>(static_cast<uint64_t*>(dst),
                                                static_cast<const uint64_t*>(src), d, base, n);
    break;
  default:
    return a.fail("unsupported element size " + std::to_string(elemSize));
  }
  return checkLaunch(a, "gatherKernel");
}

/// Checks that `parts` stacked along `axis` make up `whole` (Concat and Split; ShapeAttrs.h).
Status checkStacking(const CudaArgs& a, const std::vector<DeviceTensor>& parts,
                     const DeviceTensor& whole, int64_t axis) {
  std::vector<const Shape*> shapes;
  for (const auto& p : parts) shapes.push_back(p.shape);
  return inStep(a, hgp::checkStacking(shapes, *whole.shape, axis));
}

/// The source strides and base offset that read Slice's result out of X (ShapeAttrs.h).
Status sliceView(const CudaArgs& a, const Shape& x, const Shape& y, std::vector<int64_t>& strides,
                 int64_t& base) {
  Expected<SourceView> v = readSliceView(a.attrs(), x, y);
  if (!v) return inStep(a, v.status());
  strides = v->strides;
  base = v->base;
  return Status::ok();
}

// ---- Pad -----------------------------------------------------------------------------------

struct PadGeometry {
  int rank = 0;
  PadMode mode = PadMode::Constant;
  float value = 0.f;
  int64_t in[kMaxDims] = {}, out[kMaxDims] = {}, before[kMaxDims] = {};
};

/// Pad's attributes (ShapeAttrs.h) as the kernels take them.
Status readPadGeometry(const CudaArgs& a, const Shape& x, const Shape& y, PadGeometry& g) {
  if (x.size() > size_t(kMaxDims)) return a.fail("Pad supports at most 8 dims");
  Expected<PadSpec> p = readPad(a.attrs(), x, y);
  if (!p) return inStep(a, p.status());
  g = PadGeometry();
  g.rank = int(x.size());
  g.mode = p->mode;
  g.value = p->value;
  for (size_t d = 0; d < x.size(); ++d) {
    g.in[d] = x[d];
    g.out[d] = y[d];
    g.before[d] = p->before[d];
  }
  return Status::ok();
}

/// The input index that padded position `o` of dim d reads, or -1 (the constant).
__device__ __forceinline__ int64_t padSource(const PadGeometry& g, int d, int64_t o) {
  int64_t n = g.in[d], i = o - g.before[d];
  if (i >= 0 && i < n) return i;
  if (g.mode == PadMode::Constant) return -1;
  if (g.mode == PadMode::Edge) return i < 0 ? 0 : n - 1;
  return i < 0 ? -i : 2 * (n - 1) - i; // reflect excludes the edge element
}

template <typename T>
__global__ void padKernel(PadGeometry g, const T* x, T* y, int64_t total) {
  HGP_GRID_LOOP(o, total) {
    int64_t rest = o, in = 0, stride = 1;
    bool fill = false;
    for (int d = g.rank - 1; d >= 0; --d) {
      int64_t q = rest / g.out[d];
      int64_t i = padSource(g, d, rest - q * g.out[d]);
      rest = q;
      fill |= i < 0;
      in += i * stride;
      stride *= g.in[d];
    }
    y[o] = fill ? fromFloat<T>(g.value) : x[in];
  }
}

/// The padded positions of dim d that read input index i: up to three ascending ranges.
struct Candidates {
  int count = 0;
  int64_t lo[3], hi[3];
};

__device__ __forceinline__ Candidates padReaders(const PadGeometry& g, int d, int64_t i) {
  Candidates c;
  int64_t n = g.in[d], b = g.before[d], m = g.out[d];
  auto add = [&](int64_t lo, int64_t hi) {
    if (lo < 0) lo = 0;
    if (hi > m - 1) hi = m - 1;
    if (lo <= hi) {
      c.lo[c.count] = lo;
      c.hi[c.count] = hi;
      ++c.count;
    }
  };
  if (g.mode == PadMode::Constant) {
    add(i + b, i + b);
  } else if (g.mode == PadMode::Edge) {
    add(i == 0 ? 0 : i + b, i == n - 1 ? m - 1 : i + b);
  } else {
    if (i >= 1 && i <= b) add(b - i, b - i);
    add(i + b, i + b);
    if (i <= n - 2 && 2 * (n - 1) - i <= n - 1 + (m - n - b))
      add(b + 2 * (n - 1) - i, b + 2 * (n - 1) - i);
  }
  return c;
}

template <typename T>
__global__ void padBwdKernel(PadGeometry g, const T* dy, T* dx, int64_t total) {
  HGP_GRID_LOOP(e, total) {
    Candidates c[kMaxDims];
    int64_t rest = e;
    bool empty = false;
    for (int d = g.rank - 1; d >= 0; --d) {
      int64_t q = rest / g.in[d];
      c[d] = padReaders(g, d, rest - q * g.in[d]);
      empty |= c[d].count == 0;
      rest = q;
    }
    float acc = 0.f;
    if (!empty) {
      // An odometer over the readers, last dim fastest: row-major order of the padded tensor.
      int k[kMaxDims];
      int64_t pos[kMaxDims];
      for (int d = 0; d < g.rank; ++d) {
        k[d] = 0;
        pos[d] = c[d].lo[0];
      }
      for (;;) {
        int64_t o = 0;
        for (int d = 0; d < g.rank; ++d) o = o * g.out[d] + pos[d];
        acc = __fadd_rn(acc, toFloat(dy[o]));
        int d = g.rank - 1;
        for (; d >= 0; --d) {
          if (pos[d] < c[d].hi[k[d]]) {
            ++pos[d];
            break;
          }
          if (k[d] + 1 < c[d].count) {
            pos[d] = c[d].lo[++k[d]];
            break;
          }
          k[d] = 0;
          pos[d] = c[d].lo[0];
        }
        if (d < 0) break;
      }
    }
    dx[e] = fromFloat<T>(acc);
  }
}

} // namespace

Status execConcat(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, SIZE_MAX, 1, 1));
  HGP_TRY(checkSameDType(a));
  int64_t axis = a.attrs().getInt("axis", -1);
  HGP_TRY(checkStacking(a, a.in, a.out[0], axis));
  return stackCopy(a, a.in, a.out[0], axis, /*toWhole=*/true);
}

Status execSplit(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, SIZE_MAX));
  HGP_TRY(checkSameDType(a));
  int64_t axis = a.attrs().getInt("axis", -1);
  HGP_TRY(checkStacking(a, a.out, a.in[0], axis));
  return stackCopy(a, a.out, a.in[0], axis, /*toWhole=*/false);
}

Status execSlice(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkSameDType(a));
  std::vector<int64_t> strides;
  int64_t base;
  HGP_TRY(sliceView(a, *a.in[0].shape, *a.out[0].shape, strides, base));
  return stridedGather(a, a.out[0].data, a.in[0].data, *a.out[0].shape, strides, base,
                       dtypeSize(a.in[0].dtype));
}

Status execSliceBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkFloat(a, a.in[0], "dY"));
  HGP_TRY(checkDType(a, a.out[0], a.in[0].dtype, "dX"));
  std::vector<int64_t> xShape, strides;
  HGP_TRY(readInts(a, "x_shape", a.out[0].shape->size(), xShape));
  HGP_TRY(checkShape(a, a.out[0], xShape, "dX"));
  int64_t base;
  HGP_TRY(sliceView(a, xShape, *a.in[0].shape, strides, base));
  HGP_CUDA_TRY(cudaMemsetAsync(a.out[0].data, 0,
                               size_t(a.out[0].numel() * dtypeSize(a.out[0].dtype)), a.stream));
  Shape shape = *a.in[0].shape;
  int64_t n = numElements(shape);
  coalesceDims(shape, {&strides});
  StridedDims walk;
  if (n > 0 && fitsStrided32(shape, strides, base, walk))
    return walkBySize(a, true, a.out[0].data, a.in[0].data, walk, n, dtypeSize(a.in[0].dtype));
  Dims d;
  HGP_TRY(toDims(a, shape, strides, d));
  // A slice visits each input element at most once, so plain stores suffice.
  // Zero is all-zero bits in every float dtype, so the scatter only moves elements.
  if (dtypeSize(a.in[0].dtype) == 2)
    scatterKernel<<<blocksFor(a, n), kBlock, 0, a.stream>>>(a.out[0].as<uint16_t>(),
                                                            a.in[0].as<uint16_t>(), d, base, n);
  else
    scatterKernel<<<blocksFor(a, n), kBlock, 0, a.stream>>>(a.out[0].f32(), a.in[0].f32(), d, base,
                                                            n);
  return checkLaunch(a, "scatterKernel");
}

Status execReshape(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkSameDType(a));
  HGP_TRY(inStep(a, checkReshape(a.attrs(), *a.in[0].shape, *a.out[0].shape)));
  return copyTensor(a, a.out[0], a.in[0]);
}

Status execTranspose(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkSameDType(a));
  const Shape &x = *a.in[0].shape, &y = *a.out[0].shape;
  Expected<SourceView> v = readTransposeView(a.attrs(), x, y);
  if (!v) return inStep(a, v.status());
  return stridedGather(a, a.out[0].data, a.in[0].data, y, v->strides, 0, dtypeSize(a.in[0].dtype));
}

Status execPad(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkFloat(a, a.in[0], "X"));
  HGP_TRY(checkDType(a, a.out[0], a.in[0].dtype, "Y"));
  PadGeometry g;
  HGP_TRY(readPadGeometry(a, *a.in[0].shape, *a.out[0].shape, g));
  int64_t n = a.out[0].numel();
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) {
    using T = decltype(t);
    padKernel<<<blocksFor(a, n), kBlock, 0, a.stream>>>(g, a.in[0].as<T>(), a.out[0].as<T>(), n);
    return checkLaunch(a, "padKernel");
  });
}

Status execPadBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkFloat(a, a.in[0], "dY"));
  HGP_TRY(checkDType(a, a.out[0], a.in[0].dtype, "dX"));
  std::vector<int64_t> xShape;
  HGP_TRY(readInts(a, "x_shape", a.out[0].shape->size(), xShape));
  HGP_TRY(checkShape(a, a.out[0], xShape, "dX"));
  PadGeometry g;
  HGP_TRY(readPadGeometry(a, xShape, *a.in[0].shape, g));
  int64_t n = a.out[0].numel();
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) {
    using T = decltype(t);
    padBwdKernel<<<blocksFor(a, n), kBlock, 0, a.stream>>>(g, a.in[0].as<T>(), a.out[0].as<T>(), n);
    return checkLaunch(a, "padBwdKernel");
  });
}

Status execExpand(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkSameDType(a));
  const Shape &x = *a.in[0].shape, &y = *a.out[0].shape;
  Expected<Shape> want = readExpandShape(a.attrs(), x);
  if (!want) return inStep(a, want.status());
  HGP_TRY(checkShape(a, a.out[0], *want, "result"));
  return stridedGather(a, a.out[0].data, a.in[0].data, y, broadcastStrides(x, y), 0,
                       dtypeSize(a.in[0].dtype));
}

namespace {
template <typename From, typename To>
__global__ void castKernel(const From* x, To* y, int64_t n) {
  HGP_GRID_LOOP(i, n) y[i] = fromFloat<To>(toFloat(x[i]));
}

/// Cast from a bool graph input (one byte, 0 or 1) / to a bool graph output (1 where X != 0).
template <typename To> __global__ void castFromBoolKernel(const uint8_t* x, To* y, int64_t n) {
  HGP_GRID_LOOP(i, n) y[i] = fromFloat<To>(x[i] ? 1.f : 0.f);
}
template <typename From> __global__ void castToBoolKernel(const From* x, uint8_t* y, int64_t n) {
  HGP_GRID_LOOP(i, n) y[i] = toFloat(x[i]) != 0.f ? 1 : 0;
}

/// Up to kCastBatch tensors of a CastGroup, passed by value (about 2 KB of kernel parameters),
/// so the launch needs no device table. Tensor k owns blocks [first[k], first[k + 1]), each
/// converting kCastChunk consecutive elements.
constexpr int kCastBatch = 64;
constexpr int kCastChunk = kBlock * 8;
struct CastBatch {
  const void* x[kCastBatch];
  void* y[kCastBatch];
  int64_t n[kCastBatch];
  int64_t first[kCastBatch + 1];
  /// A layout change (CastGroup's `layouts`): Y is [A, rows, cols] read from X as [A, cols,
  /// rows]; rows = 0 for a plain cast.
  int32_t rows[kCastBatch], cols[kCastBatch];
  int count;
};

template <typename From, typename To> __global__ void castGroupKernel(CastBatch b) {
  int64_t block = blockIdx.x;
  int k = 0;
  while (k + 1 < b.count && b.first[k + 1] <= block) ++k;
  const From* x = static_cast<const From*>(b.x[k]);
  To* y = static_cast<To*>(b.y[k]);
  int64_t begin = (block - b.first[k]) * kCastChunk, end = min(b.n[k], begin + kCastChunk);
  int64_t rows = b.rows[k], cols = b.cols[k];
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    int64_t src = i;
    if (rows) {
      int64_t plane = rows * cols, a = i / plane, r = i - a * plane, row = r / cols;
      src = a * plane + (r - row * cols) * rows + row;
    }
    y[i] = fromFloat<To>(toFloat(x[src]));
  }
}
} // namespace

Status execCast(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "Y"));
  if (a.attrs().getString("to") != dtypeName(a.out[0].dtype))
    return a.fail("the result is not of dtype 'to'");
  int64_t n = a.in[0].numel();
  if (a.in[0].dtype == DType::Bool) {
    HGP_TRY(checkFloat(a, a.out[0], "Y"));
    return dispatchFloat(a, a.out[0].dtype, [&](auto to) {
      using To = decltype(to);
      castFromBoolKernel<To><<<blocksFor(a, n), kBlock, 0, a.stream>>>(a.in[0].as<uint8_t>(),
                                                                       a.out[0].as<To>(), n);
      return checkLaunch(a, "castFromBoolKernel");
    });
  }
  HGP_TRY(checkFloat(a, a.in[0], "X"));
  if (a.out[0].dtype == DType::Bool)
    return dispatchFloat(a, a.in[0].dtype, [&](auto from) {
      using From = decltype(from);
      castToBoolKernel<From><<<blocksFor(a, n), kBlock, 0, a.stream>>>(a.in[0].as<From>(),
                                                                       a.out[0].as<uint8_t>(), n);
      return checkLaunch(a, "castToBoolKernel");
    });
  HGP_TRY(checkFloat(a, a.out[0], "Y"));
  if (a.in[0].dtype == a.out[0].dtype) return copyTensor(a, a.out[0], a.in[0]);
  return dispatchFloat(a, a.in[0].dtype, [&](auto from) {
    using From = decltype(from);
    return dispatchFloat(a, a.out[0].dtype, [&](auto to) {
      using To = decltype(to);
      castKernel<From, To><<<blocksFor(a, n), kBlock, 0, a.stream>>>(a.in[0].as<From>(),
                                                                      a.out[0].as<To>(), n);
      return checkLaunch(a, "castKernel");
    });
  });
}

Status execCastGroup(CudaArgs& a) {
  if (a.in.empty() || a.in.size() != a.out.size())
    return a.fail("CastGroup needs as many results as operands, at least one");
  const std::string to = a.attrs().getString("to");
  std::vector<int64_t> layouts = a.attrs().getInts("layouts");
  if (!layouts.empty() && layouts.size() != a.in.size())
    return a.fail("CastGroup layouts must have one entry per operand");
  // Per operand: 0 rows for a plain cast, else Y = [A, rows, cols] of X = [A, cols, rows].
  std::vector<std::pair<int32_t, int32_t>> perm(a.in.size(), {0, 0});
  for (size_t k = 0; k < a.in.size(); ++k) {
    HGP_TRY(checkFloat(a, a.in[k], "X"));
    HGP_TRY(checkDType(a, a.in[k], a.in[0].dtype, "X"));
    if (to != dtypeName(a.out[k].dtype)) return a.fail("a result is not of dtype 'to'");
    int64_t l = layouts.empty() ? 0 : layouts[k];
    const Shape& x = *a.in[k].shape;
    if (l == 0) {
      HGP_TRY(checkShape(a, a.out[k], x, "Y"));
      continue;
    }
    if (x.size() != 4 || (l != 1 && l != 2)) return a.fail("a CastGroup layout change needs rank 4");
    HGP_TRY(checkShape(a, a.out[k], l == 1 ? channelsLastShape(x) : channelsFirstShape(x), "Y"));
    if (x[1] * x[2] * x[3] >= (int64_t(1) << 31)) return a.fail("a permuted operand is too large");
    perm[k] = l == 1 ? std::pair{int32_t(x[2] * x[3]), int32_t(x[1])}
                     : std::pair{int32_t(x[3]), int32_t(x[1] * x[2])};
  }
  return dispatchFloat(a, a.in[0].dtype, [&](auto from) {
    using From = decltype(from);
    return dispatchFloat(a, a.out[0].dtype, [&](auto t) {
      using To = decltype(t);
      for (size_t base = 0; base < a.in.size(); base += kCastBatch) {
        CastBatch b{};
        b.count = int(std::min<size_t>(kCastBatch, a.in.size() - base));
        for (int k = 0; k < b.count; ++k) {
          b.x[k] = a.in[base + size_t(k)].data;
          b.y[k] = a.out[base + size_t(k)].data;
          b.n[k] = a.in[base + size_t(k)].numel();
          b.rows[k] = perm[base + size_t(k)].first;
          b.cols[k] = perm[base + size_t(k)].second;
          b.first[k + 1] = b.first[k] + std::max<int64_t>(1, (b.n[k] + kCastChunk - 1) / kCastChunk);
        }
        castGroupKernel<From, To><<<unsigned(b.first[b.count]), kBlock, 0, a.stream>>>(b);
        HGP_TRY(checkLaunch(a, "castGroupKernel"));
      }
      return Status::ok();
    });
  });
}

} // namespace hgp::cuda
