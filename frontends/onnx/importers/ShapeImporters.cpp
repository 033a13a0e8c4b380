// Importers for data movement: Concat, Split, Slice, Flatten, Reshape, Transpose, Squeeze,
// Unsqueeze, Expand and Pad. Each folds when its data is known at compile time (shape chains),
// and otherwise resolves everything ONNX leaves implicit (0 and -1 in Reshape, negative axes,
// INT64_MAX slice ends) into the IR's explicit attributes.
#include "ir/OpInfo.h"
#include "frontends/onnx/importers/Importers.h"

#include <cstring>

namespace hgp {

namespace {

/// Binds the result to input 0 reshaped to `shape`: folded when known, an alias when the shape
/// does not change, else an IR Reshape.
Status reshapeTo(OnnxNode& n, const Shape& shape) {
  if (TensorDataPtr k = n.known(0)) {
    n.setKnownOutput(0, reshapeTensor(*k, shape));
    return Status::ok();
  }
  HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
  if (x->shape() == shape) {
    n.setOutput(0, x);
    return Status::ok();
  }
  AttrMap a;
  a.setInts("shape", shape);
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::Reshape, {x}, a));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

/// Normalizes a list of axes against `rank`; duplicates are an error.
Expected<std::vector<int64_t>> normalizeAxes(OnnxNode& n, const std::vector<int64_t>& axes,
                                             int64_t rank) {
  std::vector<int64_t> out;
  std::vector<bool> seen(size_t(rank), false);
  for (int64_t a : axes) {
    HGP_ASSIGN_OR_RETURN(int64_t x, normalizeAxisFor(n, a, rank));
    if (seen[size_t(x)]) return n.fail("axis " + std::to_string(a) + " is listed twice");
    seen[size_t(x)] = true;
    out.push_back(x);
  }
  return out;
}

/// The `axes` of Squeeze/Unsqueeze: an attribute before opset 13, an input from it on.
Expected<std::optional<std::vector<int64_t>>> squeezeAxes(OnnxNode& n) {
  using R = std::optional<std::vector<int64_t>>;
  if (n.hasInput(1)) {
    HGP_ASSIGN_OR_RETURN(auto axes, n.staticInts(1, "axes"));
    return R(axes);
  }
  if (n.hasAttr("axes")) {
    HGP_ASSIGN_OR_RETURN(auto axes, n.attrInts("axes"));
    return R(axes);
  }
  return R();
}

/// Copies known tensors into one along `axis` (all of the same dtype and rank).
Expected<TensorDataPtr> foldConcat(OnnxNode& n, const std::vector<TensorDataPtr>& parts,
                                   int64_t axis) {
  const TensorType& first = parts[0]->type;
  Shape shape = first.shape;
  shape[size_t(axis)] = 0;
  for (const auto& p : parts) {
    if (p->type.dtype != first.dtype || p->type.rank() != first.rank())
      return n.fail("inputs must have the same dtype and rank");
    for (int64_t d = 0; d < first.rank(); ++d)
      if (d != axis && p->type.shape[size_t(d)] != first.shape[size_t(d)])
        return n.fail("input shapes " + shapeToString(p->type.shape) + " and " +
                      shapeToString(first.shape) + " differ off the concat axis");
    shape[size_t(axis)] += p->type.shape[size_t(axis)];
  }
  HGP_ASSIGN_OR_RETURN(auto out, makeTensor({first.dtype, shape}, "node '" + n.loc() + "'"));
  int64_t outer = 1, esize = dtypeSize(first.dtype);
  for (int64_t d = 0; d < axis; ++d) outer *= shape[size_t(d)];
  size_t pos = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const auto& p : parts) {
      int64_t chunk = p->type.numElements() / outer * esize;
      if (chunk) std::memcpy(out->bytes.data() + pos, p->bytes.data() + o * chunk, size_t(chunk));
      pos += size_t(chunk);
    }
  }
  return TensorDataPtr(std::move(out));
}

} // namespace

