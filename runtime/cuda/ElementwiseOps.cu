// CUDA executors for Add, Sub, Mul, Div, Max, Min, the comparisons Less, Greater and Equal (0/1
// masks of the operands' dtype), the n-ary Sum and Where, with numpy broadcasting
// (ElementwiseOps.cpp on the CPU).
//
// Each operand is mapped onto the result's flat index i in one of three ways, chosen on the host
// after merging dims (coalesceDims): Full (same shape, index i), Block (the operand's non-broadcast
// dims form one contiguous run of the result's dims, so its index is (i / div) % mod: scalars,
// per-channel [C,1,1] vectors, row and column vectors), or General (strides over up to 8 dims).
// Same-shape operands 16 bytes aligned (every planned tensor is) take a path with one 16-byte access
// per operand per thread: four f32 or eight bf16/f16 values. A broadcast takes a pack at a time
// too where every operand is, over each aligned pack of the result, either one value (a gate
// [N,1,1,C] read by [N,H,W,C] channels-last, a per-channel [C,1,1] over H*W a multiple of the
// pack) or a contiguous aligned run (packedBroadcastKernel): the index arithmetic runs once per
// pack instead of once per element. On the H200 the per-element broadcastKernel ran
// EfficientNet-B0's squeeze-excitation Mul at a seventh of HBM's bandwidth (207 us for a
// [64,56,56,144] bf16 product). Sum adds its operands left to right in float, as the
// CPU does, up to kMaxSum per launch; longer sums continue from the partial result. bf16 and f16
// operands (mixed precision) are read as float and the result rounded once on store.
#include "runtime/cuda/DeviceUtil.cuh"

