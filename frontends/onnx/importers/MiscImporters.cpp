// Importers for constants, aliases, Dropout and the compile-time shape chain ops (Shape,
// Gather, Cast, ConstantOfShape, Range). Cast also takes a random mask (RandomImporters.cpp) to
// float. The shape chain ops only fold: their operands must be
// known at compile time, which they are whenever they compute shapes of statically shaped
// tensors, as in PyTorch's view/flatten patterns and ShuffleNet's channel shuffle. The one
// exception is a Gather of computed data by constant indices that form a view of it (a reshape,
// a permutation or an evenly spaced slice): torch's dynamo exporter writes `as_strided` that way,
// as Reshape to 1-D plus Gather (ConvNeXt's classifier head), and it becomes those IR ops.
#include "frontends/onnx/importers/Importers.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace hgp {

namespace {

std::string where(const OnnxNode& n) {
  return "node '" + n.loc() + "'";
}

/// A scalar or 1-D tensor built from a Constant's value_float(s)/value_int(s) attribute.
template <typename T>
TensorDataPtr makeConstant(DType dt, const std::vector<T>& values, bool scalar) {
  auto t = std::make_shared<TensorData>();
  t->type = {dt, scalar ? Shape{} : Shape{int64_t(values.size())}};
  t->bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(t->bytes.data(), values.data(), t->bytes.size());
  return t;
}

/// Binds result 0 of `n` to `x` reshaped to `shape` (an alias when the shape is the same).
Expected<Value*> reshapeValue(OnnxNode& n, Value* x, const Shape& shape) {
  if (x->shape() == shape) return x;
  AttrMap a;
  a.setInts("shape", shape);
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::Reshape, {x}, a));
  return node->output(0);
}

