// Importers for normalization: BatchNormalization (inference and training mode, every opset
// variant), LayerNormalization and LRN.
#include "frontends/onnx/importers/Importers.h"
#include "ir/OpInfo.h"

namespace hgp {

namespace {

/// Whether a BatchNormalization node runs in training mode. Opset 14 says so with the
/// training_mode attribute; before it, a node that asks for more than Y is in training mode.
Expected<bool> bnTrainingMode(OnnxNode& n) {
  if (n.opset() >= 14) {
    HGP_ASSIGN_OR_RETURN(int64_t t, n.attrInt("training_mode", 0));
    if (t != 0 && t != 1) return n.fail("training_mode must be 0 or 1");
    if (!t && n.numOutputs() > 1 && (n.outputUsed(1) || n.outputUsed(2)))
      return n.fail("running statistics outputs are only defined in training mode");
    return t == 1;
  }
  for (size_t i = 1; i < n.numOutputs(); ++i)
    if (n.hasOutput(i)) return true;
  return false;
}

} // namespace

Status importBatchNormalization(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(double epsilon, n.attrFloat("epsilon", 1e-5));
  HGP_ASSIGN_OR_RETURN(double momentum, n.attrFloat("momentum", 0.9));
  if (n.opset() < 9) {
    HGP_ASSIGN_OR_RETURN(int64_t spatial, n.attrInt("spatial", 1));
    if (spatial != 1) return n.fail("spatial=0 (per-activation statistics) is not supported");
  }
  if (n.numOutputs() > (n.opset() >= 14 ? 3u : 5u))
    return n.fail("has " + std::to_string(n.numOutputs()) + " outputs, this opset allows " +
                  (n.opset() >= 14 ? "3" : "5"));
  if (n.outputUsed(4))
    return n.fail("the saved_var output (opset < 14) is not supported: its meaning is "
                  "unspecified");
  HGP_ASSIGN_OR_RETURN(bool training, bnTrainingMode(n));
  if (training) ++n.ctx().trainingBatchNorms;
  else if (n.ctx().options.trainInferenceBatchNorm) ++n.ctx().retrainedBatchNorms;
  else ++n.ctx().frozenBatchNorms;
  training = training || n.ctx().options.trainInferenceBatchNorm;
  std::vector<Value*> ins;
  for (size_t i = 0; i < 5; ++i) {
    HGP_ASSIGN_OR_RETURN(Value * v, n.input(i));
    ins.push_back(v);
  }
  AttrMap a;
  a.setFloat("epsilon", epsilon);
  if (!training) {
    HGP_ASSIGN_OR_RETURN(Node * bn, n.emit(OpKind::BatchNorm, ins, a));
    n.setOutput(0, bn->output(0));
    return Status::ok();
  }

  HGP_ASSIGN_OR_RETURN(Node * bn, n.emit(OpKind::BatchNormTrain, {ins[0], ins[1], ins[2]}, a));
  n.setOutput(0, bn->output(0));
  n.setOutput(3, bn->output(1)); // saved_mean (opset < 14): the batch mean.
  if (!(momentum >= 0 && momentum <= 1))
    return n.fail("momentum " + std::to_string(momentum) + " is not in [0, 1]");
  const Shape& x = ins[0]->shape();
  HGP_ASSIGN_OR_RETURN(int64_t total, checkedProduct(n, x));
  AttrMap u;
  u.setFloat("momentum", momentum);
  u.setInt("unbiased", n.ctx().pytorchProducer ? 1 : 0);
  u.setInt("count", x.size() >= 2 ? total / x[1] : total);
  HGP_ASSIGN_OR_RETURN(Node * upd, n.emit(OpKind::BnRunningUpdate,
                                          {ins[3], ins[4], bn->output(1), bn->output(2)}, u));
  n.setOutput(1, upd->output(0));
  n.setOutput(2, upd->output(1));
  for (int k = 0; k < 2; ++k) {
    Value* state = ins[3 + k];
    if (!state->isGraphLevel() || state->role() != TensorRole::State) continue;
    if (!n.ctx().carried.insert(state).second)
      return n.fail("running statistic '" + state->name() +
                    "' is updated by more than one BatchNormalization in training mode");
    n.graph().addCarry(state, upd->output(size_t(k)));
  }
  return Status::ok();
}

Status importLayerNormalization(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorType x, n.inputType(0));
  HGP_ASSIGN_OR_RETURN(int64_t axis, n.attrInt("axis", -1));
  HGP_ASSIGN_OR_RETURN(axis, normalizeAxisFor(n, axis, x.rank()));
  HGP_ASSIGN_OR_RETURN(double epsilon, n.attrFloat("epsilon", 1e-5));
  HGP_ASSIGN_OR_RETURN(int64_t stash, n.attrInt("stash_type", 1));
  if (stash != 1) return n.fail("stash_type " + std::to_string(stash) + " is not supported (1: f32)");
  if (!(epsilon > 0)) return n.fail("epsilon must be positive");
  Shape inner(x.shape.begin() + axis, x.shape.end());
  std::vector<Value*> ins;
  for (size_t i = 0; i < n.numInputs(); ++i) {
    if (!n.hasInput(i)) continue;
    HGP_ASSIGN_OR_RETURN(Value * v, n.input(i));
    if (i > 0 && v->shape() != inner) {
      // A broadcastable scale or bias (the spec allows it): expand it to the normalized dims.
      auto b = broadcastShapes(v->shape(), inner);
      if (!b || *b != inner)
        return n.fail(std::string(i == 1 ? "Scale " : "B ") + shapeToString(v->shape()) +
                      " does not broadcast to the normalized dims " + shapeToString(inner));
      AttrMap e;
      e.setInts("shape", inner);
      HGP_ASSIGN_OR_RETURN(Node * ex, n.emit(OpKind::Expand, {v}, e));
      v = ex->output(0);
    }
    ins.push_back(v);
  }
  if (ins.size() < 2) return n.fail("Scale is required");
  AttrMap a;
  a.setInt("axis", axis);
  a.setFloat("epsilon", epsilon);
  HGP_ASSIGN_OR_RETURN(Node * ln, n.emit(OpKind::LayerNorm, ins, a));
  for (size_t i = 0; i < 3; ++i) n.setOutput(i, ln->output(i));
  return Status::ok();
}

Status importLRN(OnnxNode& n) {
  if (!n.hasAttr("size")) return n.fail("attribute 'size' is required");
  HGP_ASSIGN_OR_RETURN(int64_t size, n.attrInt("size", 0));
  HGP_ASSIGN_OR_RETURN(double alpha, n.attrFloat("alpha", 1e-4));
  HGP_ASSIGN_OR_RETURN(double beta, n.attrFloat("beta", 0.75));
  HGP_ASSIGN_OR_RETURN(double bias, n.attrFloat("bias", 1.0));
  AttrMap a;
  a.setInt("size", size);
  a.setFloat("alpha", alpha);
  a.setFloat("beta", beta);
  a.setFloat("bias", bias);
  HGP_ASSIGN_OR_RETURN(Value * x, n.input(0));
  HGP_ASSIGN_OR_RETURN(Node * node, n.emit(OpKind::LRN, {x}, a));
  n.setOutput(0, node->output(0));
  return Status::ok();
}

} // namespace hgp