namespace hgp::cuda {

namespace {

enum class MapKind : int { Full, Block, General };

struct OperandMap {
  const void* p = nullptr;
  MapKind kind = MapKind::Full;
  int64_t div = 1, mod = 1;
  Dims dims; ///< General: the result's merged shape with this operand's strides.
};

template <typename T> __device__ __forceinline__ float load(const OperandMap& m, int64_t i) {
  const T* p = static_cast<const T*>(m.p);
  switch (m.kind) {
  case MapKind::Full:
    return toFloat(p[i]);
  case MapKind::Block:
    return toFloat(p[(i / m.div) % m.mod]);
  default:
    return toFloat(p[stridedOffset(m.dims, i)]);
  }
}

enum class BinOp : int { Add, Sub, Mul, Div, Max, Min, Less, Greater, Equal };

template <BinOp Op> __device__ __forceinline__ float apply(float x, float y) {
  if constexpr (Op == BinOp::Add) return __fadd_rn(x, y);
  if constexpr (Op == BinOp::Sub) return __fsub_rn(x, y);
  if constexpr (Op == BinOp::Mul) return __fmul_rn(x, y);
  // NaN wins Max and Min (torch.maximum), as on the CPU.
  if constexpr (Op == BinOp::Max) return x != x ? x : (y != y ? y : (x > y ? x : y));
  if constexpr (Op == BinOp::Min) return x != x ? x : (y != y ? y : (x < y ? x : y));
  if constexpr (Op == BinOp::Less) return x < y ? 1.f : 0.f;
  if constexpr (Op == BinOp::Greater) return x > y ? 1.f : 0.f;
  if constexpr (Op == BinOp::Equal) return x == y ? 1.f : 0.f;
  return x / y;
}

/// 16 bytes of T: four f32 or eight bf16/f16 values, loaded and stored in one access.
template <typename T> struct alignas(16) Pack {
  static constexpr int kN = 16 / int(sizeof(T));
  T v[kN];
};

template <typename T> __device__ __forceinline__ Pack<T> loadPack(const void* p, int64_t q) {
  Pack<T> r;
  *reinterpret_cast<uint4*>(r.v) = reinterpret_cast<const uint4*>(p)[q];
  return r;
}

/// Same-shape operands, 16-byte aligned: one 16-byte access per operand per thread and loop
/// iteration; the last n % kN elements go to the first threads.
template <BinOp Op, typename T>
__global__ void sameShapeKernel(const void* a, const void* b, void* y, int64_t n) {
  constexpr int kN = Pack<T>::kN;
  HGP_GRID_LOOP(q, n / kN) {
    Pack<T> u = loadPack<T>(a, q), v = loadPack<T>(b, q), r;
#pragma unroll
    for (int j = 0; j < kN; ++j) r.v[j] = fromFloat<T>(apply<Op>(toFloat(u.v[j]), toFloat(v.v[j])));
    reinterpret_cast<Pack<T>*>(y)[q] = r;
  }
  int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, i = n / kN * kN + t;
  if (i < n)
    static_cast<T*>(y)[i] = fromFloat<T>(
        apply<Op>(toFloat(static_cast<const T*>(a)[i]), toFloat(static_cast<const T*>(b)[i])));
}

/// How a broadcast operand reads the kN elements of one aligned pack of the result: one value,
/// or kN consecutive values at a 16-byte aligned offset (packable() on the host says which).
enum class RunKind : int { Constant, Contiguous };

template <typename T>
__device__ __forceinline__ void loadRun(const OperandMap& m, RunKind run, int64_t i,
                                        float (&v)[Pack<T>::kN]) {
  constexpr int kN = Pack<T>::kN;
  if (run == RunKind::Constant) {
    float c = load<T>(m, i);
#pragma unroll
    for (int j = 0; j < kN; ++j) v[j] = c;
    return;
  }
  int64_t off = m.kind == MapKind::Full    ? i
                : m.kind == MapKind::Block ? (i / m.div) % m.mod
                                           : stridedOffset(m.dims, i);
  Pack<T> p = loadPack<T>(m.p, off / kN);
#pragma unroll
  for (int j = 0; j < kN; ++j) v[j] = toFloat(p.v[j]);
}

/// Broadcasting, a pack of the result per thread and loop iteration (both operands packable);
/// the last n % kN elements go to the first threads, element by element. The arithmetic and the
/// rounding are broadcastKernel's.
template <BinOp Op, typename T>
__global__ void packedBroadcastKernel(OperandMap a, RunKind ra, OperandMap b, RunKind rb, T* y,
                                      int64_t n) {
  constexpr int kN = Pack<T>::kN;
  HGP_GRID_LOOP(q, n / kN) {
    float u[kN], v[kN];
    loadRun<T>(a, ra, q * kN, u);
    loadRun<T>(b, rb, q * kN, v);
    Pack<T> r;
#pragma unroll
    for (int j = 0; j < kN; ++j) r.v[j] = fromFloat<T>(apply<Op>(u[j], v[j]));
    reinterpret_cast<Pack<T>*>(y)[q] = r;
  }
  int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, i = n / kN * kN + t;
  if (i < n) y[i] = fromFloat<T>(apply<Op>(load<T>(a, i), load<T>(b, i)));
}

template <BinOp Op, typename T>
__global__ void broadcastKernel(OperandMap a, OperandMap b, T* y, int64_t n) {
  HGP_GRID_LOOP(i, n) y[i] = fromFloat<T>(apply<Op>(load<T>(a, i), load<T>(b, i)));
}

/// Where: the selected operand's value itself (no arithmetic), so an inf or NaN in the other one
/// stays out.
template <typename T>
__global__ void whereKernel(OperandMap c, OperandMap a, OperandMap b, T* y, int64_t n) {
  HGP_GRID_LOOP(i, n) y[i] = fromFloat<T>(load<T>(c, i) != 0.f ? load<T>(a, i) : load<T>(b, i));
}

constexpr int kMaxSum = 8;
struct SumOperands {
  int count = 0;
  OperandMap op[kMaxSum];
};

/// Sum of same-shape, 16-byte aligned operands, a 16-byte access each (as sameShapeKernel).
template <typename T> __global__ void sumSameShapeKernel(SumOperands ops, T* y, int64_t n) {
  constexpr int kN = Pack<T>::kN;
  HGP_GRID_LOOP(q, n / kN) {
    Pack<T> p = loadPack<T>(ops.op[0].p, q);
    float acc[kN];
#pragma unroll
    for (int j = 0; j < kN; ++j) acc[j] = toFloat(p.v[j]);
    for (int k = 1; k < ops.count; ++k) {
      p = loadPack<T>(ops.op[k].p, q);
#pragma unroll
      for (int j = 0; j < kN; ++j) acc[j] = __fadd_rn(acc[j], toFloat(p.v[j]));
    }
#pragma unroll
    for (int j = 0; j < kN; ++j) p.v[j] = fromFloat<T>(acc[j]);
    reinterpret_cast<Pack<T>*>(y)[q] = p;
  }
  int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, i = n / kN * kN + t;
  if (i < n) {
    float acc = toFloat(static_cast<const T*>(ops.op[0].p)[i]);
    for (int k = 1; k < ops.count; ++k)
      acc = __fadd_rn(acc, toFloat(static_cast<const T*>(ops.op[k].p)[i]));
    y[i] = fromFloat<T>(acc);
  }
}

/// Sum of same-shape operands of which some are pitched views (rows of `row` elements, operand
/// k's rows pitch[k] apart: a Split's results read in place), into a dense y; every row, pitch
/// and address a multiple of 16 bytes, so a 16-byte access each, in the operands' order.
struct PitchedSumOperands {
  int count = 0;
  const void* p[kMaxSum] = {};
  int64_t pitch[kMaxSum] = {};
};

template <typename T>
__global__ void sumPitchedKernel(PitchedSumOperands ops, int64_t row, T* y, int64_t n) {
  constexpr int kN = Pack<T>::kN;
  HGP_GRID_LOOP(q, n / kN) {
    int64_t e = q * kN, r = e / row, c = e - r * row;
    float acc[kN];
    for (int k = 0; k < ops.count; ++k) {
      Pack<T> p = *reinterpret_cast<const Pack<T>*>(static_cast<const T*>(ops.p[k]) +
                                                    r * ops.pitch[k] + c);
#pragma unroll
      for (int j = 0; j < kN; ++j) acc[j] = k ? __fadd_rn(acc[j], toFloat(p.v[j])) : toFloat(p.v[j]);
    }
    Pack<T> o;
#pragma unroll
    for (int j = 0; j < kN; ++j) o.v[j] = fromFloat<T>(acc[j]);
    reinterpret_cast<Pack<T>*>(y)[q] = o;
  }
}

template <typename T> __global__ void sumKernel(SumOperands ops, T* y, int64_t n) {
  HGP_GRID_LOOP(i, n) {
    float acc = load<T>(ops.op[0], i);
    for (int k = 1; k < ops.count; ++k) acc = __fadd_rn(acc, load<T>(ops.op[k], i));
    y[i] = fromFloat<T>(acc);
  }
}

/// Whether `s` broadcasts to `out` (numpy rules, right-aligned).
bool broadcastsTo(const Shape& s, const Shape& out) {
  if (s.size() > out.size()) return false;
  size_t off = out.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != 1 && s[i] != out[off + i]) return false;
  return true;
}

/// How operand `s` at `p` is read when broadcast to `out`.
Status mapOperand(const CudaArgs& a, const void* p, const Shape& s, const Shape& out,
                  OperandMap& m) {
  m = OperandMap();
  m.p = p;
  if (s == out) return Status::ok();
  if (numElements(s) == 1) {
    m.kind = MapKind::Block;
    return Status::ok();
  }
  Shape shape = out;
  std::vector<int64_t> st = broadcastStrides(s, out), own = stridesOf(out);
  coalesceDims(shape, {&st, &own});
  // One run of dims [lo, hi] with non-zero strides, contiguous (the last stride 1): a Block.
  int r = int(shape.size()), lo = -1, hi = -1;
  bool block = true;
  for (int d = 0; d < r && block; ++d) {
    if (st[size_t(d)] == 0) continue;
    if (lo < 0)
      lo = d;
    else if (hi != d - 1)
      block = false;
    hi = d;
  }
  if (block && lo >= 0) {
    int64_t expect = 1;
    for (int d = hi; d >= lo && block; --d) {
      block = st[size_t(d)] == expect;
      expect *= shape[size_t(d)];
    }
    if (block) {
      m.kind = MapKind::Block;
      m.div = own[size_t(hi)];
      m.mod = expect;
      return Status::ok();
    }
  }
  m.kind = MapKind::General;
  return toDims(a, shape, st, m.dims);
}

/// Whether operand m reads every aligned pack of kN result elements as one value or as kN
/// consecutive, 16-byte aligned values (`run` says which).
bool packable(const OperandMap& m, int64_t kN, RunKind& run) {
  auto aligned = [&](int64_t strideMultiple) {
    return reinterpret_cast<uintptr_t>(m.p) % 16 == 0 && strideMultiple % kN == 0;
  };
  switch (m.kind) {
  case MapKind::Full:
    run = RunKind::Contiguous;
    return aligned(kN);
  case MapKind::Block: // (i / div) % mod: constant over a pack when div is a multiple of it
    if (m.mod == 1 || m.div % kN == 0) {
      run = RunKind::Constant;
      return true;
    }
    run = RunKind::Contiguous;
    return m.div == 1 && aligned(m.mod);
  default: {
    int k = m.dims.rank - 1;
    if (k < 0 || m.dims.size[k] % kN != 0) return false;
    if (m.dims.stride[k] == 0) {
      run = RunKind::Constant;
      return true;
    }
    if (m.dims.stride[k] != 1) return false;
    run = RunKind::Contiguous;
    for (int d = 0; d < k; ++d)
      if (m.dims.stride[d] % kN != 0) return false;
    return aligned(kN);
  }
  }
}

template <BinOp Op> Status binaryOp(CudaArgs& a) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  HGP_TRY(checkFloat(a, a.out[0], "result"));
  for (const auto& v : a.in) HGP_TRY(checkDType(a, v, a.out[0].dtype, "operand"));
  const Shape& y = *a.out[0].shape;
  for (const auto& v : a.in)
    if (!broadcastsTo(*v.shape, y))
      return a.fail("operand " + shapeToString(*v.shape) + " does not broadcast to " +
                    shapeToString(y));
  int64_t n = a.out[0].numel();
  const void *pa = a.in[0].data, *pb = a.in[1].data;
  void* py = a.out[0].data;
  if (*a.in[0].shape == y && *a.in[1].shape == y && aligned16({pa, pb, py}))
    return dispatchFloat(a, a.out[0].dtype, [&](auto t) {
      using T = decltype(t);
      int64_t work = std::max<int64_t>(n / Pack<T>::kN, n % Pack<T>::kN);
      sameShapeKernel<Op, T><<<blocksFor(a, work), kBlock, 0, a.stream>>>(pa, pb, py, n);
      return checkLaunch(a, "sameShapeKernel");
    });
  OperandMap ma, mb;
  HGP_TRY(mapOperand(a, pa, *a.in[0].shape, y, ma));
  HGP_TRY(mapOperand(a, pb, *a.in[1].shape, y, mb));
  return dispatchFloat(a, a.out[0].dtype, [&](auto t) {
    using T = decltype(t);
    constexpr int64_t kN = Pack<T>::kN;
    RunKind ra, rb;
    if (aligned16({py}) && packable(ma, kN, ra) && packable(mb, kN, rb)) {
      int64_t work = std::max<int64_t>(n / kN, n % kN);
      packedBroadcastKernel<Op, T><<<blocksFor(a, work), kBlock, 0, a.stream>>>(
          ma, ra, mb, rb, static_cast<T*>(py), n);
      return checkLaunch(a, "packedBroadcastKernel");
    }
    broadcastKernel<Op, T><<<blocksFor(a, n), kBlock, 0, a.stream>>>(ma, mb, static_cast<T*>(py), n);
    return checkLaunch(a, "broadcastKernel");
  });
}

} // namespace