Status importConcat(OnnxNode& n) {
  if (!n.hasAttr("axis")) return n.fail("attribute 'axis' is required");
  HGP_ASSIGN_OR_RETURN(TensorType t0, n.inputType(0));
  HGP_ASSIGN_OR_RETURN(int64_t axis, n.attrInt("axis", 0));
  HGP_ASSIGN_OR_RETURN(axis, normalizeAxisFor(n, axis, t0.rank()));
  std::vector<TensorDataPtr> parts;
  for (size_t i = 0; i < n.numInputs(); ++i) parts.push_back(n.known(i));
  if (std::all_of(parts.begin(), parts.end(), [](const TensorDataPtr& p) { return p; })) {
    HGP_ASSIGN_OR_RETURN(TensorDataPtr r, foldConcat(n, parts, axis));
    n.setKnownOutput(0, r);
    return Status::ok();
  }
  std::vector<Value*> ins;
  for (size_t i = 0; i < n.numInputs(); ++i) {
    // ONNX allows empty tensors in a Concat; they contribute nothing.
    if (parts[i] && parts[i]->type.numElements() == 0) continue;
    HGP_ASSIGN_OR_RETURN(Value * v, n.input(i));
    ins.push_back(v);
  }
  if (ins.size() == 1) {
    n.setOutput(0, ins[0]);
    return Status::ok();
  }
  AttrMap a;
  a.setInt("axis", axis);
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::Concat, ins, a));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

Status importSplit(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorType xt, n.inputType(0));
  HGP_ASSIGN_OR_RETURN(int64_t axis, n.attrInt("axis", 0));
  HGP_ASSIGN_OR_RETURN(axis, normalizeAxisFor(n, axis, xt.rank()));
  int64_t dim = xt.shape[size_t(axis)], parts = int64_t(n.numOutputs());
  std::vector<int64_t> sizes;
  if (n.hasInput(1)) {
    HGP_ASSIGN_OR_RETURN(sizes, n.staticInts(1, "split"));
  } else if (n.hasAttr("split")) {
    HGP_ASSIGN_OR_RETURN(sizes, n.attrInts("split"));
  } else if (n.hasAttr("num_outputs")) {
    HGP_ASSIGN_OR_RETURN(int64_t k, n.attrInt("num_outputs", 0));
    if (k != parts)
      return n.fail("num_outputs " + std::to_string(k) + " does not match the " +
                    std::to_string(parts) + " outputs");
    int64_t chunk = (dim + k - 1) / k;
    for (int64_t i = 0; i < k; ++i) sizes.push_back(std::min(chunk, dim - i * chunk));
  } else {
    if (dim % parts != 0)
      return n.fail("dim " + std::to_string(dim) + " does not split evenly into " +
                    std::to_string(parts) + " outputs");
    sizes.assign(size_t(parts), dim / parts);
  }
  if (int64_t(sizes.size()) != parts)
    return n.fail("split has " + std::to_string(sizes.size()) + " sizes for " +
                  std::to_string(parts) + " outputs");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 1) return n.fail("split sizes must be positive, got " + std::to_string(s));
    if (s > dim) return n.fail("split size " + std::to_string(s) + " exceeds the dim");
    total += s;
  }
  if (total != dim)
    return n.fail("split sizes add up to " + std::to_string(total) + ", the axis has " +
                  std::to_string(dim));
  if (TensorDataPtr k = n.known(0)) {
    auto strides = rowMajorStrides(xt.shape);
    int64_t start = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      Shape s = xt.shape;
      s[size_t(axis)] = sizes[i];
      HGP_ASSIGN_OR_RETURN(
          TensorDataPtr part,
          stridedCopy(*k, s, strides, start * strides[size_t(axis)], "node '" + n.loc() + "'"));
      n.setKnownOutput(i, part);
      start += sizes[i];
    }
    return Status::ok();
  }
  HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
  AttrMap a;
  a.setInt("axis", axis);
  a.setInts("split", sizes);
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::Split, {x}, a, int(parts)));
  for (size_t i = 0; i < node->numOutputs(); ++i) n.setOutput(i, node->output(i));
  return Status::ok();
}

