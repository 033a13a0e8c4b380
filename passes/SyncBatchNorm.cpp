//===- SyncBatchNorm.cpp - --sync-bn: BatchNorm statistics over the global batch ------------===//
//
// With --ranks N > 1 and --sync-bn, every training-mode BatchNorm normalizes with the mean and
// variance of the global batch instead of its rank's shard, as PyTorch's SyncBatchNorm does:
//
//   m  = AllReduce(avg)(ReduceMean(X))                 over N and the spatial dims, [1,C,1,..]
//   v  = AllReduce(avg)(ReduceMean((X - m) * (X - m)))  the biased variance, two-pass
//   Y  = BatchNorm(X, scale, bias, m, v)                inference form over those statistics
//
// Every rank has the same batch size, so the mean of the ranks' means is the global mean. The
// gradient flows through the statistics (BatchNorm's rule differentiates mean and var when they
// depend on parameters, and AllReduce's rule all-reduces the gradients), which gives PyTorch's
// SyncBatchNorm backward. The running statistics are updated from m and v with the global count.
// On one rank every AllReduce is the identity and this is ordinary training-mode BatchNorm.
// Runs before autodiff.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"

namespace hgp {

Status runSyncBatchNorm(Graph& g, PassContext& ctx) {
  const TrainOptions& o = ctx.train;
  if (o.ranks <= 1 || !o.syncBn) return Status::ok();
  for (Node* bn : std::vector<Node*>(g.nodes())) {
    if (bn->op() != OpKind::BatchNormTrain) continue;
    Value *x = bn->input(0), *scale = bn->input(1), *bias = bn->input(2);
    const Shape& xs = x->shape();
    int64_t c = xs[1];
    std::vector<int64_t> axes = {0};
    Shape stat(xs.size(), 1);
    stat[1] = c;
    for (size_t d = 2; d < xs.size(); ++d) axes.push_back(int64_t(d));
    AttrMap reduce;
    reduce.setInts("axes", axes);
    reduce.setInt("keepdims", 1);
    AttrMap all;
    all.setString("reduce", "avg");
    all.setInt("ranks", o.ranks);
    AttrMap flat;
    flat.setInts("shape", {c});
    std::string name = bn->name() + "/sync";
    g.setInsertionPoint(bn);
    auto emit = [&](OpKind op, std::vector<Value*> ins, const AttrMap& a) -> Expected<Value*> {
      HGP_ASSIGN_OR_RETURN(Node * n, g.addNode(op, std::move(ins), a, name));
      return n->output(0);
    };
    Status st = [&]() -> Status {
      HGP_ASSIGN_OR_RETURN(Value * ml, emit(OpKind::ReduceMean, {x}, reduce));
      HGP_ASSIGN_OR_RETURN(Value * m, emit(OpKind::AllReduce, {ml}, all));
      HGP_ASSIGN_OR_RETURN(Value * d, emit(OpKind::Sub, {x, m}, {}));
      HGP_ASSIGN_OR_RETURN(Value * d2, emit(OpKind::Mul, {d, d}, {}));
      HGP_ASSIGN_OR_RETURN(Value * vl, emit(OpKind::ReduceMean, {d2}, reduce));
      HGP_ASSIGN_OR_RETURN(Value * v, emit(OpKind::AllReduce, {vl}, all));
      HGP_ASSIGN_OR_RETURN(Value * mc, emit(OpKind::Reshape, {m}, flat));
      HGP_ASSIGN_OR_RETURN(Value * vc, emit(OpKind::Reshape, {v}, flat));
      AttrMap bnAttrs;
      bnAttrs.setFloat("epsilon", bn->attrs().getFloat("epsilon", 1e-5));
      HGP_ASSIGN_OR_RETURN(Value * y, emit(OpKind::BatchNorm, {x, scale, bias, mc, vc}, bnAttrs));
      // The running statistics average over the global batch: unbiased with its count.
      for (Node* u : bn->output(1)->users())
        if (u->op() == OpKind::BnRunningUpdate)
          u->attrs().setInt("count", u->attrs().getInt("count", 0) * o.ranks);
      g.replaceAllUsesWith(bn->output(0), y);
      g.replaceAllUsesWith(bn->output(1), mc);
      g.replaceAllUsesWith(bn->output(2), vc);
      return Status::ok();
    }();
    g.setInsertionPoint(nullptr);
    HGP_TRY(st);
    HGP_TRY(g.eraseNode(bn));
    ctx.stats["sync-batch-norm.layers"] += 1;
  }
  return Status::ok();
}

} // namespace hgp
