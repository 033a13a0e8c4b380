// Importers for the convolution family: Conv and ConvTranspose, and the window attributes
// (kernel, strides, pads, dilations, auto_pad) that pooling shares.
#include "frontends/onnx/importers/Importers.h"

namespace hgp {

namespace {

/// Window attributes are bounded so that no size computation can overflow int64.
constexpr int64_t kMaxWindowAttr = int64_t(1) << 20;

Expected<std::vector<int64_t>> boundedInts(OnnxNode& n, const char* name, size_t count, int64_t def,
                                           int64_t lo) {
  HGP_ASSIGN_OR_RETURN(auto v, n.attrInts(name, std::vector<int64_t>(count, def)));
  if (v.size() != count)
    return n.fail("attribute '" + std::string(name) + "' must have " + std::to_string(count) +
                  " entries, has " + std::to_string(v.size()));
  for (int64_t x : v)
    if (x < lo || x > kMaxWindowAttr)
      return n.fail("attribute '" + std::string(name) + "' value " + std::to_string(x) +
                    " is out of range [" + std::to_string(lo) + ", 2^20]");
  return v;
}

/// auto_pad: "NOTSET" (use pads), "VALID" (no padding), "SAME_UPPER" or "SAME_LOWER".
Expected<std::string> readAutoPad(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(std::string p, n.attrString("auto_pad", "NOTSET"));
  if (p != "NOTSET" && p != "VALID" && p != "SAME_UPPER" && p != "SAME_LOWER")
    return n.fail("auto_pad '" + p + "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  return p;
}

/// Splits a total padding between begin and end; SAME_UPPER puts the odd one at the end.
void splitPad(int64_t total, bool upper, int64_t& begin, int64_t& end) {
  begin = upper ? total / 2 : total - total / 2;
  end = total - begin;
}

} // namespace

Expected<WindowAttrs> readWindowAttrs(OnnxNode& n, const Shape& spatial,
                                      std::vector<int64_t> kernel, bool hasDilations) {
  size_t r = spatial.size();
  WindowAttrs w;
  if (n.hasAttr("kernel_shape") || kernel.empty()) {
    if (!n.hasAttr("kernel_shape")) return n.fail("attribute 'kernel_shape' is required");
    HGP_ASSIGN_OR_RETURN(auto k, boundedInts(n, "kernel_shape", r, 1, 1));
    if (!kernel.empty() && k != kernel)
      return n.fail("kernel_shape " + shapeToString(k) + " does not match the weight's " +
                    shapeToString(kernel));
    kernel = k;
  }
  w.kernel = kernel;
  HGP_ASSIGN_OR_RETURN(w.strides, boundedInts(n, "strides", r, 1, 1));
  if (hasDilations) {
    HGP_ASSIGN_OR_RETURN(w.dilations, boundedInts(n, "dilations", r, 1, 1));
  } else {
    w.dilations.assign(r, 1);
  }
  HGP_ASSIGN_OR_RETURN(std::string autoPad, readAutoPad(n));
  if (autoPad == "NOTSET") {
    HGP_ASSIGN_OR_RETURN(w.pads, boundedInts(n, "pads", 2 * r, 0, 0));
  } else {
    w.pads.assign(2 * r, 0);
    if (autoPad != "VALID") {
      for (size_t i = 0; i < r; ++i) {
        int64_t out = (spatial[i] + w.strides[i] - 1) / w.strides[i];
        int64_t total = std::max<int64_t>(
            0, (out - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1 - spatial[i]);
        splitPad(total, autoPad == "SAME_UPPER", w.pads[i], w.pads[r + i]);
      }
    }
  }
  return w;
}

Status importConv(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorType xt, n.inputType(0));
  HGP_ASSIGN_OR_RETURN(TensorType wt, n.inputType(1));
  if (xt.rank() < 3 || xt.rank() > 5)
    return n.fail("the input must be N, C and 1 to 3 spatial dims, got " + typeToString(xt));
  if (wt.rank() != xt.rank())
    return n.fail("the weight " + typeToString(wt) + " must have the input's rank " +
                  std::to_string(xt.rank()));
  Shape spatial(xt.shape.begin() + 2, xt.shape.end());
  std::vector<int64_t> kernel(wt.shape.begin() + 2, wt.shape.end());
  HGP_ASSIGN_OR_RETURN(WindowAttrs w, readWindowAttrs(n, spatial, kernel, true));
  HGP_ASSIGN_OR_RETURN(int64_t group, n.attrInt("group", 1));
  if (group < 1) return n.fail("group must be positive, got " + std::to_string(group));
  AttrMap a;
  a.setInts("strides", w.strides);
  a.setInts("pads", w.pads);
  a.setInts("dilations", w.dilations);
  a.setInt("group", group);
  std::vector<Value*> ins;
  for (size_t i = 0; i < 3; ++i) {
    if (!n.hasInput(i)) continue;
    HGP_ASSIGN_OR_RETURN(Value * v, n.input(i));
    ins.push_back(v);
  }
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::Conv, ins, a));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

Status importConvTranspose(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorType xt, n.inputType(0));
  HGP_ASSIGN_OR_RETURN(TensorType wt, n.inputType(1));
  if (xt.rank() < 3 || xt.rank() > 5)
    return n.fail("the input must be N, C and 1 to 3 spatial dims, got " + typeToString(xt));
  if (wt.rank() != xt.rank())
    return n.fail("the weight " + typeToString(wt) + " must have the input's rank " +
                  std::to_string(xt.rank()));
  size_t r = size_t(xt.rank() - 2);
  std::vector<int64_t> kernel(wt.shape.begin() + 2, wt.shape.end());
  if (n.hasAttr("kernel_shape")) {
    HGP_ASSIGN_OR_RETURN(auto k, n.attrInts("kernel_shape"));
    if (k != kernel)
      return n.fail("kernel_shape " + shapeToString(k) + " does not match the weight's " +
                    shapeToString(kernel));
  }
  HGP_ASSIGN_OR_RETURN(auto strides, boundedInts(n, "strides", r, 1, 1));
  HGP_ASSIGN_OR_RETURN(auto dilations, boundedInts(n, "dilations", r, 1, 1));
  HGP_ASSIGN_OR_RETURN(auto outPad, boundedInts(n, "output_padding", r, 0, 0));
  HGP_ASSIGN_OR_RETURN(int64_t group, n.attrInt("group", 1));
  if (group < 1) return n.fail("group must be positive, got " + std::to_string(group));
  HGP_ASSIGN_OR_RETURN(std::string autoPad, readAutoPad(n));
  std::vector<int64_t> pads(2 * r, 0);

