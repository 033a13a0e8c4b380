// ShapeOps.cpp - CPU executors for data movement: Concat, Split, Slice, Reshape, Transpose,
// Pad, Expand, and the gradients of Slice and Pad.
//
// The pure data-movement ops copy elements of dtypeSize bytes and so work for every dtype; Pad
// and the gradients produce values and are f32 only, as their shape rules say.
#include "runtime/cpu/KernelUtil.h"
#include "runtime/plan/Half.h"
#include "runtime/plan/Layout.h"

#include <cstring>

namespace hgp::cpu {

namespace {

/// The product of dims [from, to) of s.
int64_t dimProduct(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

Status checkSameDType(const KernelArgs& a) {
  for (const auto& v : a.in)
    if (v.dtype != a.in[0].dtype) return a.fail("operands must have the same dtype");
  for (const auto& v : a.out)
    if (v.dtype != a.in[0].dtype) return a.fail("results must have the dtype of the operands");
  return Status::ok();
}

/// Checks that `parts` stacked along `axis` make up `whole` (Concat and Split; ShapeAttrs.h).
Status checkStacking(const KernelArgs& a, const std::vector<TensorView>& parts,
                     const TensorView& whole, int64_t axis) {
  std::vector<const Shape*> shapes;
  for (const auto& p : parts) shapes.push_back(p.shape);
  return inStep(a, hgp::checkStacking(shapes, *whole.shape, axis));
}

/// Copies each part's [outer, axisLen*inner] block to or from the whole tensor.
void stackCopy(const std::vector<TensorView>& parts, const TensorView& whole, int64_t axis,
               bool toWhole) {
  int64_t es = dtypeSize(whole.dtype);
  int64_t outer = dimProduct(*whole.shape, 0, size_t(axis));
  int64_t inner = dimProduct(*whole.shape, size_t(axis) + 1, whole.shape->size());
  int64_t wholeRow = whole.dim(axis) * inner * es;
  int64_t offset = 0;
  for (const auto& p : parts) {
    int64_t partRow = p.dim(axis) * inner * es;
    auto* wp = static_cast<uint8_t*>(whole.data) + offset;
    auto* pp = static_cast<uint8_t*>(p.data);
    parallelFor(outer, std::max<int64_t>(1, kElementwiseGrain * 4 / std::max<int64_t>(partRow, 1)),
                [&](int64_t o0, int64_t o1) {
                  for (int64_t o = o0; o < o1; ++o) {
                    if (toWhole)
                      std::memcpy(wp + o * wholeRow, pp + o * partRow, size_t(partRow));
                    else
                      std::memcpy(pp + o * partRow, wp + o * wholeRow, size_t(partRow));
                  }
                });
    offset += partRow;
  }
}

/// The source strides and base offset that read Slice's result out of X (ShapeAttrs.h).
Status sliceView(const KernelArgs& a, const Shape& x, const Shape& y, std::vector<int64_t>& strides,
                 int64_t& base) {
  Expected<SourceView> v = readSliceView(a.attrs(), x, y);
  if (!v) return inStep(a, v.status());
  strides = v->strides;
  base = v->base;
  return Status::ok();
}

/// For each dim, the input index that each padded position reads, or -1 (a constant fill).
Status padMaps(const KernelArgs& a, const Shape& x, const Shape& y,
               std::vector<std::vector<int64_t>>& maps) {
  Expected<PadSpec> p = readPad(a.attrs(), x, y);
  if (!p) return inStep(a, p.status());
  maps.assign(x.size(), {});
  for (size_t d = 0; d < x.size(); ++d) {
    int64_t before = p->before[d], n = x[d];
    for (int64_t o = 0; o < y[d]; ++o) {
      int64_t i = o - before;
      if (i < 0 || i >= n) {
        if (p->mode == PadMode::Constant)
          i = -1;
        else if (p->mode == PadMode::Edge)
          i = i < 0 ? 0 : n - 1;
        else
          i = i < 0 ? -i : 2 * (n - 1) - i; // reflect excludes the edge element
      }
      maps[d].push_back(i);
    }
  }
  return Status::ok();
}

/// Calls fn(outputIndex, inputIndex or -1) for every element of the padded tensor y.
template <typename Fn>
void forEachPadded(const Shape& x, const Shape& y, const std::vector<std::vector<int64_t>>& maps,
                   Fn&& fn) {
  std::vector<int64_t> xs = stridesOf(x);
  size_t r = y.size();
  std::vector<int64_t> idx(r, 0);
  int64_t n = numElements(y);
  for (int64_t o = 0; o < n; ++o) {
    int64_t in = 0;
    for (size_t d = 0; d < r && in >= 0; ++d) {
      int64_t m = maps[d][size_t(idx[d])];
      in = m < 0 ? -1 : in + m * xs[d];
    }
    fn(o, in);
    for (int64_t d = int64_t(r) - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < y[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
}

} // namespace

Status execConcat(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, SIZE_MAX, 1, 1));
  HGP_TRY(checkSameDType(a));
  int64_t axis = a.attrs().getInt("axis", -1);
  HGP_TRY(checkStacking(a, a.in, a.out[0], axis));
  stackCopy(a.in, a.out[0], axis, /*toWhole=*/true);
  return Status::ok();
}

Status execSplit(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, SIZE_MAX));
  HGP_TRY(checkSameDType(a));
  int64_t axis = a.attrs().getInt("axis", -1);
  HGP_TRY(checkStacking(a, a.out, a.in[0], axis));
  stackCopy(a.out, a.in[0], axis, /*toWhole=*/false);
  return Status::ok();
}

Status execSlice(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkSameDType(a));
  std::vector<int64_t> strides;
  int64_t base;
  HGP_TRY(sliceView(a, *a.in[0].shape, *a.out[0].shape, strides, base));
  stridedCopy(a.out[0].data, a.in[0].data, *a.out[0].shape, strides, base,
              dtypeSize(a.in[0].dtype));
  return Status::ok();
}

