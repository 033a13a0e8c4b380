//===- SymmetricConvPads.cpp - asymmetric convolution padding made explicit -----------------===//
//
// cuDNN pads a convolution by the same amount at both ends of a dim; ONNX allows different
// amounts (auto_pad SAME_UPPER with an even kernel, explicit pads). This pass keeps the common
// part as the convolution's padding and makes the rest explicit: a zero Pad of the input for
// Conv, and a Slice that crops the output for ConvTranspose (whose pads remove output rows).
// The math is unchanged, every backend gets the same plan, and autodiff differentiates the Pad
// and Slice like any other op.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"

#include <algorithm>

namespace hgp {

Status runSymmetricConvPads(Graph& g, PassContext& ctx) {
  for (Node* n : std::vector<Node*>(g.nodes())) {
    if (n->op() != OpKind::Conv && n->op() != OpKind::ConvTranspose) continue;
    std::vector<int64_t> pads = n->attrs().getInts("pads");
    size_t r = pads.size() / 2;
    std::vector<int64_t> common(2 * r), extraBegin(r), extraEnd(r);
    bool asymmetric = false;
    for (size_t i = 0; i < r; ++i) {
      int64_t p = std::min(pads[i], pads[r + i]);
      common[i] = common[r + i] = p;
      extraBegin[i] = pads[i] - p;
      extraEnd[i] = pads[r + i] - p;
      asymmetric |= extraBegin[i] || extraEnd[i];
    }
    if (!asymmetric) continue;
    AttrMap attrs = n->attrs();
    attrs.setInts("pads", common);
    std::vector<Value*> ins = n->inputs();
    g.setInsertionPoint(n);
    if (n->op() == OpKind::Conv) {
      // Pad(X): begins and ends of every dim, batch and channels untouched.
      std::vector<int64_t> padAll(2 * (r + 2), 0);
      for (size_t i = 0; i < r; ++i) {
        padAll[2 + i] = extraBegin[i];
        padAll[(r + 2) + 2 + i] = extraEnd[i];
      }
      AttrMap pa;
      pa.setInts("pads", padAll);
      pa.setString("mode", "constant");
      pa.setFloat("value", 0.0);
      HGP_ASSIGN_OR_RETURN(Node * pad, g.addNode(OpKind::Pad, {ins[0]}, pa, n->name() + "/pad"));
      ins[0] = pad->output(0);
      HGP_ASSIGN_OR_RETURN(Node * conv, g.addNode(OpKind::Conv, ins, attrs, n->name()));
      g.replaceAllUsesWith(n->output(0), conv->output(0));
    } else {
      HGP_ASSIGN_OR_RETURN(Node * convT, g.addNode(OpKind::ConvTranspose, ins, attrs, n->name()));
      const Shape& full = convT->output(0)->shape();
      std::vector<int64_t> starts(full.size(), 0), ends(full.begin(), full.end()), steps(full.size(), 1);
      for (size_t i = 0; i < r; ++i) {
        starts[2 + i] = extraBegin[i];
        ends[2 + i] = full[2 + i] - extraEnd[i];
      }
      AttrMap sa;
      sa.setInts("starts", starts);
      sa.setInts("ends", ends);
      sa.setInts("steps", steps);
      HGP_ASSIGN_OR_RETURN(Node * crop, g.addNode(OpKind::Slice, {convT->output(0)}, sa,
                                                   n->name() + "/crop"));
      g.replaceAllUsesWith(n->output(0), crop->output(0));
    }
    g.setInsertionPoint(nullptr);
    HGP_TRY(g.eraseNode(n));
    ++ctx.stats["symmetric-conv-pads.rewritten"];
  }
  return Status::ok();
}

} // namespace hgp