Status execAdd(CudaArgs& a) {
  return binaryOp<BinOp::Add>(a);
}
Status execSub(CudaArgs& a) {
  return binaryOp<BinOp::Sub>(a);
}
Status execMul(CudaArgs& a) {
  return binaryOp<BinOp::Mul>(a);
}
Status execDiv(CudaArgs& a) {
  return binaryOp<BinOp::Div>(a);
}
Status execMax(CudaArgs& a) {
  return binaryOp<BinOp::Max>(a);
}
Status execMin(CudaArgs& a) {
  return binaryOp<BinOp::Min>(a);
}
Status execLess(CudaArgs& a) {
  return binaryOp<BinOp::Less>(a);
}
Status execGreater(CudaArgs& a) {
  return binaryOp<BinOp::Greater>(a);
}
Status execEqual(CudaArgs& a) {
  return binaryOp<BinOp::Equal>(a);
}

Status execWhere(CudaArgs& a) {
  HGP_TRY(checkArity(a, 3, 3, 1, 1));
  HGP_TRY(checkFloat(a, a.out[0], "result"));
  for (const auto& v : a.in) HGP_TRY(checkDType(a, v, a.out[0].dtype, "operand"));
  const Shape& y = *a.out[0].shape;
  OperandMap m[3];
  for (size_t k = 0; k < 3; ++k) {
    if (!broadcastsTo(*a.in[k].shape, y))
      return a.fail("operand " + shapeToString(*a.in[k].shape) + " does not broadcast to " +
                    shapeToString(y));
    HGP_TRY(mapOperand(a, a.in[k].data, *a.in[k].shape, y, m[k]));
  }
  int64_t n = a.out[0].numel();
  return dispatchFloat(a, a.out[0].dtype, [&](auto t) {
    using T = decltype(t);
    whereKernel<T><<<blocksFor(a, n), kBlock, 0, a.stream>>>(m[0], m[1], m[2],
                                                            a.out[0].as<T>(), n);
    return checkLaunch(a, "whereKernel");
  });
}