Status execSliceBwd(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32(a, a.in[0], "dY"));
  HGP_TRY(checkF32(a, a.out[0], "dX"));
  std::vector<int64_t> xShape, strides;
  HGP_TRY(readInts(a, "x_shape", a.out[0].shape->size(), xShape));
  HGP_TRY(checkShape(a, a.out[0], xShape, "dX"));
  int64_t base;
  HGP_TRY(sliceView(a, xShape, *a.in[0].shape, strides, base));
  const float* dy = a.in[0].f32();
  float* dx = a.out[0].f32();
  std::fill(dx, dx + a.out[0].numel(), 0.f);
  // A slice visits each input element at most once, so plain stores suffice.
  forEachStrided(*a.in[0].shape, strides, base, [&](int64_t i, int64_t off) { dx[off] = dy[i]; });
  return Status::ok();
}

Status execReshape(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkSameDType(a));
  HGP_TRY(inStep(a, checkReshape(a.attrs(), *a.in[0].shape, *a.out[0].shape)));
  copyBytes(a.out[0], a.in[0]);
  return Status::ok();
}

Status execTranspose(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkSameDType(a));
  const Shape &x = *a.in[0].shape, &y = *a.out[0].shape;
  Expected<SourceView> v = readTransposeView(a.attrs(), x, y);
  if (!v) return inStep(a, v.status());
  stridedCopy(a.out[0].data, a.in[0].data, y, v->strides, 0, dtypeSize(a.in[0].dtype));
  return Status::ok();
}

Status execPad(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32(a, a.in[0], "X"));
  HGP_TRY(checkF32(a, a.out[0], "Y"));
  std::vector<std::vector<int64_t>> maps;
  const Shape &x = *a.in[0].shape, &y = *a.out[0].shape;
  HGP_TRY(padMaps(a, x, y, maps));
  float value = float(a.attrs().getFloat("value", 0.0));
  const float* xp = a.in[0].f32();
  float* yp = a.out[0].f32();
  forEachPadded(x, y, maps, [&](int64_t o, int64_t i) { yp[o] = i < 0 ? value : xp[i]; });
  return Status::ok();
}

Status execPadBwd(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32(a, a.in[0], "dY"));
  HGP_TRY(checkF32(a, a.out[0], "dX"));
  std::vector<int64_t> xShape;
  HGP_TRY(readInts(a, "x_shape", a.out[0].shape->size(), xShape));
  HGP_TRY(checkShape(a, a.out[0], xShape, "dX"));
  std::vector<std::vector<int64_t>> maps;
  HGP_TRY(padMaps(a, xShape, *a.in[0].shape, maps));
  const float* dy = a.in[0].f32();
  float* dx = a.out[0].f32();
  std::fill(dx, dx + a.out[0].numel(), 0.f);
  // Reflect and edge padding read an input element several times: accumulate.
  forEachPadded(xShape, *a.in[0].shape, maps, [&](int64_t o, int64_t i) {
    if (i >= 0) dx[i] += dy[o];
  });
  return Status::ok();
}

