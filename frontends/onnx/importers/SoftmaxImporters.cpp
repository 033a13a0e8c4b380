// Importers for Softmax and LogSoftmax. Before opset 13 they flatten the input to 2-D at `axis`
// (default 1) and normalize each row; that is lowered as Reshape -> Softmax(axis=1) -> Reshape,
// or as a plain Softmax over the last axis when the two mean the same.
#include "frontends/onnx/importers/Importers.h"

namespace hgp {

namespace {

Status softmax(OnnxNode& n, OpKind op) {
  HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
  int64_t r = x->rank();
  HGP_ASSIGN_OR_RETURN(int64_t axis, n.attrInt("axis", n.opset() < 13 ? 1 : -1));
  if (r == 0) return n.fail("the input must have rank 1 or more");
  // Before opset 13 the axis may also be r (rows of one element).
  if (n.opset() >= 13 || axis != r) {
    HGP_ASSIGN_OR_RETURN(axis, normalizeAxisFor(n, axis, r));
  }
  AttrMap a;
  if (n.opset() >= 13 || axis == r - 1) {
    a.setInt("axis", axis);
    HGP_ASSIGN_OR_RETURN(Node * node, n.emit(op, {x}, a));
    n.setOutput(0, node->output(0));
    return Status::ok();
  }
  // Coerce to 2-D [prod(dims before axis), prod(dims from axis)], normalize rows, reshape back.
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < r; ++d) (d < axis ? outer : inner) *= x->shape()[size_t(d)];
  AttrMap flat, back;
  flat.setInts("shape", {outer, inner});
  back.setInts("shape", x->shape());
  a.setInt("axis", 1);
  HGP_ASSIGN_OR_RETURN(Node * r1, n.emit(OpKind::Reshape, {x}, flat));
  HGP_ASSIGN_OR_RETURN(Node * s, n.emit(op, {r1->output(0)}, a));
  HGP_ASSIGN_OR_RETURN(Node * r2, n.emit(OpKind::Reshape, {s->output(0)}, back));
  n.setOutput(0, r2->output(0));
  return Status::ok();
}

} // namespace

Status importSoftmax(OnnxNode& n) {
  return softmax(n, OpKind::Softmax);
}
Status importLogSoftmax(OnnxNode& n) {
  return softmax(n, OpKind::LogSoftmax);
}

} // namespace hgp
