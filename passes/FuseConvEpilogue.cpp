//===- FuseConvEpilogue.cpp - a convolution's Relu as its epilogue -------------------------===//
//
// In the networks without BatchNorm (AlexNet, VGG, LeNet, SqueezeNet) every convolution is
// followed by a Relu. The convolution already ends with a pass over its result (the bias kernel
// after cuDNN), so the Relu's own launch, which reads and writes the whole activation again, is
// pure overhead. The pass folds it into the convolution (docs/fusion.md, "Convolution
// epilogues"):
//
//   Y = Conv(X, W[, B]); Z = Relu(Y)   =>   Z = Conv{activation="relu"}(X, W[, B])
//
// On CUDA the epilogue is either the bias kernel applying the Relu as it adds the bias, or, where
// timing shows it faster, one cuDNN graph-API engine that runs convolution, bias and Relu
// together (runtime/cuda/ConvOps.cpp). Relu's gradient is defined on its output, which the fused
// convolution still writes, so the backward pass is unchanged.
//
// Legality: Y has the Relu as its only reader, is neither a graph output nor carried, and the
// Relu's result has Y's type. Relu is exact, so relu(round(v)) == round(relu(v)): the fused op
// computes the unfused chain's values bit for bit on the CPU in every precision.
//
// Runs after autodiff in the training pipeline and at the end of the eval pipeline, like
// fuse-batch-norm; `hgpc compile/plan --no-fuse` leaves it out.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"

namespace hgp {

Status runFuseConvEpilogue(Graph& g, PassContext& ctx) {
  for (Node* conv : std::vector<Node*>(g.nodes())) {
    if (conv->op() != OpKind::Conv || conv->attrs().getString("activation", "none") != "none")
      continue;
    Value* y = conv->output(0);
    Node* relu = soleReader(g, y);
    if (!relu || relu->op() != OpKind::Relu || relu->output(0)->type() != y->type()) continue;
    AttrMap attrs = conv->attrs();
    attrs.setString("activation", "relu");
    g.setInsertionPoint(conv);
    auto fused = g.addNode(OpKind::Conv, conv->inputs(), attrs, conv->name());
    g.setInsertionPoint(nullptr);
    if (!fused) return fused.status();
    HGP_TRY(takeOverValues(g, ctx, {{relu->output(0), (*fused)->output(0)}}, {relu, conv}));
    ++ctx.stats["fuse-conv-epilogue.relu"];
  }
  return Status::ok();
}

} // namespace hgp