Status importSlice(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorType xt, n.inputType(0));
  int64_t r = xt.rank();
  std::vector<int64_t> starts, ends, axes, steps;
  if (n.opset() < 10) {
    HGP_ASSIGN_OR_RETURN(starts, n.attrInts("starts"));
    HGP_ASSIGN_OR_RETURN(ends, n.attrInts("ends"));
    if (!n.hasAttr("starts") || !n.hasAttr("ends"))
      return n.fail("attributes 'starts' and 'ends' are required");
    HGP_ASSIGN_OR_RETURN(axes, n.attrInts("axes"));
  } else {
    HGP_ASSIGN_OR_RETURN(starts, n.staticInts(1, "starts"));
    HGP_ASSIGN_OR_RETURN(ends, n.staticInts(2, "ends"));
    if (n.hasInput(3)) {
      HGP_ASSIGN_OR_RETURN(axes, n.staticInts(3, "axes"));
    }
    if (n.hasInput(4)) {
      HGP_ASSIGN_OR_RETURN(steps, n.staticInts(4, "steps"));
    }
  }
  if (axes.empty() && !(n.opset() < 10 ? n.hasAttr("axes") : n.hasInput(3)))
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  if (steps.empty() && !n.hasInput(4)) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return n.fail("starts, ends, axes and steps must have the same length");
  HGP_ASSIGN_OR_RETURN(axes, normalizeAxes(n, axes, r));

  std::vector<int64_t> st(size_t(r), 0), en(xt.shape), sp(size_t(r), 1);
  Shape out = xt.shape;
  bool identity = true;
  for (size_t k = 0; k < axes.size(); ++k) {
    size_t a = size_t(axes[k]);
    int64_t dim = out[a], step = steps[k], s = starts[k], e = ends[k];
    if (step == 0) return n.fail("slice steps must not be 0");
    // Steps longer than the dim pick one element, like a step of exactly the dim.
    step = std::clamp<int64_t>(step, -std::max<int64_t>(dim, 1), std::max<int64_t>(dim, 1));
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      out[a] = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      out[a] = s > e ? (s - e - step - 1) / -step : 0;
    }
    st[a] = s;
    en[a] = e;
    sp[a] = step;
    identity = identity && s == 0 && e == dim && step == 1;
  }
  if (TensorDataPtr k = n.known(0)) {
    auto strides = rowMajorStrides(xt.shape);
    std::vector<int64_t> outStrides(static_cast<size_t>(r));
    int64_t offset = 0;
    for (size_t d = 0; d < size_t(r); ++d) {
      outStrides[d] = strides[d] * sp[d];
      if (out[d] > 0) offset += st[d] * strides[d];
    }
    HGP_ASSIGN_OR_RETURN(TensorDataPtr res,
                         stridedCopy(*k, out, outStrides, offset, "node '" + n.loc() + "'"));
    n.setKnownOutput(0, res);
    return Status::ok();
  }
  for (size_t d = 0; d < size_t(r); ++d)
    if (out[d] == 0)
      return n.fail("the slice is empty along axis " + std::to_string(d) +
                    "; tensors with a zero dim are not supported");
  HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
  if (identity) {
    n.setOutput(0, x);
    return Status::ok();
  }
  AttrMap a;
  a.setInts("starts", st);
  a.setInts("ends", en);
  a.setInts("steps", sp);
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::Slice, {x}, a));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

Status importFlatten(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorType xt, n.inputType(0));
  HGP_ASSIGN_OR_RETURN(int64_t axis, n.attrInt("axis", 1));
  int64_t r = xt.rank();
  if (axis < -r || axis > r)
    return n.fail("axis " + std::to_string(axis) + " is out of range for rank " +
                  std::to_string(r));
  if (axis < 0) axis += r;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < r; ++d) (d < axis ? outer : inner) *= xt.shape[size_t(d)];
  return reshapeTo(n, {outer, inner});
}

