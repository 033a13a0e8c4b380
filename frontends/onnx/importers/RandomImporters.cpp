// Importers for random draws: torch's bernoulli_ as it exports it (stochastic depth's row mask,
// torchvision.ops.StochasticDepth), ONNX's Bernoulli, and RandomNormalLike.
//
// torch writes `noise.bernoulli_(p)` as
//   RandomUniformLike(noise) -> Less(., p) -> Cast(to=float)
// RandomUniformLike is not imported on its own: its draw waits (ImportContext::uniformDraws) for
// the Less (or Greater) that compares it with a constant, which becomes one Bernoulli over the
// draw's shape with P(1) = (p - low) / (high - low), keyed like a Dropout site so that every step
// draws a new mask (docs/training.md, "Stochastic depth"). Its result is an ONNX bool, a 0/1 mask
// in the IR as every bool is (ImportContext::boolMasks; CompareImporters.cpp). Comparisons of
// other tensors are CompareImporters.cpp's. RandomNormalLike becomes the IR's RandomNormal, keyed
// the same way.
#include "frontends/onnx/importers/Importers.h"

#include <algorithm>

namespace hgp {

namespace {

/// Emits Bernoulli(like) with probability `p` and binds result 0 of `n` to it.
Status emitBernoulli(OnnxNode& n, Value* like, double p, bool boolResult) {
  if (like->dtype() != DType::F32)
    return n.fail(std::string("random masks of ") + dtypeName(like->dtype()) +
                  " tensors are not supported (f32 only)");
  AttrMap a;
  a.setFloat("p", std::clamp(p, 0.0, 1.0));
  a.setInt("seed", 0);
  a.setInt("key", n.ctx().nextDropoutKey++);
  HGP_ASSIGN_OR_RETURN(Node * b, n.emit(OpKind::Bernoulli, {like}, a));
  n.setOutput(0, b->output(0));
  if (boolResult && n.hasOutput(0)) n.ctx().boolMasks.insert(n.outputName(0));
  return Status::ok();
}

} // namespace

/// Less(draw, c) (less=true) or Greater(draw, c): the draw of a RandomUniformLike against a
/// constant.
Status compareDrawIfAny(OnnxNode& n, bool less, bool& handled) {
  int drawIndex = -1;
  for (int i = 0; i < 2; ++i)
    if (n.hasInput(size_t(i)) && n.ctx().uniformDraws.count(n.inputName(size_t(i))))
      drawIndex = i;
  handled = drawIndex >= 0;
  if (!handled) return Status::ok();
  const onnx::NodeProto* draw = n.ctx().uniformDraws.at(n.inputName(size_t(drawIndex)));
  HGP_ASSIGN_OR_RETURN(double c, n.staticScalar(size_t(1 - drawIndex), "the threshold"));
  OnnxNode d(n.ctx(), *draw, draw->name().empty() ? n.loc() : draw->name());
  HGP_ASSIGN_OR_RETURN(double low, d.attrFloat("low", 0.0));
  HGP_ASSIGN_OR_RETURN(double high, d.attrFloat("high", 1.0));
  if (!(high > low)) return d.fail("high must be greater than low");
  Value* like = nullptr;
  // A static export's noise tensor (torch.empty([N, 1, 1, 1])) is a constant of the export's
  // batch, a Constant node (the TorchScript exporter) or an initializer (torch 2.11's dynamo
  // exporter). The mask needs only its shape: a constant of it (an initializer would be a
  // parameter), which under --batch follows the new batch (followBatch, ImportContext.h).
  if (auto known = d.staticInput(0, "the noise"); known.hasValue()) {
    const TensorType& kt = (*known)->type;
    std::vector<int64_t> shape(kt.shape.begin(), kt.shape.end());
    followBatch(n.ctx(), shape, -1);
    TensorType t{kt.dtype, Shape(shape.begin(), shape.end())};
    HGP_ASSIGN_OR_RETURN(auto data, makeTensor(t, "the noise shape of " + d.loc()));
    HGP_ASSIGN_OR_RETURN(like, n.graph().addGraphValue(n.graph().uniqueName(d.inputName(0)),
                                                       TensorRole::Const, t, std::move(data)));
  } else {
    HGP_ASSIGN_OR_RETURN(like, d.input(0));
  }
  double below = (c - low) / (high - low); // P(draw < c)
  // draw < c, or c > draw: P(1) = below; draw > c, or c < draw: 1 - below.
  bool drawBelow = (drawIndex == 0) == less;
  return emitBernoulli(n, like, drawBelow ? below : 1.0 - below, /*boolResult=*/true);
}

Status importRandomUniformLike(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(int64_t dtype, n.attrInt("dtype", onnx::TensorProto::FLOAT));
  if (dtype != onnx::TensorProto::FLOAT)
    return n.fail("only float draws are supported (dtype " + std::to_string(dtype) + ")");
  HGP_ASSIGN_OR_RETURN(TensorType like, n.inputType(0));
  (void)like;
  if (n.hasOutput(0)) n.ctx().uniformDraws[n.outputName(0)] = &n.proto();
  return Status::ok();
}

Status importBernoulli(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorDataPtr probs, n.staticInput(0, "the probabilities"));
  if (!isFloatDType(probs->type.dtype)) return n.fail("the probabilities must be floats");
  int64_t count = probs->type.numElements();
  if (count == 0) return n.fail("the probabilities are empty");
  double p = readDouble(*probs, 0);
  for (int64_t i = 1; i < count; ++i)
    if (readDouble(*probs, i) != p)
      return n.fail("only a Bernoulli with one probability for every element is supported");
  if (!(p >= 0 && p <= 1)) return n.fail("the probability " + std::to_string(p) + " is not in [0, 1]");
  HGP_ASSIGN_OR_RETURN(int64_t dtype, n.attrInt("dtype", onnx::TensorProto::FLOAT));
  bool boolResult = dtype == onnx::TensorProto::BOOL;
  if (!boolResult && dtype != onnx::TensorProto::FLOAT)
    return n.fail("only float and bool results are supported (dtype " + std::to_string(dtype) + ")");
  // The mask needs only the probabilities' shape (their one value is p): a constant of it, never
  // the initializer (which would be a parameter). A static export's [N, 1, 1, 1] of its batch
  // (stochastic depth's noise) follows --batch.
  std::vector<int64_t> shape(probs->type.shape.begin(), probs->type.shape.end());
  followBatch(n.ctx(), shape, -1);
  TensorType t{DType::F32, Shape(shape.begin(), shape.end())};
  HGP_ASSIGN_OR_RETURN(auto data, makeTensor(t, "the probabilities' shape of " + n.loc()));
  HGP_ASSIGN_OR_RETURN(Value * like, n.graph().addGraphValue(n.graph().uniqueName(n.inputName(0)),
                                                             TensorRole::Const, t, std::move(data)));
  return emitBernoulli(n, like, p, boolResult);
}

