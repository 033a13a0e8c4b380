// Importers for activations: one-input elementwise ops, with their ONNX defaults made explicit.
#include "frontends/onnx/importers/Importers.h"

#include <cfloat>

namespace hgp {

namespace {

Status unary(OnnxNode& n, OpKind op, AttrMap a = {}) {
  HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(op, {x}, std::move(a)));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

} // namespace

Status importRelu(OnnxNode& n) {
  return unary(n, OpKind::Relu);
}
Status importSigmoid(OnnxNode& n) {
  return unary(n, OpKind::Sigmoid);
}
Status importTanh(OnnxNode& n) {
  return unary(n, OpKind::Tanh);
}
Status importHardSwish(OnnxNode& n) {
  return unary(n, OpKind::HardSwish);
}

Status importGelu(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(std::string form, n.attrString("approximate", "none"));
  if (form != "none" && form != "tanh")
    return n.fail("approximate must be \"none\" or \"tanh\", not \"" + form + "\"");
  AttrMap a;
  a.setString("approximate", form);
  return unary(n, OpKind::Gelu, a);
}
Status importErf(OnnxNode& n) {
  return unary(n, OpKind::Erf);
}
Status importExp(OnnxNode& n) {
  return unary(n, OpKind::Exp);
}
Status importLog(OnnxNode& n) {
  return unary(n, OpKind::Log);
}
Status importSqrt(OnnxNode& n) {
  return unary(n, OpKind::Sqrt);
}
Status importReciprocal(OnnxNode& n) {
  return unary(n, OpKind::Reciprocal);
}

Status importNeg(OnnxNode& n) {
  if (TensorDataPtr k = n.known(0)) {
    HGP_ASSIGN_OR_RETURN(auto zt, makeTensor({k->type.dtype, {}}, "node '" + n.loc() + "'"));
    HGP_ASSIGN_OR_RETURN(TensorDataPtr r, foldBinary(n, '-', *zt, *k));
    n.setKnownOutput(0, r);
    return Status::ok();
  }
  return unary(n, OpKind::Neg);
}

Status importLeakyRelu(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(double alpha, n.attrFloat("alpha", 0.01));
  AttrMap a;
  a.setFloat("alpha", alpha);
  return unary(n, OpKind::LeakyRelu, a);
}

Status importHardSigmoid(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(double alpha, n.attrFloat("alpha", 0.2));
  HGP_ASSIGN_OR_RETURN(double beta, n.attrFloat("beta", 0.5));
  AttrMap a;
  a.setFloat("alpha", alpha);
  a.setFloat("beta", beta);
  return unary(n, OpKind::HardSigmoid, a);
}

Status importClip(OnnxNode& n) {
  AttrMap a;
  if (n.opset() < 11) {
    if (n.numInputs() > 1) return n.fail("before opset 11 Clip takes min and max as attributes");
    // The attribute defaults are the float range, which is no bound at all.
    HGP_ASSIGN_OR_RETURN(double lo, n.attrFloat("min", -FLT_MAX));
    HGP_ASSIGN_OR_RETURN(double hi, n.attrFloat("max", FLT_MAX));
    if (n.hasAttr("min")) a.setFloat("min", lo);
    if (n.hasAttr("max")) a.setFloat("max", hi);
  } else {
    if (n.hasInput(1)) {
      HGP_ASSIGN_OR_RETURN(double lo, n.staticScalar(1, "min"));
      a.setFloat("min", lo);
    }
    if (n.hasInput(2)) {
      HGP_ASSIGN_OR_RETURN(double hi, n.staticScalar(2, "max"));
      a.setFloat("max", hi);
    }
  }
  return unary(n, OpKind::Clip, a);
}

} // namespace hgp