Status execExpand(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkSameDType(a));
  const Shape &x = *a.in[0].shape, &y = *a.out[0].shape;
  Expected<Shape> want = readExpandShape(a.attrs(), x);
  if (!want) return inStep(a, want.status());
  HGP_TRY(checkShape(a, a.out[0], *want, "result"));
  stridedCopy(a.out[0].data, a.in[0].data, y, broadcastStrides(x, y), 0, dtypeSize(a.in[0].dtype));
  return Status::ok();
}

namespace {

/// y = x converted to y's dtype (f32, bf16 or f16), rounded to nearest even when narrowing.
/// `to` is the attribute's dtype; the backend may hand a 16-bit result over as its f32
/// widening, which it rounds on store.
Status castInto(const KernelArgs& a, const TensorView& x, const TensorView& y, DType to) {
  if (*x.shape != *y.shape) return a.fail("Cast changes the shape");
  if (to != y.dtype && y.dtype != DType::F32) return a.fail("result dtype is not 'to'");
  auto floatOk = [](DType t) { return t == DType::F32 || isHalfDType(t); };
  if (x.dtype == DType::Bool && floatOk(y.dtype)) { // a bool graph input: 0 or 1
    const uint8_t* b = x.as<uint8_t>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      float v = b[i] ? 1.f : 0.f;
      if (y.dtype == DType::F32) y.f32()[i] = v;
      else storeHalf(y.dtype, y.as<uint16_t>(), i, v);
    }
    return Status::ok();
  }
  if (floatOk(x.dtype) && y.dtype == DType::Bool) { // a bool graph output: X != 0
    uint8_t* b = y.as<uint8_t>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      float v = x.dtype == DType::F32 ? x.f32()[i] : loadHalf(x.dtype, x.as<uint16_t>(), i);
      b[i] = v != 0.f ? 1 : 0;
    }
    return Status::ok();
  }
  if (!floatOk(x.dtype) || !floatOk(y.dtype))
    return a.fail("Cast supports f32, bf16 and f16, and bool from and to them, only");
  parallelElementwise(x.numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float v = x.dtype == DType::F32 ? x.f32()[i] : loadHalf(x.dtype, x.as<uint16_t>(), i);
      if (y.dtype == DType::F32) y.f32()[i] = v;
      else storeHalf(y.dtype, y.as<uint16_t>(), i, v);
    }
  });
  return Status::ok();
}

} // namespace

Status execCast(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  Expected<DType> to = parseDType(a.attrs().getString("to"));
  if (!to) return a.fail("attribute 'to' is not a dtype");
  return castInto(a, a.in[0], a.out[0], *to);
}

Status execCastGroup(KernelArgs& a) {
  if (a.in.empty() || a.in.size() != a.out.size())
    return a.fail("CastGroup needs as many results as operands, at least one");
  Expected<DType> to = parseDType(a.attrs().getString("to"));
  if (!to) return a.fail("attribute 'to' is not a dtype");
  std::vector<int64_t> layouts = a.attrs().getInts("layouts");
  for (size_t k = 0; k < a.in.size(); ++k) {
    int64_t l = k < layouts.size() ? layouts[k] : 0;
    if (l == 0) {
      HGP_TRY(castInto(a, a.in[k], a.out[k], *to));
      continue;
    }
    // Permute in the source dtype (exact), then cast.
    TensorView x = a.in[k];
    if (x.rank() != 4) return a.fail("a CastGroup layout change needs a rank-4 operand");
    std::vector<unsigned char> buf(size_t(x.numel() * dtypeSize(x.dtype)));
    permuteChannels(x.data, buf.data(), *x.shape, dtypeSize(x.dtype), l == 1);
    Shape shape = *a.out[k].shape;
    x.data = buf.data();
    x.shape = &shape;
    HGP_TRY(castInto(a, x, a.out[k], *to));
  }
  return Status::ok();
}

} // namespace hgp::cpu