/// Sum with pitched operands (OpList.def's HGP_PITCHED): same shapes, 16-byte rows, pitches and
/// addresses; in launches of up to kMaxSum operands, each later one continuing from the partial
/// result, as the dense path does.
Status pitchedSum(CudaArgs& a, int64_t row) {
  const DeviceTensor& y = a.out[0];
  int64_t n = y.numel(), esize = dtypeSize(y.dtype);
  if ((row * esize) % 16 || n % row) return a.fail("a pitched operand's rows are not 16-byte vectors");
  for (const auto& v : a.in) {
    if (*v.shape != *y.shape) return a.fail("a Sum with pitched operands does not broadcast");
    if ((v.pitched() && (v.pitch * esize) % 16) || !aligned16({v.data}))
      return a.fail("a pitched Sum's operands must be 16-byte aligned");
  }
  if (!aligned16({y.data})) return a.fail("a pitched Sum's result must be 16-byte aligned");
  size_t next = 0;
  while (next < a.in.size()) {
    PitchedSumOperands ops;
    if (next > 0) ops.p[0] = y.data, ops.pitch[0] = row, ops.count = 1;
    for (; next < a.in.size() && ops.count < kMaxSum; ++next, ++ops.count) {
      ops.p[ops.count] = a.in[next].data;
      ops.pitch[ops.count] = a.in[next].pitched() ? a.in[next].pitch : row;
    }
    HGP_TRY(dispatchFloat(a, y.dtype, [&](auto t) {
      using T = decltype(t);
      sumPitchedKernel<T><<<blocksFor(a, n / Pack<T>::kN), kBlock, 0, a.stream>>>(
          ops, row, static_cast<T*>(y.data), n);
      return checkLaunch(a, "sumPitchedKernel");
    }));
  }
  return Status::ok();
}

