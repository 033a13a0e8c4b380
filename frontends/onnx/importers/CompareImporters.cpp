// Importers for comparisons and bool logic: Less, Greater, Equal, Not and Where, and the shared
// conversions of bool tensors.
//
// The IR has no bool arithmetic (runtime/plan/OpList.def, "Comparisons"): an ONNX bool tensor is a
// 0/1 mask of a float dtype (ImportContext::boolMasks lists the ONNX names that are such masks).
// Less, Greater and Equal become the IR ops of those names; Not(M) is 1 - M, exact on 0 and 1;
// Where is the IR's Where. A bool graph input (DType::Bool, one byte) is Cast to a mask where it is
// read, and a mask that is a bool graph output is Cast back (GraphImporter's importOutputs).
// Less and Greater of a RandomUniformLike draw against a constant stay stochastic depth's
// Bernoulli mask (importers/RandomImporters.cpp). Integer operands at run time are refused:
// hgpc computes in float dtypes.
#include "frontends/onnx/importers/Importers.h"

namespace hgp {

/// The dtype the node computes in: that of its first float operand computed at run time (f32
/// when there is none, or when it is a bool). Constants follow it: torch writes the scalar of
/// torch.where(c, 1.0, x) as a float64 Constant beside a float32 x.
DType workDType(OnnxNode& n, std::vector<size_t> operands) {
  for (size_t i : operands) {
    if (n.known(i)) continue;
    auto t = n.inputType(i);
    if (t && isFloatDType(t->dtype) && t->dtype != DType::F64) return t->dtype;
  }
  return DType::F32;
}

/// Input i as an operand of dtype `to`: a constant is converted at import (bools to 0/1), a bool
/// graph input becomes a mask by a Cast, a float of another dtype is Cast.
Expected<Value*> floatOperand(OnnxNode& n, size_t i, DType to) {
  if (TensorDataPtr k = n.known(i); k && k->type.dtype != to) {
    HGP_ASSIGN_OR_RETURN(auto c, makeTensor(TensorType{to, k->type.shape}, "a constant of " + n.loc()));
    for (int64_t e = 0; e < k->type.numElements(); ++e) writeDouble(*c, e, readDouble(*k, e));
    TensorType type = c->type;
    return n.graph().addGraphValue(n.graph().uniqueName(n.inputName(i)), TensorRole::Const, type,
                                   TensorDataPtr(std::move(c)));
  }
  HGP_ASSIGN_OR_RETURN(Value * v, n.input(i));
  if (v->dtype() != DType::Bool && !isFloatDType(v->dtype()))
    return n.fail(std::string("operand ") + std::to_string(i) + " is " + dtypeName(v->dtype()) +
                  "; hgpc computes in float dtypes, so comparisons and selections of integer "
                  "tensors at run time are not supported");
  if (v->dtype() == to) return v;
  AttrMap a;
  a.setString("to", dtypeName(to));
  HGP_ASSIGN_OR_RETURN(Node * c, n.emit(OpKind::Cast, {v}, a));
  return c->output(0);
}

namespace {

/// A scalar constant `v` of dtype `t`.
Expected<Value*> scalarConst(OnnxNode& n, DType t, double v) {
  HGP_ASSIGN_OR_RETURN(auto data, makeTensor(TensorType{t, {}}, "a constant of " + n.loc()));
  writeDouble(*data, 0, v);
  TensorType type = data->type;
  return n.graph().addGraphValue(n.graph().uniqueName(n.loc() + ".one"), TensorRole::Const, type,
                                 TensorDataPtr(std::move(data)));
}

/// Binds result 0 to the mask `m` and records that it stands for a bool.
void bindMask(OnnxNode& n, Value* m) {
  n.setOutput(0, m);
  if (n.hasOutput(0)) n.ctx().boolMasks.insert(n.outputName(0));
}

Status compare(OnnxNode& n, OpKind op) {
  DType t = workDType(n, {0, 1});
  HGP_ASSIGN_OR_RETURN(Value * a, floatOperand(n, 0, t));
  HGP_ASSIGN_OR_RETURN(Value * b, floatOperand(n, 1, t));
  HGP_ASSIGN_OR_RETURN(Node * c, n.emit(op, {a, b}, {}));
  bindMask(n, c->output(0));
  return Status::ok();
}

} // namespace

Status importLess(OnnxNode& n) {
  bool handled = false;
  HGP_TRY(compareDrawIfAny(n, /*less=*/true, handled));
  return handled ? Status::ok() : compare(n, OpKind::Less);
}

Status importGreater(OnnxNode& n) {
  bool handled = false;
  HGP_TRY(compareDrawIfAny(n, /*less=*/false, handled));
  return handled ? Status::ok() : compare(n, OpKind::Greater);
}

Status importEqual(OnnxNode& n) {
  return compare(n, OpKind::Equal);
}

Status importNot(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(Value * m, floatOperand(n, 0, workDType(n, {0})));
  HGP_ASSIGN_OR_RETURN(Value * one, scalarConst(n, m->dtype(), 1.0));
  HGP_ASSIGN_OR_RETURN(Node * s, n.emit(OpKind::Sub, {one, m}, {}));
  bindMask(n, s->output(0));
  return Status::ok();
}

Status importWhere(OnnxNode& n) {
  DType t = workDType(n, {1, 2});
  HGP_ASSIGN_OR_RETURN(Value * a, floatOperand(n, 1, t));
  HGP_ASSIGN_OR_RETURN(Value * b, floatOperand(n, 2, t));
  HGP_ASSIGN_OR_RETURN(Value * c, floatOperand(n, 0, t));
  HGP_ASSIGN_OR_RETURN(Node * w, n.emit(OpKind::Where, {c, a, b}, {}));
  // Where of two masks (a bool select) is a mask too.
  if (n.ctx().boolMasks.count(n.inputName(1)) && n.ctx().boolMasks.count(n.inputName(2)))
    bindMask(n, w->output(0));
  else
    n.setOutput(0, w->output(0));
  return Status::ok();
}

Status castToMask(OnnxNode& n, Value* x) {
  // X != 0 as 1 - Equal(X, 0): exact, and NaN (which equals nothing) casts to true, as in ONNX.
  HGP_ASSIGN_OR_RETURN(Value * zero, scalarConst(n, x->dtype(), 0.0));
  HGP_ASSIGN_OR_RETURN(Node * eq, n.emit(OpKind::Equal, {x, zero}, {}));
  HGP_ASSIGN_OR_RETURN(Value * one, scalarConst(n, x->dtype(), 1.0));
  HGP_ASSIGN_OR_RETURN(Node * s, n.emit(OpKind::Sub, {one, eq->output(0)}, {}));
  bindMask(n, s->output(0));
  return Status::ok();
}

} // namespace hgp
