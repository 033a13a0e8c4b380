//===- AddOptimizer.cpp - the update half of the training step ------------------------------===//
//
// After autodiff: computes the learning rate from the on-device iteration counter, checks that
// the loss and every gradient are finite (ok = 1 or 0), and updates each parameter with SGD,
// Adam or AdamW in place, skipping the update when ok is 0 (the runner reports skipped steps).
// BN running-statistics updates are gated by ok too, so a skipped step changes no state. Then it
// counts applied updates (opt_step, which drives Adam's bias correction and SGD's first-step
// momentum), logs (loss, correct, ok, lr) into the metrics ring, and increments iter. Every
// persistent change is a carry, written in place by the plan. With fp16 loss scaling
// (passes/LossScaling.cpp) the updates unscale the gradients (grad_scale=1, the scale as their
// last input) and LossScaleUpdate halves the scale after a skipped step, doubles it after a run
// of good ones.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"
#include "passes/TrainGraphNames.h"

namespace hgp {

namespace {

Expected<Value*> state(Graph& g, const std::string& name, TensorType t) {
  return g.addGraphValue(g.uniqueName(name), TensorRole::State, std::move(t));
}

AttrMap scheduleAttrs(const TrainOptions& o) {
  AttrMap a;
  a.setFloat("base_lr", o.lr);
  a.setString("kind", o.schedule);
  if (o.schedule == "step") a.setInt("step_size", o.stepSize);
  if (o.schedule == "step" || o.schedule == "multistep") a.setFloat("gamma", o.gamma);
  if (o.schedule == "multistep") a.setInts("milestones", o.milestones);
  if (o.schedule == "cosine") {
    a.setInt("t_max", o.tMax);
    a.setFloat("eta_min", o.etaMin);
  }
  if (o.warmupSteps > 0) {
    a.setInt("warmup_steps", o.warmupSteps);
    a.setFloat("warmup_factor", o.warmupFactor);
  }
  return a;
}

/// Rebuilds a node with `extra` appended to its inputs (at the end of the graph), moving the
/// uses and carries of its results to the new node's results.
Status appendInput(Graph& g, Node* n, Value* extra) {
  std::vector<Value*> ins = n->inputs();
  ins.push_back(extra);
  HGP_ASSIGN_OR_RETURN(Node * m, g.addNode(n->op(), ins, n->attrs(), n->name()));
  for (size_t i = 0; i < n->numOutputs(); ++i) g.replaceAllUsesWith(n->output(i), m->output(i));
  return g.eraseNode(n);
}

} // namespace

Status runAddOptimizer(Graph& g, PassContext& ctx) {
  const TrainOptions& o = ctx.train;
  Value* loss = g.findValue(names::kLoss);
  Value* correct = g.findValue(names::kCorrect);
  Value* iter = g.findValue(names::kIter);
  if (!loss || !correct || !iter)
    return Status(ErrorCode::Internal, "add-optimizer runs after add-loss and add-step-counter");

  HGP_ASSIGN_OR_RETURN(Node * lrNode, g.addNode(OpKind::LrSchedule, {iter}, scheduleAttrs(o),
                                                "optimizer/lr", -1, TensorRole::Activation,
                                                {g.uniqueName(names::kLr)}));
  Value* lr = lrNode->output(0);
  std::vector<Value*> checked = {loss};
  for (const auto& [p, grad] : ctx.paramGrads) checked.push_back(grad);
  HGP_ASSIGN_OR_RETURN(Node * okNode, g.addNode(OpKind::CheckFinite, checked, {}, "optimizer/check",
                                                -1, TensorRole::Activation,
                                                {g.uniqueName(names::kOk)}));
  Value* ok = okNode->output(0);
  HGP_ASSIGN_OR_RETURN(Value * optStep, state(g, names::kOptStep, {DType::I64, {}}));

  double wd = o.effectiveWeightDecay();
  Value* lossScale = g.findValue(names::kLossScale);
  for (const auto& [p, grad] : ctx.paramGrads) {
    AttrMap a;
    a.setFloat("weight_decay", wd);
    if (lossScale) a.setInt("grad_scale", 1);
    std::vector<Value*> ins = {p, grad, lr, ok, optStep};
    OpKind op = OpKind::SgdUpdate;
    if (o.optimizer == "sgd") {
      a.setFloat("momentum", o.momentum);
      a.setFloat("dampening", o.dampening);
      a.setInt("nesterov", o.nesterov);
      if (o.momentum != 0) {
        HGP_ASSIGN_OR_RETURN(Value * buf, state(g, p->name() + ".momentum_buffer", p->type()));
        ins.push_back(buf);
      }
    } else {
      op = OpKind::AdamUpdate;
      a.setFloat("beta1", o.beta1);
      a.setFloat("beta2", o.beta2);
      a.setFloat("eps", o.eps);
      a.setInt("decoupled", o.optimizer == "adamw");
      HGP_ASSIGN_OR_RETURN(Value * m, state(g, p->name() + ".exp_avg", p->type()));
      HGP_ASSIGN_OR_RETURN(Value * v, state(g, p->name() + ".exp_avg_sq", p->type()));
      ins.push_back(m);
      ins.push_back(v);
    }
    if (lossScale) ins.push_back(lossScale);
    HGP_ASSIGN_OR_RETURN(Node * u, g.addNode(op, ins, a, "optimizer/" + p->name()));
    g.addCarry(p, u->output(0));
    for (size_t i = 1; i < u->numOutputs(); ++i) g.addCarry(ins[4 + i], u->output(i));
  }
  ctx.stats["add-optimizer.parameters"] += int64_t(ctx.paramGrads.size());
  if (lossScale) {
    Value* good = g.findValue(names::kLossScaleGood);
    if (!good) return Status(ErrorCode::Internal, "loss scaling without its good-step counter");
    AttrMap a;
    a.setFloat("growth_factor", ctx.lossScaleGrowth);
    a.setFloat("backoff_factor", ctx.lossScaleBackoff);
    a.setInt("growth_interval", ctx.lossScaleInterval);
    HGP_ASSIGN_OR_RETURN(Node * upd, g.addNode(OpKind::LossScaleUpdate, {lossScale, good, ok}, a,
                                               "optimizer/loss_scale"));
    g.addCarry(lossScale, upd->output(0));
    g.addCarry(good, upd->output(1));
  }

  for (Node* n : std::vector<Node*>(g.nodes()))
    if (n->op() == OpKind::BnRunningUpdate && n->numInputs() == 4) HGP_TRY(appendInput(g, n, ok));

  HGP_ASSIGN_OR_RETURN(Node * stepInc, g.addNode(OpKind::CounterIncrement, {optStep, ok}, {},
                                                 "optimizer/step"));
  g.addCarry(optStep, stepInc->output(0));
  HGP_ASSIGN_OR_RETURN(Value * ring, state(g, names::kMetrics, {DType::F32, {o.metricsRing, 4}}));
  HGP_ASSIGN_OR_RETURN(Node * log, g.addNode(OpKind::MetricsLog, {ring, iter, loss, correct, ok, lr},
                                             {}, "metrics/log"));
  g.addCarry(ring, log->output(0));
  HGP_ASSIGN_OR_RETURN(Node * iterInc, g.addNode(OpKind::CounterIncrement, {iter}, {}, "iter/next"));
  g.addCarry(iter, iterInc->output(0));
  return Status::ok();
}

} // namespace hgp
