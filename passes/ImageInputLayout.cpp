//===- ImageInputLayout.cpp - ImageInput writes the channels-last image itself --------------===//
//
// With --pixels u8 and a channels-last plan (--layout nhwc, or auto in 16-bit precision), the
// layout pass (passes/LayoutNhwc.cpp) reads the NCHW result of ImageInput through a Transpose
// to channels-last ("layout/to-nhwc after ImageInput image_input"): one more kernel and one
// more copy of the batch per step, and per evaluation batch. The pixels arrive channels-last
// already, so this pass has ImageInput write the channels-last image directly
// (channels_last=1, runtime/plan/OpList.def) when every reader of its result is such a
// Transpose (perm 0,2,3,1); the Transposes go. Where anything else reads the NCHW image too,
// nothing changes. It runs right after layout-nhwc, on the train and eval graphs alike.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"

#include <algorithm>

namespace hgp {

namespace {

bool toChannelsLast(const Node* n) {
  return n->op() == OpKind::Transpose && n->input(0)->rank() == 4 &&
         n->attrs().getInts("perm") == std::vector<int64_t>{0, 2, 3, 1};
}

} // namespace

Status runImageInputLayout(Graph& g, PassContext& ctx) {
  for (Node* n : std::vector<Node*>(g.nodes())) {
    if (n->op() != OpKind::ImageInput || n->attrs().getInt("channels_last", 0) != 0) continue;
    Value* y = n->output(0);
    std::vector<Node*> transposes = y->users();
    if (transposes.empty() || !std::all_of(transposes.begin(), transposes.end(), toChannelsLast))
      continue;
    bool leaves = false; // the NCHW image is also a graph output or carry: keep it
    for (const Value* o : g.outputs()) leaves |= o == y;
    for (const Carry& c : g.carries()) leaves |= c.next == y;
    if (leaves) continue;
    AttrMap a = n->attrs();
    a.setInt("channels_last", 1);
    g.setInsertionPoint(n);
    Expected<Node*> made = g.addNode(OpKind::ImageInput, n->inputs(), a, n->name(), 1,
                                     TensorRole::Activation, {g.uniqueName(y->name() + ".nhwc")});
    g.setInsertionPoint(nullptr);
    if (!made) return made.status();
    Value* last = (*made)->output(0);
    for (Node* t : transposes) {
      g.replaceAllUsesWith(t->output(0), last);
      HGP_TRY(g.eraseNode(t));
    }
    HGP_TRY(g.eraseNode(n));
    ctx.stats["image-input-layout.transposes-removed"] += int64_t(transposes.size());
  }
  return Status::ok();
}

} // namespace hgp
