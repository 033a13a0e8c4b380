// Importers for broadcasting arithmetic: Add, Sub, Mul, Div, Sum, Max, Min and Pow. Max and Min
// of n operands are a left-to-right chain of the IR's binary ops. When every operand is
// known at compile time (shape chains such as "channels / groups"), the result is folded instead.
// Pow with a run-time base and a constant exponent is lowered to the ops PyTorch's own pow kernel
// uses for that exponent (x * x for 2, sqrt for 0.5, ...), so it trains through their gradients;
// the layer norm of an opset < 17 export writes Pow(x - mean, 2).
#include "ir/OpInfo.h"
#include "frontends/onnx/importers/Importers.h"

#include <cmath>

namespace hgp {

namespace {

/// Broadcast strides of `s` (right-aligned) against the output shape `out`.
std::vector<int64_t> broadcastStrides(const Shape& s, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0), own = rowMajorStrides(s);
  size_t off = out.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) st[off + i] = s[i] == 1 ? 0 : own[i];
  return st;
}

int64_t applyInt(char op, int64_t a, int64_t b) {
  // Wrapping arithmetic through unsigned, so that overflow is defined.
  uint64_t ua = uint64_t(a), ub = uint64_t(b);
  switch (op) {
  case '+':
    return int64_t(ua + ub);
  case '-':
    return int64_t(ua - ub);
  case '*':
    return int64_t(ua * ub);
  case '^':
    return int64_t(std::llround(std::pow(double(a), double(b))));
  default:
    return (a == INT64_MIN && b == -1) ? a : a / b;
  }
}

double applyFloat(char op, double a, double b) {
  switch (op) {
  case '+':
    return a + b;
  case '-':
    return a - b;
  case '*':
    return a * b;
  case '^':
    return std::pow(a, b);
  default:
    return a / b;
  }
}

/// The old (opset < 7) `broadcast`/`axis` form: B's dims line up with A's starting at `axis`.
/// Returns B's shape padded with trailing 1s so that numpy broadcasting means the same.
Expected<std::optional<Shape>> legacyBroadcastShape(OnnxNode& n, const Shape& a, const Shape& b) {
  HGP_ASSIGN_OR_RETURN(int64_t broadcast, n.attrInt("broadcast", 0));
  if (!broadcast || !n.hasAttr("axis")) return std::optional<Shape>();
  HGP_ASSIGN_OR_RETURN(int64_t axis, n.attrInt("axis", 0));
  HGP_ASSIGN_OR_RETURN(axis, normalizeAxisFor(n, axis, int64_t(a.size())));
  int64_t trailing = int64_t(a.size()) - axis - int64_t(b.size());
  if (trailing < 0)
    return n.fail("B " + shapeToString(b) + " does not fit A at axis " + std::to_string(axis));
  Shape s = b;
  s.insert(s.end(), size_t(trailing), 1);
  return std::optional<Shape>(s);
}

Status binary(OnnxNode& n, OpKind op, char sym) {
  HGP_ASSIGN_OR_RETURN(TensorType at, n.inputType(0));
  HGP_ASSIGN_OR_RETURN(TensorType bt, n.inputType(1));
  HGP_ASSIGN_OR_RETURN(auto legacy, legacyBroadcastShape(n, at.shape, bt.shape));
  TensorDataPtr ka = n.known(0), kb = n.known(1);
  if (ka && kb) {
    TensorDataPtr b = legacy ? reshapeTensor(*kb, *legacy) : kb;
    HGP_ASSIGN_OR_RETURN(TensorDataPtr r, foldBinary(n, sym, *ka, *b));
    n.setKnownOutput(0, r);
    return Status::ok();
  }
  HGP_ASSIGN_OR_RETURN(Value * a, n.input(0));
  HGP_ASSIGN_OR_RETURN(Value * b, n.input(1));
  if (legacy && *legacy != b->shape()) {
    AttrMap r;
    r.setInts("shape", *legacy);
    HGP_ASSIGN_OR_RETURN(Node * reshape, n.emit(OpKind::Reshape, {b}, r));
    b = reshape->output(0);
  }
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(op, {a, b}, {}));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

} // namespace

Expected<TensorDataPtr> foldBinary(const OnnxNode& n, char op, const TensorData& a,
                                   const TensorData& b) {
  DType dt = a.type.dtype;
  if (b.type.dtype != dt)
    return n.fail(std::string("operands have different types: ") + dtypeName(dt) + " and " +
                  dtypeName(b.type.dtype));
  if (!isFoldableDType(dt) || dt == DType::Bool)
    return n.fail(std::string("cannot compute on ") + dtypeName(dt) + " constants");
  auto shape = broadcastShapes(a.type.shape, b.type.shape);
  if (!shape) return n.fail(shape.status().message());
  HGP_ASSIGN_OR_RETURN(auto out, makeTensor({dt, *shape}, "node '" + n.loc() + "'"));
  int64_t count = out->type.numElements();
  if (count == 0) return TensorDataPtr(std::move(out));
  std::vector<int64_t> sa = broadcastStrides(a.type.shape, *shape),
                       sb = broadcastStrides(b.type.shape, *shape);
  std::vector<int64_t> idx(shape->size(), 0);
  int64_t ia = 0, ib = 0;
  bool isInt = !isFloatDType(dt);
  for (int64_t k = 0; k < count; ++k) {
    if (isInt) {
      int64_t x = readInt(a, ia), y = readInt(b, ib);
      if (op == '/' && y == 0) return n.fail("integer division by zero in a constant");
      writeInt(*out, k, applyInt(op, x, y));
    } else {
      writeDouble(*out, k, applyFloat(op, readDouble(a, ia), readDouble(b, ib)));
    }
    for (size_t d = shape->size(); d-- > 0;) {
      if (++idx[d] < (*shape)[d]) {
        ia += sa[d];
        ib += sb[d];
        break;
      }
      ia -= sa[d] * ((*shape)[d] - 1);
      ib -= sb[d] * ((*shape)[d] - 1);
      idx[d] = 0;
    }
  }
  return TensorDataPtr(std::move(out));
}