/// Gather of the computed tensor `x` along `axis` by the constant `idx` (normalized, of shape
/// `is`), when those indices are an affine map idx = off + sum_j k_j * s_j that is a reshape, a
/// permutation of a reshape, or an evenly spaced slice of the axis; else an error that says how
/// to export instead.
Status gatherAsView(OnnxNode& n, Value* x, int64_t axis, Shape is,
                    const std::vector<int64_t>& idx) {
  const Shape& ds = x->shape();
  int64_t dim = ds[size_t(axis)];
  size_t m = is.size();
  auto stridesOfIs = rowMajorStrides(is);
  std::vector<int64_t> s(m, 0);
  int64_t off = idx.empty() ? 0 : idx[0];
  for (size_t j = 0; j < m; ++j)
    if (is[j] > 1) s[j] = idx[size_t(stridesOfIs[j])] - off;
  bool affine = !idx.empty();
  for (size_t k = 0; k < idx.size() && affine; ++k) {
    int64_t v = off, rest = int64_t(k);
    for (size_t j = 0; j < m; ++j) {
      v += (rest / stridesOfIs[j]) * s[j];
      rest %= stridesOfIs[j];
    }
    affine = v == idx[k];
  }
  // A float initializer is a parameter that trains (ImportContext.h), so it is never folded: an
  // embedding lookup of one is refused, not frozen into a constant.
  bool param = n.ctx().initializers.count(n.inputName(0)) > 0;
  std::string what = param ? "its data is the parameter '" + n.inputName(0) +
                                  "', which trains and so is never folded; hgpc gathers from it"
                            : "its data is computed at run time, and hgpc takes that";
  std::string instead = param ? "Embedding lookups are not supported"
                              : "Export with the TorchScript exporter instead: torch.onnx.export("
                                "model, (x,), f, dynamo=False, "
                                "training=torch.onnx.TrainingMode.TRAINING)";
  auto fail = [&] {
    return n.fail(what + " only when the constant indices pick a reshape, a permutation or an "
                  "evenly spaced slice of axis " + std::to_string(axis) +
                  " (as torch's dynamo exporter writes as_strided); these do not. " + instead);
  };
  if (!affine) return fail();
  // A static export at another batch (ImportContext.h, followBatch): the dynamo exporter's
  // as_strided of a [N, C, 1, 1] tensor flattened by Reshape(-1) indexes N * C elements of the
  // export's N. When the indices' dim 0 is that batch, has the largest stride, and the flat axis
  // holds --batch times as many, the same strides index the new batch.
  int64_t from = n.ctx().exportBatch, to = n.ctx().options.batch;
  if (m > 0 && from > 0 && to > 0 && from != to && is[0] == from && off == 0 &&
      int64_t(idx.size()) * to == dim * from && s[0] == int64_t(idx.size()) / from) {
    is[0] = to;
    ++n.ctx().rebatchedShapes;
  }
  int64_t count = 1;
  for (int64_t d : is) count *= d;
  Shape out(ds.begin(), ds.begin() + axis), before = out, after(ds.begin() + axis + 1, ds.end());
  out.insert(out.end(), is.begin(), is.end());
  out.insert(out.end(), after.begin(), after.end());
  // A permutation of a reshape: the dims of size > 1, in decreasing stride, tile the axis densely.
  std::vector<size_t> order;
  for (size_t j = 0; j < m; ++j)
    if (is[j] > 1) order.push_back(j);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s[a] > s[b]; });
  bool dense = off == 0 && count == dim;
  for (size_t k = order.size(); k-- > 0 && dense;)
    dense = s[order[k]] == (k + 1 == order.size() ? 1 : s[order[k + 1]] * is[order[k + 1]]);
  if (dense) {
    Shape tiled = before;
    for (size_t j : order) tiled.push_back(is[j]);
    tiled.insert(tiled.end(), after.begin(), after.end());
    HGP_ASSIGN_OR_RETURN(Value * v, reshapeValue(n, x, tiled));
    // Output dim position of each tiled dim: the dims of size > 1 in the indices' own order.
    std::vector<size_t> byIndexOrder = order;
    std::sort(byIndexOrder.begin(), byIndexOrder.end());
    std::vector<int64_t> perm;
    bool identity = true;
    for (int64_t d = 0; d < axis; ++d) perm.push_back(d);
    for (size_t j : byIndexOrder) {
      int64_t from = axis + int64_t(std::find(order.begin(), order.end(), j) - order.begin());
      identity = identity && from == int64_t(perm.size());
      perm.push_back(from);
    }
    for (size_t d = 0; d < after.size(); ++d) perm.push_back(axis + int64_t(order.size() + d));
    if (!identity) {
      AttrMap a;
      a.setInts("perm", perm);
      HGP_ASSIGN_OR_RETURN(Node * t, n.emit(OpKind::Transpose, {v}, a));
      v = t->output(0);
    }
    HGP_ASSIGN_OR_RETURN(v, reshapeValue(n, v, out));
    n.setOutput(0, v);
    return Status::ok();
  }
  // An evenly spaced slice: at most one dim of the indices has more than one element.
  if (order.size() > 1) return fail();
  int64_t step = order.empty() ? 1 : s[order[0]], len = int64_t(idx.size());
  if (step == 0) return fail();
  std::vector<int64_t> st(ds.size(), 0), en(ds.begin(), ds.end()), sp(ds.size(), 1);
  st[size_t(axis)] = off;
  en[size_t(axis)] = off + step * (len - 1) + (step > 0 ? 1 : -1);
  sp[size_t(axis)] = step;
  AttrMap a;
  a.setInts("starts", st);
  a.setInts("ends", en);
  a.setInts("steps", sp);
  HGP_ASSIGN_OR_RETURN(Node * sl, n.emit(OpKind::Slice, {x}, a));
  HGP_ASSIGN_OR_RETURN(Value * v, reshapeValue(n, sl->output(0), out));
  n.setOutput(0, v);
  return Status::ok();
}

} // namespace

