// Importers for matrix products: Gemm (attributes made explicit) and MatMul.
#include "frontends/onnx/importers/Importers.h"

namespace hgp {

Status importGemm(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(double alpha, n.attrFloat("alpha", 1.0));
  HGP_ASSIGN_OR_RETURN(double beta, n.attrFloat("beta", 1.0));
  HGP_ASSIGN_OR_RETURN(int64_t transA, n.attrInt("transA", 0));
  HGP_ASSIGN_OR_RETURN(int64_t transB, n.attrInt("transB", 0));
  if ((transA != 0 && transA != 1) || (transB != 0 && transB != 1))
    return n.fail("transA and transB must be 0 or 1");
  if (n.opset() < 11 && !n.hasInput(2)) return n.fail("before opset 11 Gemm requires C");
  AttrMap a;
  a.setFloat("alpha", alpha);
  a.setFloat("beta", beta);
  a.setInt("transA", transA);
  a.setInt("transB", transB);
  std::vector<Value*> ins;
  for (size_t i = 0; i < 3; ++i) {
    if (!n.hasInput(i)) continue;
    HGP_ASSIGN_OR_RETURN(Value * v, n.input(i));
    ins.push_back(v);
  }
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::Gemm, ins, a));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

Status importMatMul(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(Value * a, n.input(0));
  HGP_ASSIGN_OR_RETURN(Value * b, n.input(1));
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::MatMul, {a, b}, {}));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

} // namespace hgp
