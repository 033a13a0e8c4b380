// ElementwiseOps.cpp - CPU executors for Add, Sub, Mul, Div, Max, Min, the comparisons Less,
// Greater and Equal (0/1 masks), Sum and Where, with numpy broadcasting.
//
// Equal shapes and scalar operands take flat loops. Everything else goes through one strided
// loop: both operands are viewed with broadcast strides (0 along broadcast dims), adjacent dims
// that both walk contiguously are merged, and the innermost dim runs as a plain loop.
#include "runtime/cpu/KernelUtil.h"

namespace hgp::cpu {

namespace {

/// Whether `s` broadcasts to `out` (numpy rules, `s` right-aligned).
bool broadcastsTo(const Shape& s, const Shape& out) {
  if (s.size() > out.size()) return false;
  size_t off = out.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != 1 && s[i] != out[off + i]) return false;
  return true;
}

/// y = f(a, b) with a and b broadcast to yShape. y may be the same buffer as a when a has
/// yShape (Sum accumulates that way).
template <typename F>
void broadcastBinary(const float* a, const Shape& aShape, const float* b, const Shape& bShape,
                     float* y, const Shape& yShape, F f) {
  int64_t n = numElements(yShape);
  if (aShape == yShape && bShape == yShape) {
    parallelElementwise(n, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) y[i] = f(a[i], b[i]);
    });
    return;
  }
  if (aShape == yShape && numElements(bShape) == 1) {
    float bv = b[0];
    parallelElementwise(n, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) y[i] = f(a[i], bv);
    });
    return;
  }
  if (bShape == yShape && numElements(aShape) == 1) {
    float av = a[0];
    parallelElementwise(n, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) y[i] = f(av, b[i]);
    });
    return;
  }
  Shape shape = yShape;
  std::vector<int64_t> sa = broadcastStrides(aShape, yShape), sb = broadcastStrides(bShape, yShape);
  std::vector<int64_t> sy = stridesOf(yShape);
  coalesceDims(shape, {&sa, &sb, &sy});
  int64_t r = int64_t(shape.size()), inner = shape.back();
  int64_t ia = sa.back(), ib = sb.back(), rows = n / inner;
  parallelFor(rows, std::max<int64_t>(1, kElementwiseGrain / inner), [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      // Decompose the row index over the outer dims.
      int64_t offA = 0, offB = 0, rem = row;
      for (int64_t d = r - 2; d >= 0; --d) {
        int64_t idx = rem % shape[size_t(d)];
        rem /= shape[size_t(d)];
        offA += idx * sa[size_t(d)];
        offB += idx * sb[size_t(d)];
      }
      float* yr = y + row * inner;
      const float *ar = a + offA, *br = b + offB;
      for (int64_t j = 0; j < inner; ++j) yr[j] = f(ar[j * ia], br[j * ib]);
    }
  });
}

/// `n` f32 operands, each broadcasting to the one f32 result.
Status checkBroadcastOperands(KernelArgs& a, int n) {
  HGP_TRY(checkArity(a, n, n, 1, 1));
  for (const auto& v : a.in) HGP_TRY(checkF32(a, v, "operand"));
  HGP_TRY(checkF32(a, a.out[0], "result"));
  const Shape& y = *a.out[0].shape;
  for (const auto& v : a.in)
    if (!broadcastsTo(*v.shape, y))
      return a.fail("operand " + str(*v.shape) + " does not broadcast to " + str(y));
  return Status::ok();
}

template <typename F> Status binaryOp(KernelArgs& a, F f) {
  HGP_TRY(checkBroadcastOperands(a, 2));
  const Shape& y = *a.out[0].shape;
  broadcastBinary(a.in[0].f32(), *a.in[0].shape, a.in[1].f32(), *a.in[1].shape, a.out[0].f32(), y,
                  f);
  return Status::ok();
}

} // namespace

Status execAdd(KernelArgs& a) {
  return binaryOp(a, [](float x, float y) { return x + y; });
}
Status execSub(KernelArgs& a) {
  return binaryOp(a, [](float x, float y) { return x - y; });
}
Status execMul(KernelArgs& a) {
  return binaryOp(a, [](float x, float y) { return x * y; });
}
Status execDiv(KernelArgs& a) {
  return binaryOp(a, [](float x, float y) { return x / y; });
}

// NaN wins Max and Min, as in torch.maximum; at a tie either operand is the result.
Status execMax(KernelArgs& a) {
  return binaryOp(a, [](float x, float y) { return x != x ? x : (y != y ? y : (x > y ? x : y)); });
}
Status execMin(KernelArgs& a) {
  return binaryOp(a, [](float x, float y) { return x != x ? x : (y != y ? y : (x < y ? x : y)); });
}
Status execLess(KernelArgs& a) {
  return binaryOp(a, [](float x, float y) { return x < y ? 1.f : 0.f; });
}
Status execGreater(KernelArgs& a) {
  return binaryOp(a, [](float x, float y) { return x > y ? 1.f : 0.f; });
}
Status execEqual(KernelArgs& a) {
  return binaryOp(a, [](float x, float y) { return x == y ? 1.f : 0.f; });
}

/// Y = C != 0 ? A : B, each operand read through its broadcast strides, element by element.
Status execWhere(KernelArgs& a) {
  HGP_TRY(checkBroadcastOperands(a, 3));
  const Shape& y = *a.out[0].shape;
  std::vector<int64_t> sc = broadcastStrides(*a.in[0].shape, y),
                       sa = broadcastStrides(*a.in[1].shape, y),
                       sb = broadcastStrides(*a.in[2].shape, y);
  const float *c = a.in[0].f32(), *pa = a.in[1].f32(), *pb = a.in[2].f32();
  float* out = a.out[0].f32();
  int64_t n = numElements(y), r = int64_t(y.size());
  parallelElementwise(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int64_t oc = 0, oa = 0, ob = 0, rem = i;
      for (int64_t d = r - 1; d >= 0; --d) {
        int64_t idx = rem % y[size_t(d)];
        rem /= y[size_t(d)];
        oc += idx * sc[size_t(d)];
        oa += idx * sa[size_t(d)];
        ob += idx * sb[size_t(d)];
      }
      out[i] = c[oc] != 0.f ? pa[oa] : pb[ob];
    }
  });
  return Status::ok();
}

Status execSum(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, SIZE_MAX, 1, 1));
  for (const auto& v : a.in) HGP_TRY(checkF32(a, v, "operand"));
  HGP_TRY(checkF32(a, a.out[0], "result"));
  const Shape& y = *a.out[0].shape;
  for (const auto& v : a.in) {
    if (!broadcastsTo(*v.shape, y))
      return a.fail("operand " + str(*v.shape) + " does not broadcast to " + str(y));
    if (v.data == a.out[0].data) return a.fail("the result must not share storage with an operand");
  }
  float* out = a.out[0].f32();
  auto add = [](float x, float z) { return x + z; };
  if (a.in.size() == 1) {
    stridedCopy(out, a.in[0].data, y, broadcastStrides(*a.in[0].shape, y), 0, sizeof(float));
    return Status::ok();
  }
  // ((x1 + x2) + x3) + ...: each later operand is added into the result in place.
  broadcastBinary(a.in[0].f32(), *a.in[0].shape, a.in[1].f32(), *a.in[1].shape, out, y, add);
  for (size_t i = 2; i < a.in.size(); ++i)
    broadcastBinary(out, y, a.in[i].f32(), *a.in[i].shape, out, y, add);
  return Status::ok();
}

} // namespace hgp::cpu
