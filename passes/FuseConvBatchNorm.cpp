//===- FuseConvBatchNorm.cpp - a BatchNorm's statistics from the convolution before it -------===//
//
// In a ResNet every BatchNormTrain reads the result Y of a convolution, and its first pass over
// Y only adds up the per-channel sums of Y and Y^2. MLPerf's ResNets get those sums from the
// convolution's epilogue instead (cuDNN's ConvBNfprop "GenStats"), so the BatchNorm keeps only
// its apply pass (docs/fusion.md, "Convolutions and BatchNorm"):
//
//   Y = Conv(X, W); (Z, m, v) = BatchNormTrain(Y, s, b[, S])
//     =>  (Y, sum, sumsq) = Conv{stats=1}(X, W);
//         (Z, m, v) = BatchNormTrain{given_stats=1}(Y, s, b[, S], sum, sumsq)
//
// The math stays PyTorch's: the sums are over the whole batch of Y as stored, in f32 (the
// statistics of a mixed-precision BatchNorm are f32), the batch variance is the biased one the
// forward uses (the running update keeps unbiasing it), and the backward pass is unchanged.
//
// Where: the training pipeline runs the pass in bf16 and fp16 only (passes/Pipeline.cpp): there
// cuDNN has engines for a convolution with its statistics; in fp32 and tf32 the plan keeps
// today's kernels. The pass itself rewrites any dtype (the CPU tests run it in f32 too).
// Legality: the BatchNormTrain takes its statistics from its X (given_stats unset); X is the
// only result of a 2-D Conv without bias, activation or statistics of its own. Y keeps all its readers (the backward's
// BatchNormBwd and ConvBwdFilter still read it), so no value disappears; the convolution only
// gains two [C] results. Batch slicing leaves such a convolution whole (whole-batch sums).
//
// Where cuDNN has no engine for the convolution with its statistics (a shape, a dtype, a GPU),
// the CUDA executor runs the convolution and then hgpc's sums kernel, and says why; which of
// the two is faster is timed per layer (runtime/cuda/ConvOps.cpp). `hgpc compile --no-conv-bn-
// fusion` (or --no-fuse) leaves the pass out.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"

namespace hgp {

namespace {

/// The 2-D convolution that writes `x`, when its statistics may move into it; null otherwise.
Node* fusibleConv(const Value* x) {
  Node* conv = x->producer();
  if (!conv || conv->op() != OpKind::Conv || conv->numInputs() != 2 || conv->numOutputs() != 1)
    return nullptr;
  if (conv->attrs().getString("activation", "none") != "none" || conv->attrs().getInt("stats", 0))
    return nullptr;
  if (x->rank() != 4) return nullptr;
  return conv;
}

} // namespace

Status runFuseConvBatchNorm(Graph& g, PassContext& ctx) {
  for (Node* bn : std::vector<Node*>(g.nodes())) {
    if (bn->op() != OpKind::BatchNormTrain || bn->attrs().getInt("given_stats", 0)) continue;
    Node* conv = fusibleConv(bn->input(0));
    if (!conv) continue;
    AttrMap convAttrs = conv->attrs();
    convAttrs.setInt("stats", 1);
    g.setInsertionPoint(conv);
    auto withStats = g.addNode(OpKind::Conv, conv->inputs(), convAttrs, conv->name(), 3);
    g.setInsertionPoint(nullptr);
    if (!withStats) return withStats.status();
    HGP_TRY(takeOverValues(g, ctx, {{conv->output(0), (*withStats)->output(0)}}, {conv}));

    std::vector<Value*> inputs = bn->inputs();
    inputs.push_back((*withStats)->output(1));
    inputs.push_back((*withStats)->output(2));
    AttrMap bnAttrs = bn->attrs();
    bnAttrs.setInt("given_stats", 1);
    g.setInsertionPoint(bn);
    auto fused = g.addNode(OpKind::BatchNormTrain, inputs, bnAttrs, bn->name(), 3);
    g.setInsertionPoint(nullptr);
    if (!fused) return fused.status();
    std::vector<std::pair<Value*, Value*>> take;
    for (size_t i = 0; i < 3; ++i) take.push_back({bn->output(i), (*fused)->output(i)});
    HGP_TRY(takeOverValues(g, ctx, take, {bn}));
    ++ctx.stats["fuse-conv-bn.statistics"];
  }
  return Status::ok();
}

} // namespace hgp