Status importConstant(OnnxNode& n) {
  static const char* const kForms[] = {"value",         "value_float", "value_floats",
                                       "value_int",     "value_ints",  "value_string",
                                       "value_strings", "sparse_value"};
  const char* form = nullptr;
  for (const char* f : kForms) {
    if (!n.hasAttr(f)) continue;
    if (form) return n.fail("has both '" + std::string(form) + "' and '" + f + "'");
    form = f;
  }
  if (!form) return n.fail("has no value attribute");
  std::string f = form;
  TensorDataPtr t;
  if (f == "value") {
    HGP_ASSIGN_OR_RETURN(t, n.attrTensor("value"));
  } else if (f == "value_float") {
    HGP_ASSIGN_OR_RETURN(double v, n.attrFloat("value_float", 0));
    t = makeConstant<float>(DType::F32, {float(v)}, true);
  } else if (f == "value_floats") {
    HGP_ASSIGN_OR_RETURN(auto v, n.attrFloats("value_floats"));
    t = makeConstant<float>(DType::F32, std::vector<float>(v.begin(), v.end()), false);
  } else if (f == "value_int") {
    HGP_ASSIGN_OR_RETURN(int64_t v, n.attrInt("value_int", 0));
    t = makeConstant<int64_t>(DType::I64, {v}, true);
  } else if (f == "value_ints") {
    HGP_ASSIGN_OR_RETURN(auto v, n.attrInts("value_ints"));
    t = makeConstant<int64_t>(DType::I64, v, false);
  } else {
    return n.fail("'" + f + "' constants are not supported");
  }
  n.setKnownOutput(0, t);
  return Status::ok();
}

Status importIdentity(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorType t, n.inputType(0));
  (void)t;
  n.aliasOutput(0, 0);
  return Status::ok();
}

Status importDropout(OnnxNode& n) {
  if (n.outputUsed(1)) return n.fail("the mask output is not supported (unsupported feature)");
  double ratio = 0.5;
  // Before opset 12 ONNX has no training flag: the runtime decides. PyTorch exports a Dropout
  // node only when training (an eval-mode export drops it), and hgpc compiles for training, so a
  // Dropout of those opsets is a training-mode dropout.
  bool training = true;
  if (n.opset() < 12) {
    HGP_ASSIGN_OR_RETURN(ratio, n.attrFloat("ratio", 0.5));
  } else {
    if (n.hasInput(1)) {
      HGP_ASSIGN_OR_RETURN(ratio, n.staticScalar(1, "ratio"));
    }
    training = false;
    if (n.hasInput(2)) {
      HGP_ASSIGN_OR_RETURN(double t, n.staticScalar(2, "training_mode"));
      training = t != 0;
    }
  }
  HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
  if (!training || ratio == 0) {
    n.setOutput(0, x);
    return Status::ok();
  }
  if (!(ratio > 0 && ratio < 1))
    return n.fail("ratio " + std::to_string(ratio) + " is not in [0, 1)");
  AttrMap a;
  a.setFloat("ratio", ratio);
  a.setInt("seed", 0);
  a.setInt("key", n.ctx().nextDropoutKey++);
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::Dropout, {x}, a));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

Status importShape(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorType t, n.inputType(0));
  int64_t r = t.rank();
  HGP_ASSIGN_OR_RETURN(int64_t start, n.attrInt("start", 0));
  HGP_ASSIGN_OR_RETURN(int64_t end, n.attrInt("end", r));
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  std::vector<int64_t> dims;
  for (int64_t d = start; d < end; ++d) dims.push_back(t.shape[size_t(d)]);
  n.setKnownOutput(0, makeI64Tensor(dims));
  return Status::ok();
}