Status importReshape(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorType xt, n.inputType(0));
  HGP_ASSIGN_OR_RETURN(auto shape, n.staticInts(1, "shape"));
  if (xt.rank() > 0) followBatch(n.ctx(), shape, xt.shape[0]);
  HGP_ASSIGN_OR_RETURN(int64_t allowZero, n.attrInt("allowzero", 0));
  Shape out(shape.size());
  int64_t inferAt = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[i];
    if (d == 0 && allowZero)
      return n.fail("shape has a zero dim (allowzero=1); empty tensors are not supported");
    if (d == 0) {
      if (int64_t(i) >= xt.rank())
        return n.fail("shape entry " + std::to_string(i) +
                      " is 0 (copy the input dim), but the "
                      "input has rank " +
                      std::to_string(xt.rank()));
      d = xt.shape[i];
    } else if (d == -1) {
      if (inferAt >= 0) return n.fail("shape has more than one -1");
      inferAt = int64_t(i);
      out[i] = 1;
      continue;
    } else if (d < -1) {
      return n.fail("shape entry " + std::to_string(d) + " is invalid");
    }
    out[i] = d;
    if (d > 0 && known > kMaxTensorElements / d)
      return n.fail("shape " + shapeToString(shape) + " has more than 2^40 elements");
    known *= d;
  }
  int64_t total = xt.numElements();
  if (inferAt >= 0) {
    if (known == 0 || total % known != 0)
      return n.fail("cannot reshape " + shapeToString(xt.shape) + " to " + shapeToString(shape));
    out[size_t(inferAt)] = total / known;
  } else if (known != total) {
    return n.fail("cannot reshape " + shapeToString(xt.shape) + " to " + shapeToString(shape));
  }
  return reshapeTo(n, out);
}

Status importTranspose(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorType xt, n.inputType(0));
  size_t r = size_t(xt.rank());
  std::vector<int64_t> reversed(r);
  for (size_t i = 0; i < r; ++i) reversed[i] = int64_t(r - 1 - i);
  HGP_ASSIGN_OR_RETURN(auto perm, n.attrInts("perm", reversed));
  if (perm.size() != r)
    return n.fail("perm has " + std::to_string(perm.size()) + " entries for rank " +
                  std::to_string(r));
  std::vector<bool> seen(r, false);
  bool identity = true;
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    if (perm[i] < 0 || perm[i] >= int64_t(r) || seen[size_t(perm[i])])
      return n.fail("perm " + shapeToString(perm) + " is not a permutation");
    seen[size_t(perm[i])] = true;
    out[i] = xt.shape[size_t(perm[i])];
    identity = identity && perm[i] == int64_t(i);
  }
  if (TensorDataPtr k = n.known(0)) {
    auto strides = rowMajorStrides(xt.shape);
    std::vector<int64_t> outStrides(r);
    for (size_t i = 0; i < r; ++i) outStrides[i] = strides[size_t(perm[i])];
    HGP_ASSIGN_OR_RETURN(TensorDataPtr res,
                         stridedCopy(*k, out, outStrides, 0, "node '" + n.loc() + "'"));
    n.setKnownOutput(0, res);
    return Status::ok();
  }
  HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
  if (identity) {
    n.setOutput(0, x);
    return Status::ok();
  }
  AttrMap a;
  a.setInts("perm", perm);
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::Transpose, {x}, a));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

Status importSqueeze(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorType xt, n.inputType(0));
  HGP_ASSIGN_OR_RETURN(auto axesOpt, squeezeAxes(n));
  std::vector<bool> drop(size_t(xt.rank()), false);
  if (axesOpt) {
    HGP_ASSIGN_OR_RETURN(auto axes, normalizeAxes(n, *axesOpt, xt.rank()));
    for (int64_t a : axes) {
      if (xt.shape[size_t(a)] != 1)
        return n.fail("cannot squeeze axis " + std::to_string(a) + " of shape " +
                      shapeToString(xt.shape) + ": its size is not 1");
      drop[size_t(a)] = true;
    }
  } else {
    for (size_t d = 0; d < drop.size(); ++d) drop[d] = xt.shape[d] == 1;
  }
  Shape out;
  for (size_t d = 0; d < drop.size(); ++d)
    if (!drop[d]) out.push_back(xt.shape[d]);
  return reshapeTo(n, out);
}

