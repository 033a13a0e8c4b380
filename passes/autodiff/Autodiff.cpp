//===- Autodiff.cpp - reverse-mode differentiation of the training graph --------------------===//
//
// The loss is the graph's first output (add-loss puts it there). A value needs a gradient when
// it depends, through differentiable ops, on a parameter. Walking the nodes in reverse, each
// node whose results received gradients calls its op's rule (GradContext.h); gradients that
// reach a value along several paths are added with one Sum. The result is recorded per
// parameter in PassContext::paramGrads for add-optimizer; a parameter the loss does not depend
// on gets no gradient and, as in PyTorch, no update.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"
#include "passes/TrainGraphNames.h"
#include "passes/autodiff/GradContext.h"

#include <map>
#include <set>

namespace hgp {

namespace {

using GradFn = Status (*)(GradContext&);
#define HGP_GRAD_FN_Diff(Name) &grad##Name
#define HGP_GRAD_FN_NoDiff(Name) nullptr
constexpr GradFn kGradRules[] = {
#define HGP_OP(Name, Family, MinIn, MaxIn, MinOut, MaxOut, Grad, ...) HGP_GRAD_FN_##Grad(Name),
#include "runtime/plan/OpList.def"
};

} // namespace

Status runAutodiff(Graph& g, PassContext& ctx) {
  if (g.outputs().empty() || g.outputs()[0]->type() != TensorType{DType::F32, {}})
    return Status(ErrorCode::Internal, "autodiff needs the scalar loss as the first output");
  Value* loss = g.outputs()[0];

  // Forward: which values depend on a parameter through differentiable ops.
  std::set<const Value*> needsGrad;
  for (const Value* v : g.graphValues())
    if (v->role() == TensorRole::Param) needsGrad.insert(v);
  const std::vector<Node*> forward = g.nodes();
  for (const Node* n : forward) {
    if (!opTraits(n->op()).differentiable) continue;
    bool any = false;
    for (const Value* in : n->inputs()) any |= needsGrad.count(in) > 0;
    if (any)
      for (const Value* o : n->outputs()) needsGrad.insert(o);
  }
  if (!needsGrad.count(loss))
    return Status(ErrorCode::InvalidModel, "the loss does not depend on any trainable parameter");

  // Seed dloss/dloss = 1, or the loss scale (fp16, passes/LossScaling.cpp): then every gradient
  // is scaled by it, and add-optimizer unscales.
  Value* seed = g.findValue(names::kLossScale);
  if (!seed) {
    auto seedData = std::make_shared<TensorData>();
    seedData->type = {DType::F32, {}};
    float one = 1.0f;
    seedData->bytes.assign(reinterpret_cast<uint8_t*>(&one), reinterpret_cast<uint8_t*>(&one) + 4);
    HGP_ASSIGN_OR_RETURN(seed, g.addGraphValue(g.uniqueName("loss.seed"), TensorRole::Const,
                                               seedData->type, seedData));
  } else if (seed->type() != TensorType{DType::F32, {}}) {
    return Status(ErrorCode::Internal, "the loss scale must be an f32 scalar");
  }
  std::map<const Value*, std::vector<Value*>> pending;
  pending[loss].push_back(seed);

  auto total = [&](const Value* v) -> Expected<Value*> {
    auto it = pending.find(v);
    if (it == pending.end() || it->second.empty()) return static_cast<Value*>(nullptr);
    if (it->second.size() == 1) return it->second[0];
    HGP_ASSIGN_OR_RETURN(Node * sum, g.addNode(OpKind::Sum, it->second, {}, "", -1,
                                               TensorRole::Gradient));
    ++ctx.stats["autodiff.sums"];
    it->second = {sum->output(0)};
    return sum->output(0);
  };

  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    Node* n = *it;
    std::vector<bool> needs;
    bool anyNeeds = false;
    for (const Value* in : n->inputs()) {
      needs.push_back(needsGrad.count(in) > 0);
      anyNeeds |= needs.back();
    }
    if (!anyNeeds || !opTraits(n->op()).differentiable) continue;
    std::vector<Value*> outGrads;
    bool anyGrad = false;
    for (const Value* o : n->outputs()) {
      HGP_ASSIGN_OR_RETURN(Value * gv, total(o));
      outGrads.push_back(gv);
      anyGrad |= gv != nullptr;
    }
    if (!anyGrad) continue;
    GradFn rule = kGradRules[int(n->op())];
    GradContext gc(g, *n, outGrads, needs);
    HGP_TRY_CTX(rule(gc), "the gradient of " + n->describe());
    for (size_t i = 0; i < n->numInputs(); ++i)
      if (Value* gi = gc.inputGrads()[i]) pending[n->input(i)].push_back(gi);
    ++ctx.stats["autodiff.nodes-differentiated"];
  }

  ctx.paramGrads.clear();
  for (Value* v : g.graphValues()) {
    if (v->role() != TensorRole::Param) continue;
    HGP_ASSIGN_OR_RETURN(Value * gv, total(v));
    if (!gv) continue;
    if (gv->isGraphLevel()) {
      // A gradient that is itself a graph value (the seed) cannot be renamed; copy it.
      AttrMap a;
      a.setInts("shape", gv->shape());
      HGP_ASSIGN_OR_RETURN(Node * copy, g.addNode(OpKind::Reshape, {gv}, a, "", -1,
                                                  TensorRole::Gradient));
      gv = copy->output(0);
    }
    HGP_TRY(g.renameValue(gv, g.uniqueName(v->name() + ".grad")));
    ctx.paramGrads.push_back({v, gv});
  }
  return Status::ok();
}

} // namespace hgp
