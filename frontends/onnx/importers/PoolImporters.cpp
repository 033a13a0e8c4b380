// Importers for pooling: MaxPool, AveragePool and GlobalAveragePool.
#include "frontends/onnx/importers/Importers.h"

namespace hgp {

namespace {

/// The spatial dims of a pooling input (rank 3 to 5).
Expected<Shape> poolSpatial(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorType xt, n.inputType(0));
  if (xt.rank() < 3 || xt.rank() > 5)
    return n.fail("the input must be N, C and 1 to 3 spatial dims, got " + typeToString(xt));
  return Shape(xt.shape.begin() + 2, xt.shape.end());
}

Expected<int64_t> flag(OnnxNode& n, const char* name) {
  HGP_ASSIGN_OR_RETURN(int64_t v, n.attrInt(name, 0));
  if (v != 0 && v != 1) return n.fail("attribute '" + std::string(name) + "' must be 0 or 1");
  return v;
}

} // namespace

Status importMaxPool(OnnxNode& n) {
  if (n.outputUsed(1)) return n.fail("the Indices output is not supported");
  HGP_ASSIGN_OR_RETURN(Shape spatial, poolSpatial(n));
  HGP_ASSIGN_OR_RETURN(WindowAttrs w, readWindowAttrs(n, spatial, {}, true));
  HGP_ASSIGN_OR_RETURN(int64_t ceil, flag(n, "ceil_mode"));
  AttrMap a;
  a.setInts("kernel_shape", w.kernel);
  a.setInts("strides", w.strides);
  a.setInts("pads", w.pads);
  a.setInts("dilations", w.dilations);
  a.setInt("ceil_mode", ceil);
  HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::MaxPool, {x}, a));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

Status importAveragePool(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(Shape spatial, poolSpatial(n));
  HGP_ASSIGN_OR_RETURN(WindowAttrs w, readWindowAttrs(n, spatial, {}, true));
  for (int64_t d : w.dilations)
    if (d != 1) return n.fail("AveragePool with dilations is not supported");
  HGP_ASSIGN_OR_RETURN(int64_t ceil, flag(n, "ceil_mode"));
  HGP_ASSIGN_OR_RETURN(int64_t countPad, flag(n, "count_include_pad"));
  AttrMap a;
  a.setInts("kernel_shape", w.kernel);
  a.setInts("strides", w.strides);
  a.setInts("pads", w.pads);
  a.setInt("ceil_mode", ceil);
  a.setInt("count_include_pad", countPad);
  HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::AveragePool, {x}, a));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

Status importGlobalAveragePool(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::GlobalAveragePool, {x}, {}));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

} // namespace hgp