Status importGather(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorDataPtr indices, n.staticInput(1, "indices"));
  if (isFloatDType(indices->type.dtype) || indices->type.dtype == DType::Bool)
    return n.fail("indices must be integers");
  if (indices->type.numElements() > kMaxFoldedBytes / 8) return n.fail("too many indices to fold");
  HGP_ASSIGN_OR_RETURN(TensorType dt, n.inputType(0));
  if (dt.shape.empty()) return n.fail("data must have rank 1 or more");
  HGP_ASSIGN_OR_RETURN(int64_t axis, n.attrInt("axis", 0));
  HGP_ASSIGN_OR_RETURN(axis, normalizeAxisFor(n, axis, dt.rank()));
  if (!n.known(0)) {
    HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
    int64_t dim = x->shape()[size_t(axis)];
    std::vector<int64_t> idx = readInts(*indices);
    for (int64_t& i : idx) {
      if (i < -dim || i >= dim)
        return n.fail("index " + std::to_string(i) + " is out of range for dim " +
                      std::to_string(dim));
      if (i < 0) i += dim;
    }
    return gatherAsView(n, x, axis, indices->type.shape, idx);
  }
  HGP_ASSIGN_OR_RETURN(TensorDataPtr data, n.staticInput(0, "data"));
  const Shape& ds = data->type.shape;
  Shape out(ds.begin(), ds.begin() + axis);
  out.insert(out.end(), indices->type.shape.begin(), indices->type.shape.end());
  out.insert(out.end(), ds.begin() + axis + 1, ds.end());
  HGP_ASSIGN_OR_RETURN(auto res, makeTensor({data->type.dtype, out}, where(n)));
  int64_t outer = 1, inner = dtypeSize(data->type.dtype), dim = ds[size_t(axis)];
  for (int64_t d = 0; d < axis; ++d) outer *= ds[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < ds.size(); ++d) inner *= ds[d];
  std::vector<int64_t> idx = readInts(*indices);
  size_t pos = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i : idx) {
      if (i < -dim || i >= dim)
        return n.fail("index " + std::to_string(i) + " is out of range for dim " +
                      std::to_string(dim));
      if (i < 0) i += dim;
      if (inner)
        std::memcpy(res->bytes.data() + pos, data->bytes.data() + (o * dim + i) * inner,
                    size_t(inner));
      pos += size_t(inner);
    }
  }
  n.setKnownOutput(0, TensorDataPtr(std::move(res)));
  return Status::ok();
}

Status importCast(OnnxNode& n) {
  if (!n.hasAttr("to")) return n.fail("attribute 'to' is required");
  HGP_ASSIGN_OR_RETURN(int64_t to, n.attrInt("to", 0));
  if (to < 0 || to > INT32_MAX) return n.fail("'to' is not a data type");
  HGP_ASSIGN_OR_RETURN(DType dst, dtypeFromOnnx(int32_t(to), where(n) + " target"));
  TensorDataPtr k = n.known(0);
  if (!k) {
    HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
    auto computed = [](DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; };
    bool mask = n.ctx().boolMasks.count(n.inputName(0)) > 0; // a bool that is a 0/1 mask already
    if (mask && dst == DType::Bool) {
      n.setOutput(0, x);
      if (n.hasOutput(0)) n.ctx().boolMasks.insert(n.outputName(0));
      return Status::ok();
    }
    if (dst == DType::Bool && computed(x->dtype())) return castToMask(n, x); // X != 0
    if (mask && !computed(dst))
      return n.fail(std::string("a bool tensor can be cast to a float dtype or bool, not ") +
                    dtypeName(dst) + " (hgpc computes in float dtypes)");
    if (x->dtype() == dst) {
      n.setOutput(0, x);
      return Status::ok();
    }
    // Between the float dtypes the IR computes in (f32, bf16, f16), and from a bool graph input
    // to them: the IR's Cast.
    if (!(computed(x->dtype()) || x->dtype() == DType::Bool) || !computed(dst))
      return n.fail(std::string("casting a run-time tensor from ") + dtypeName(x->dtype()) +
                    " to " + dtypeName(dst) + " is not supported");
    AttrMap a;
    a.setString("to", dtypeName(dst));
    HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::Cast, {x}, a));
    n.setOutput(0, node->output(0));
    return Status::ok();
  }
  if (k->type.dtype == dst) {
    n.setKnownOutput(0, k);
    return Status::ok();
  }
  if (!isFoldableDType(k->type.dtype) || !isFoldableDType(dst))
    return n.fail(std::string("cannot fold a cast from ") + dtypeName(k->type.dtype) + " to " +
                  dtypeName(dst));
  HGP_ASSIGN_OR_RETURN(auto out, makeTensor({dst, k->type.shape}, where(n)));
  int64_t count = k->type.numElements();
  bool srcFloat = isFloatDType(k->type.dtype), dstFloat = isFloatDType(dst);
  for (int64_t i = 0; i < count; ++i) {
    if (srcFloat || dstFloat)
      writeDouble(*out, i, readDouble(*k, i));
    else
      writeInt(*out, i, readInt(*k, i));
  }
  n.setKnownOutput(0, TensorDataPtr(std::move(out)));
  return Status::ok();
}