Status importRandomNormalLike(OnnxNode& n) {
  HGP_ASSIGN_OR_RETURN(TensorType lt, n.inputType(0));
  HGP_ASSIGN_OR_RETURN(int64_t dtype, n.attrInt("dtype", lt.dtype == DType::F32
                                                             ? onnx::TensorProto::FLOAT
                                                             : -1));
  if (dtype != onnx::TensorProto::FLOAT)
    return n.fail("only float draws are supported (dtype " + std::to_string(dtype) + ")");
  HGP_ASSIGN_OR_RETURN(double mean, n.attrFloat("mean", 0.0));
  HGP_ASSIGN_OR_RETURN(double scale, n.attrFloat("scale", 1.0));
  // The draw needs only the input's shape: a constant input becomes a zero constant of its shape
  // (which follows --batch, as the Bernoulli's noise does), never a parameter.
  Value* like = nullptr;
  if (n.known(0) || n.ctx().initializers.count(n.inputName(0))) {
    std::vector<int64_t> shape(lt.shape.begin(), lt.shape.end());
    followBatch(n.ctx(), shape, -1);
    TensorType t{DType::F32, Shape(shape.begin(), shape.end())};
    HGP_ASSIGN_OR_RETURN(auto data, makeTensor(t, "the shape of " + n.loc()));
    HGP_ASSIGN_OR_RETURN(like, n.graph().addGraphValue(n.graph().uniqueName(n.inputName(0)),
                                                       TensorRole::Const, t, std::move(data)));
  } else {
    HGP_ASSIGN_OR_RETURN(like, n.input(0));
    if (like->dtype() != DType::F32)
      return n.fail(std::string("a draw like a ") + dtypeName(like->dtype()) +
                    " tensor is not supported (f32 only)");
  }
  AttrMap a;
  a.setFloat("mean", mean);
  a.setFloat("scale", scale);
  a.setInt("seed", 0);
  a.setInt("key", n.ctx().nextDropoutKey++);
  HGP_ASSIGN_OR_RETURN(Node * r, n.emit(OpKind::RandomNormal, {like}, a));
  n.setOutput(0, r->output(0));
  return Status::ok();
}

} // namespace hgp