Status execSum(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, SIZE_MAX, 1, 1));
  HGP_TRY(checkFloat(a, a.out[0], "result"));
  for (const auto& v : a.in) HGP_TRY(checkDType(a, v, a.out[0].dtype, "operand"));
  const Shape& y = *a.out[0].shape;
  for (const auto& v : a.in) {
    if (!broadcastsTo(*v.shape, y))
      return a.fail("operand " + shapeToString(*v.shape) + " does not broadcast to " +
                    shapeToString(y));
    if (v.data == a.out[0].data) return a.fail("the result must not share storage with an operand");
  }
  void* out = a.out[0].data;
  int64_t n = a.out[0].numel();
  int64_t row = 0; // operands that are pitched views: their rows (all alike)
  for (const auto& v : a.in)
    if (v.pitched()) {
      if (row && v.row != row) return a.fail("pitched operands with different rows");
      row = v.row;
    }
  if (row) return pitchedSum(a, row);
  // ((x1 + x2) + x3) + ...: the first launch takes up to kMaxSum operands, each later one
  // continues from the partial result in `out` (read and written by the same thread; in bf16/f16
  // a sum of more than kMaxSum operands rounds the partial result once per launch).
  size_t next = 0;
  while (next < a.in.size()) {
    SumOperands ops;
    if (next > 0) {
      ops.op[0].p = out;
      ops.count = 1;
    }
    for (; next < a.in.size() && ops.count < kMaxSum; ++next)
      HGP_TRY(mapOperand(a, a.in[next].data, *a.in[next].shape, y, ops.op[ops.count++]));
    bool same = aligned16({out});
    for (int k = 0; k < ops.count; ++k)
      same = same && ops.op[k].kind == MapKind::Full && aligned16({ops.op[k].p});
    HGP_TRY(dispatchFloat(a, a.out[0].dtype, [&](auto t) {
      using T = decltype(t);
      if (same) {
        int64_t work = std::max<int64_t>(n / Pack<T>::kN, n % Pack<T>::kN);
        sumSameShapeKernel<T><<<blocksFor(a, work), kBlock, 0, a.stream>>>(ops, static_cast<T*>(out), n);
        return checkLaunch(a, "sumSameShapeKernel");
      }
      sumKernel<T><<<blocksFor(a, n), kBlock, 0, a.stream>>>(ops, static_cast<T*>(out), n);
      return checkLaunch(a, "sumKernel");
    }));
  }
  return Status::ok();
}

} // namespace hgp::cuda
