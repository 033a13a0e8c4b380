// Importers for reductions: ReduceMean and ReduceSum, with axes as an attribute (ReduceMean
// before opset 18, ReduceSum before 13) or as an input, made explicit, sorted and non-negative.
#include "frontends/onnx/importers/Importers.h"

#include <algorithm>

namespace hgp {

namespace {

Status reduce(OnnxNode& n, OpKind op) {
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
    if (noop) {
      n.aliasOutput(0, 0);
      return Status::ok();
    }
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
  HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(op, {x}, attrs));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

} // namespace

Status importReduceMean(OnnxNode& n) {
  return reduce(n, OpKind::ReduceMean);
}
Status importReduceSum(OnnxNode& n) {
  return reduce(n, OpKind::ReduceSum);
}

} // namespace hgp
