// CUDA executors for Add, Sub, Mul, Div and the n-ary Sum, with numpy broadcasting
// (ElementwiseOps.cpp on the CPU).
//
// Each operand is mapped onto the result's flat index i in one of three ways, chosen on the host
// after merging dims (coalesceDims): Full (same shape, index i), Block (the operand's non-broadcast
// dims form one contiguous run of the result's dims, so its index is (i / div) % mod: scalars,
// per-channel [C,1,1] vectors, row and column vectors), or General (strides over up to 8 dims).
// Same-shape f32 operands take a float4 path. Sum adds its operands left to right in float, as the
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

enum class BinOp : int { Add, Sub, Mul, Div };

template <BinOp Op> __device__ __forceinline__ float apply(float x, float y) {
  if constexpr (Op == BinOp::Add) return __fadd_rn(x, y);
  if constexpr (Op == BinOp::Sub) return __fsub_rn(x, y);
  if constexpr (Op == BinOp::Mul) return __fmul_rn(x, y);
  return x / y;
}

template <BinOp Op>
__global__ void sameShapeKernel(const float* a, const float* b, float* y, int64_t n) {
  int64_t n4 = n / 4;
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  float4* y4 = reinterpret_cast<float4*>(y);
  HGP_GRID_LOOP(i, n4) {
    float4 u = a4[i], v = b4[i];
    y4[i] = make_float4(apply<Op>(u.x, v.x), apply<Op>(u.y, v.y), apply<Op>(u.z, v.z),
                        apply<Op>(u.w, v.w));
  }
  int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (t < n - n4 * 4) y[n4 * 4 + t] = apply<Op>(a[n4 * 4 + t], b[n4 * 4 + t]);
}

template <BinOp Op, typename T>
__global__ void broadcastKernel(OperandMap a, OperandMap b, T* y, int64_t n) {
  HGP_GRID_LOOP(i, n) y[i] = fromFloat<T>(apply<Op>(load<T>(a, i), load<T>(b, i)));
}

constexpr int kMaxSum = 8;
struct SumOperands {
  int count = 0;
  OperandMap op[kMaxSum];
};

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
  if (a.out[0].dtype == DType::F32 && *a.in[0].shape == y && *a.in[1].shape == y &&
      aligned16({pa, pb, py})) {
    sameShapeKernel<Op><<<blocksFor(a, (n + 3) / 4), kBlock, 0, a.stream>>>(
        a.in[0].f32(), a.in[1].f32(), a.out[0].f32(), n);
    return checkLaunch(a, "sameShapeKernel");
  }
  OperandMap ma, mb;
  HGP_TRY(mapOperand(a, pa, *a.in[0].shape, y, ma));
  HGP_TRY(mapOperand(a, pb, *a.in[1].shape, y, mb));
  return dispatchFloat(a, a.out[0].dtype, [&](auto t) {
    using T = decltype(t);
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
    HGP_TRY(dispatchFloat(a, a.out[0].dtype, [&](auto t) {
      using T = decltype(t);
      sumKernel<T><<<blocksFor(a, n), kBlock, 0, a.stream>>>(ops, static_cast<T*>(out), n);
      return checkLaunch(a, "sumKernel");
    }));
  }
  return Status::ok();
}

} // namespace hgp::cuda