  // The output size each spatial dim must have, when output_shape or SAME fixes it.
  std::vector<int64_t> target;
  if (n.hasAttr("output_shape")) {
    HGP_ASSIGN_OR_RETURN(auto os, n.attrInts("output_shape"));
    if (os.size() == r + 2) os.erase(os.begin(), os.begin() + 2);
    if (os.size() != r)
      return n.fail("output_shape must have one entry per spatial dim (" + std::to_string(r) + ")");
    for (int64_t o : os)
      if (o < 1 || o > kMaxTensorElements) return n.fail("output_shape entries must be positive");
    target = os;
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < r; ++i) target.push_back(xt.shape[2 + i] * strides[i]);
  } else if (autoPad == "NOTSET") {
    HGP_ASSIGN_OR_RETURN(pads, boundedInts(n, "pads", 2 * r, 0, 0));
  }
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t full =
        strides[i] * (xt.shape[2 + i] - 1) + outPad[i] + (kernel[i] - 1) * dilations[i] + 1;
    int64_t total = full - target[i];
    if (total >= 0) {
      splitPad(total, autoPad == "SAME_UPPER", pads[i], pads[r + i]);
    } else {
      // A larger requested output is extra output padding at the end.
      outPad[i] -= total;
    }
  }
  AttrMap a;
  a.setInts("strides", strides);
  a.setInts("pads", pads);
  a.setInts("dilations", dilations);
  a.setInt("group", group);
  a.setInts("output_padding", outPad);
  std::vector<Value*> ins;
  for (size_t i = 0; i < 3; ++i) {
    if (!n.hasInput(i)) continue;
    HGP_ASSIGN_OR_RETURN(Value * v, n.input(i));
    ins.push_back(v);
  }
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::ConvTranspose, ins, a));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

} // namespace hgp
