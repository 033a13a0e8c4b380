// Importers for reductions: ReduceMean, ReduceSum and ReduceMax, with axes as an attribute
// (ReduceMean and ReduceMax before opset 18, ReduceSum before 13) or as an input, made explicit,
// sorted and non-negative; ReduceL2 as Sqrt(ReduceSum(X * X)), its definition, which trains through those ops' gradients
// (at a slice of zeros its gradient is NaN, where PyTorch's norm gives 0).
#include "frontends/onnx/importers/Importers.h"

#include <algorithm>

namespace hgp {

namespace {

/// Reduces `x` (ONNX input 0 when null) with `op` as the node's attributes and axes input say;
/// null when the node reduces nothing (noop_with_empty_axes), which the caller then aliases.
Expected<Value*> reduce(OnnxNode& n, OpKind op, Value* x = nullptr) {
  HGP_ASSIGN_OR_RETURN(TensorType xt, n.inputType(0));
  HGP_ASSIGN_OR_RETURN(int64_t keepdims, n.attrInt("keepdims", 1));
  HGP_ASSIGN_OR_RETURN(int64_t noop, n.attrInt("noop_with_empty_axes", 0));
  std::vector<int64_t> axes;
  if (n.hasInput(1)) {
    HGP_ASSIGN_OR_RETURN(axes, n.staticInts(1, "axes"));
  } else if (n.hasAttr("axes")) {
    HGP_ASSIGN_OR_RETURN(axes, n.attrInts("axes"));
  }
  if (axes.empty()) {
    // With noop_with_empty_axes (opset 18), no axes means no reduction at all.
    if (noop) return static_cast<Value*>(nullptr);
    for (int64_t d = 0; d < xt.rank(); ++d) axes.push_back(d);
  }
  std::vector<bool> seen(size_t(xt.rank()), false);
  for (int64_t& a : axes) {
    HGP_ASSIGN_OR_RETURN(a, normalizeAxisFor(n, a, xt.rank()));
    if (seen[size_t(a)]) return n.fail("axis " + std::to_string(a) + " is listed twice");
    seen[size_t(a)] = true;
  }
  std::sort(axes.begin(), axes.end());
  AttrMap attrs;
  attrs.setInts("axes", axes);
  attrs.setInt("keepdims", keepdims ? 1 : 0);
  if (!x) {
    HGP_ASSIGN_OR_RETURN(x, n.input(0));
  }
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(op, {x}, attrs));
  return node->output(0);
}

/// Binds the node's result to `y`, or to its input when `y` is null (no reduction).
Status bind(OnnxNode& n, Value* y) {
  if (y)
    n.setOutput(0, y);
  else
    n.aliasOutput(0, 0);
  return Status::ok();
}

} // namespace

Status importReduceMean(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(Value * y, reduce(n, OpKind::ReduceMean));
  return bind(n, y);
}
Status importReduceSum(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(Value * y, reduce(n, OpKind::ReduceSum));
  return bind(n, y);
}

Status importReduceMax(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorType xt, n.inputType(0));
  if (!isFloatDType(xt.dtype))
    return n.fail(std::string("ReduceMax of a ") + dtypeName(xt.dtype) +
                  " tensor is not supported (hgpc computes in float dtypes)");
  HGP_ASSIGN_OR_RETURN(Value * y, reduce(n, OpKind::ReduceMax));
  return bind(n, y);
}

Status importReduceL2(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
  if (!isFloatDType(x->dtype()))
    return n.fail(std::string("ReduceL2 of a ") + dtypeName(x->dtype()) + " tensor is not supported");
  HGP_ASSIGN_OR_RETURN(Node * sq, n.emit(OpKind::Mul, {x, x}, {}));
  HGP_ASSIGN_OR_RETURN(Value * sum, reduce(n, OpKind::ReduceSum, sq->output(0)));
  if (!sum) return bind(n, nullptr); // no axes with noop_with_empty_axes: X itself, as ONNX says
  HGP_ASSIGN_OR_RETURN(Node * root, n.emit(OpKind::Sqrt, {sum}, {}));
  n.setOutput(0, root->output(0));
  return Status::ok();
}

} // namespace hgp