Status importAdd(OnnxNode& n) {
  return binary(n, OpKind::Add, '+');
}
Status importSub(OnnxNode& n) {
  return binary(n, OpKind::Sub, '-');
}
Status importMul(OnnxNode& n) {
  return binary(n, OpKind::Mul, '*');
}
Status importDiv(OnnxNode& n) {
  return binary(n, OpKind::Div, '/');
}

Status importSum(OnnxNode& n) {
  bool allKnown = true;
  for (size_t i = 0; i < n.numInputs(); ++i) allKnown = allKnown && n.known(i);
  if (allKnown) {
    TensorDataPtr acc = n.known(0);
    for (size_t i = 1; i < n.numInputs(); ++i) {
      HGP_ASSIGN_OR_RETURN(acc, foldBinary(n, '+', *acc, *n.known(i)));
    }
    n.setKnownOutput(0, acc);
    return Status::ok();
  }
  if (n.numInputs() == 1) {
    n.aliasOutput(0, 0);
    return Status::ok();
  }
  std::vector<Value*> ins;
  for (size_t i = 0; i < n.numInputs(); ++i) {
    HGP_ASSIGN_OR_RETURN(Value * v, n.input(i));
    ins.push_back(v);
  }
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::Sum, ins, {}));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

namespace {

Status chain(OnnxNode& n, OpKind op) {
  if (n.numInputs() == 1) {
    n.aliasOutput(0, 0);
    return Status::ok();
  }
  std::vector<size_t> all;
  for (size_t i = 0; i < n.numInputs(); ++i) all.push_back(i);
  DType t = workDType(n, all);
  Value* acc = nullptr;
  for (size_t i = 0; i < n.numInputs(); ++i) {
    HGP_ASSIGN_OR_RETURN(TensorType vt, n.inputType(i));
    if (!n.known(i) && !isFloatDType(vt.dtype))
      return n.fail(std::string(n.opType()) + " of " + dtypeName(vt.dtype) +
                    " tensors is not supported (hgpc computes in float dtypes)");
    HGP_ASSIGN_OR_RETURN(Value * v, floatOperand(n, i, t));
    if (i == 0) {
      acc = v;
      continue;
    }
    HGP_ASSIGN_OR_RETURN(Node * node, n.emit(op, {acc, v}, {}));
    acc = node->output(0);
  }
  n.setOutput(0, acc);
  return Status::ok();
}

} // namespace

Status importMax(OnnxNode& n) {
  return chain(n, OpKind::Max);
}
Status importMin(OnnxNode& n) {
  return chain(n, OpKind::Min);
}

namespace {

/// The one value of a constant exponent (every element equal), or nullopt.
std::optional<double> uniformValue(const TensorData& t) {
  int64_t n = t.type.numElements();
  if (n == 0) return std::nullopt;
  double v = readDouble(t, 0);
  for (int64_t i = 1; i < n; ++i)
    if (readDouble(t, i) != v) return std::nullopt;
  return v;
}

} // namespace

Status importPow(OnnxNode& n) {
  TensorDataPtr kx = n.known(0), ky = n.known(1);
  if (kx && ky) {
    HGP_ASSIGN_OR_RETURN(TensorDataPtr r, foldBinary(n, '^', *kx, *ky));
    n.setKnownOutput(0, r);
    return Status::ok();
  }
  const char* supported = "hgpc lowers Pow with a constant exponent of 1, 2, 3, 0.5, -0.5, -1 or -2";
  if (!ky) return n.fail(std::string("an exponent computed at run time is not supported; ") + supported);
  std::optional<double> e = uniformValue(*ky);
  if (!e || !(*e == 1 || *e == 2 || *e == 3 || *e == 0.5 || *e == -0.5 || *e == -1 || *e == -2))
    return n.fail(std::string("exponent ") + (e ? std::to_string(*e) : "with differing elements") +
                  " is not supported; " + supported);
  HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
  if (!isFloatDType(x->dtype()))
    return n.fail(std::string("Pow of a ") + dtypeName(x->dtype()) + " tensor is not supported");
  auto op = [&](OpKind k, std::vector<Value*> in) -> Expected<Value*> {
    HGP_ASSIGN_OR_RETURN(Node * node, n.emit(k, std::move(in), {}));
    return node->output(0);
  };
  Value* y = x;
  double m = std::fabs(*e);
  if (m == 0.5) {
    HGP_ASSIGN_OR_RETURN(y, op(OpKind::Sqrt, {x}));
  } else if (m >= 2) { // as PyTorch's pow: x * x, and (x * x) * x
    HGP_ASSIGN_OR_RETURN(y, op(OpKind::Mul, {x, x}));
    if (m == 3) {
      HGP_ASSIGN_OR_RETURN(y, op(OpKind::Mul, {y, x}));
    }
  }
  if (*e < 0) {
    HGP_ASSIGN_OR_RETURN(y, op(OpKind::Reciprocal, {y}));
  }
  HGP_ASSIGN_OR_RETURN(Shape out, broadcastShapes(x->shape(), ky->type.shape));
  if (out != y->shape()) { // a constant exponent of higher rank broadcasts the result
    AttrMap a;
    a.setInts("shape", out);
    HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::Expand, {y}, a));
    y = node->output(0);
  }
  if (y == x) {
    n.aliasOutput(0, 0);
    return Status::ok();
  }
  n.setOutput(0, y);
  return Status::ok();
}

} // namespace hgp
