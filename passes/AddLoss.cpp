//===- AddLoss.cpp - the loss and the accuracy count over the model's output ------------------===//
//
// Adds the i64[N] labels input, the loss (softmax cross-entropy with optional label smoothing,
// or MSE against one-hot labels) over the model's first output, and CountCorrect. With
// --aux-loss-weight, the other [N, C] outputs (auxiliary classifiers) add their weighted losses.
// The graph's outputs become the loss and the count. The train and eval pipelines both run it.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"
#include "passes/TrainGraphNames.h"

#include <cstring>

namespace hgp {

namespace {

Expected<Value*> lossOf(Graph& g, const TrainOptions& opt, Value* out, Value* labels) {
  AttrMap a;
  if (opt.loss == "cross-entropy") {
    a.setFloat("label_smoothing", opt.labelSmoothing);
    HGP_ASSIGN_OR_RETURN(Node * n, g.addNode(OpKind::SoftmaxCrossEntropy, {out, labels}, a, "loss"));
    return n->output(0);
  }
  AttrMap oh;
  oh.setInt("depth", out->shape()[1]);
  HGP_ASSIGN_OR_RETURN(Node * hot, g.addNode(OpKind::OneHot, {labels}, oh, "loss/one_hot"));
  HGP_ASSIGN_OR_RETURN(Node * n, g.addNode(OpKind::MseLoss, {out, hot->output(0)}, {}, "loss"));
  return n->output(0);
}

} // namespace

Status runAddLoss(Graph& g, PassContext& ctx) {
  const TrainOptions& opt = ctx.train;
  if (g.outputs().empty()) return Status(ErrorCode::InvalidModel, "the model has no outputs");
  Value* out = g.outputs()[0];
  if (out->rank() != 2 || out->dtype() != DType::F32)
    return Status(ErrorCode::InvalidModel,
                  "training needs the model's first output to be f32 [batch, classes]; '" +
                      out->name() + "' is " + typeToString(out->type()));
  int64_t batch = out->shape()[0];
  HGP_ASSIGN_OR_RETURN(Value * labels,
                       g.addGraphValue(g.uniqueName(names::kLabels), TensorRole::Input,
                                       {DType::I64, {batch}}));
  HGP_ASSIGN_OR_RETURN(Value * loss, lossOf(g, opt, out, labels));
  if (opt.auxLossWeight != 0) {
    std::vector<Value*> terms = {loss};
    for (size_t i = 1; i < g.outputs().size(); ++i) {
      Value* aux = g.outputs()[i];
      if (aux->type() != out->type()) continue;
      HGP_ASSIGN_OR_RETURN(Value * auxLoss, lossOf(g, opt, aux, labels));
      AttrMap s;
      s.setFloat("alpha", opt.auxLossWeight);
      HGP_ASSIGN_OR_RETURN(Node * scaled, g.addNode(OpKind::Scale, {auxLoss}, s, "loss/aux"));
      terms.push_back(scaled->output(0));
    }
    if (terms.size() > 1) {
      HGP_ASSIGN_OR_RETURN(Node * sum, g.addNode(OpKind::Sum, terms, {}, "loss/total"));
      loss = sum->output(0);
    }
  }
  HGP_TRY(g.renameValue(loss, g.uniqueName(names::kLoss)));
  HGP_ASSIGN_OR_RETURN(Node * correct, g.addNode(OpKind::CountCorrect, {out, labels}, {},
                                                 "metrics/correct", -1, TensorRole::Activation,
                                                 {g.uniqueName(names::kCorrect)}));
  g.mutableOutputs() = {loss, correct->output(0)};
  return Status::ok();
}

} // namespace hgp