Status importUnsqueeze(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorType xt, n.inputType(0));
  HGP_ASSIGN_OR_RETURN(auto axesOpt, squeezeAxes(n));
  if (!axesOpt) return n.fail("axes are required");
  int64_t outRank = xt.rank() + int64_t(axesOpt->size());
  HGP_ASSIGN_OR_RETURN(auto axes, normalizeAxes(n, *axesOpt, outRank));
  std::vector<bool> inserted(size_t(outRank), false);
  for (int64_t a : axes) inserted[size_t(a)] = true;
  Shape out;
  size_t next = 0;
  for (int64_t d = 0; d < outRank; ++d) out.push_back(inserted[size_t(d)] ? 1 : xt.shape[next++]);
  return reshapeTo(n, out);
}

Status importExpand(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorType xt, n.inputType(0));
  HGP_ASSIGN_OR_RETURN(auto target, n.staticInts(1, "shape"));
  if (xt.rank() > 0 && size_t(xt.rank()) == target.size()) followBatch(n.ctx(), target, xt.shape[0]);
  for (int64_t d : target)
    if (d < 0) return n.fail("shape " + shapeToString(target) + " has a negative dim");
  auto outShape = broadcastShapes(xt.shape, target);
  if (!outShape) return n.fail(outShape.status().message());
  HGP_ASSIGN_OR_RETURN(int64_t count, checkedProduct(n, *outShape));
  (void)count;
  if (TensorDataPtr k = n.known(0)) {
    std::vector<int64_t> own = rowMajorStrides(xt.shape), strides(outShape->size(), 0);
    size_t off = outShape->size() - xt.shape.size();
    for (size_t i = 0; i < xt.shape.size(); ++i) strides[off + i] = xt.shape[i] == 1 ? 0 : own[i];
    HGP_ASSIGN_OR_RETURN(TensorDataPtr res,
                         stridedCopy(*k, *outShape, strides, 0, "node '" + n.loc() + "'"));
    n.setKnownOutput(0, res);
    return Status::ok();
  }
  HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
  if (*outShape == x->shape()) {
    n.setOutput(0, x);
    return Status::ok();
  }
  AttrMap a;
  a.setInts("shape", *outShape);
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::Expand, {x}, a));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

Status importPad(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorType xt, n.inputType(0));
  int64_t r = xt.rank();
  HGP_ASSIGN_OR_RETURN(std::string mode, n.attrString("mode", "constant"));
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return n.fail("Pad mode '" + mode + "' is not supported (constant, reflect, edge)");
  std::vector<int64_t> pads;
  double value = 0;
  if (n.opset() < 11) {
    if (!n.hasAttr("pads")) return n.fail("attribute 'pads' is required");
    HGP_ASSIGN_OR_RETURN(pads, n.attrInts("pads"));
    HGP_ASSIGN_OR_RETURN(value, n.attrFloat("value", 0.0));
  } else {
    HGP_ASSIGN_OR_RETURN(pads, n.staticInts(1, "pads"));
    if (n.hasInput(2)) {
      HGP_ASSIGN_OR_RETURN(value, n.staticScalar(2, "constant_value"));
    }
  }
  std::vector<int64_t> full(size_t(2 * r), 0);
  if (n.hasInput(3)) {
    HGP_ASSIGN_OR_RETURN(auto rawAxes, n.staticInts(3, "axes"));
    HGP_ASSIGN_OR_RETURN(auto axes, normalizeAxes(n, rawAxes, r));
    if (pads.size() != 2 * axes.size())
      return n.fail("pads must have 2 entries per axis, has " + std::to_string(pads.size()));
    for (size_t k = 0; k < axes.size(); ++k) {
      full[size_t(axes[k])] = pads[k];
      full[size_t(r + axes[k])] = pads[axes.size() + k];
    }
  } else {
    if (int64_t(pads.size()) != 2 * r)
      return n.fail("pads must have " + std::to_string(2 * r) + " entries, has " +
                    std::to_string(pads.size()));
    full = pads;
  }
  bool zero = true;
  for (int64_t p : full) {
    if (p > kMaxTensorElements || p < -kMaxTensorElements)
      return n.fail("pad " + std::to_string(p) + " is out of range");
    zero = zero && p == 0;
  }
  HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
  if (zero) {
    n.setOutput(0, x);
    return Status::ok();
  }
  AttrMap a;
  a.setInts("pads", full);
  a.setString("mode", mode);
  a.setFloat("value", value);
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::Pad, {x}, a));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

} // namespace hgp