Status importConstantOfShape(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(auto shape, n.staticInts(0, "shape"));
  followBatch(n.ctx(), shape, -1);
  for (int64_t d : shape)
    if (d < 0) return n.fail("shape " + shapeToString(shape) + " has a negative dim");
  HGP_ASSIGN_OR_RETURN(TensorDataPtr value, n.attrTensor("value"));
  if (!value) value = makeConstant<float>(DType::F32, {0.0f}, true);
  if (value->type.numElements() != 1) return n.fail("value must have exactly one element");
  HGP_ASSIGN_OR_RETURN(int64_t count, checkedProduct(n, shape));
  HGP_ASSIGN_OR_RETURN(auto out, makeTensor({value->type.dtype, shape}, where(n)));
  size_t esize = size_t(dtypeSize(value->type.dtype));
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(out->bytes.data() + size_t(i) * esize, value->bytes.data(), esize);
  n.setKnownOutput(0, TensorDataPtr(std::move(out)));
  return Status::ok();
}

Status importRange(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorDataPtr start, n.staticInput(0, "start"));
  HGP_ASSIGN_OR_RETURN(TensorDataPtr limit, n.staticInput(1, "limit"));
  HGP_ASSIGN_OR_RETURN(TensorDataPtr delta, n.staticInput(2, "delta"));
  DType dt = start->type.dtype;
  for (const auto& t : {start, limit, delta}) {
    if (t->type.numElements() != 1) return n.fail("start, limit and delta must be scalars");
    if (t->type.dtype != dt) return n.fail("start, limit and delta must have the same type");
  }
  if (!isFoldableDType(dt) || dt == DType::Bool)
    return n.fail(std::string("Range over ") + dtypeName(dt) + " is not supported");
  bool isInt = !isFloatDType(dt);
  double count;
  if (isInt) {
    __int128 s = readInt(*start, 0), l = readInt(*limit, 0), d = readInt(*delta, 0);
    if (d == 0) return n.fail("delta must not be 0");
    __int128 span = l - s, q = span / d;
    if (q * d != span && (span < 0) == (d < 0)) ++q;
    count = double(q);
  } else {
    double d = readDouble(*delta, 0);
    if (d == 0) return n.fail("delta must not be 0");
    count = std::ceil((readDouble(*limit, 0) - readDouble(*start, 0)) / d);
    if (std::isnan(count)) return n.fail("start, limit and delta must be finite");
  }
  if (count < 0) count = 0;
  if (count > double(kMaxFoldedBytes))
    return n.fail("the range would have more than " + std::to_string(kMaxFoldedBytes) +
                  " elements");
  HGP_ASSIGN_OR_RETURN(auto out, makeTensor({dt, {int64_t(count)}}, where(n)));
  for (int64_t i = 0; i < int64_t(count); ++i) {
    if (isInt)
      writeInt(*out, i,
               int64_t(uint64_t(readInt(*start, 0)) + uint64_t(i) * uint64_t(readInt(*delta, 0))));
    else
      writeDouble(*out, i, readDouble(*start, 0) + double(i) * readDouble(*delta, 0));
  }
  n.setKnownOutput(0, TensorDataPtr(std::move(out)));
  return Status::ok();
}

} // namespace hgp
