//===- ImageInput.cpp - --pixels u8: the model reads 8-bit pixels ------------------------------===//
//
// The runner decodes and crops images on the CPU (docs/data.md). With --pixels u8 they cross to
// the device as they are, 8-bit and channels-last, a quarter of float32's bytes, and the step
// itself makes the model's input: one ImageInput node (runtime/plan/OpList.def) flips each row
// its flag asks for, converts to float and normalizes, in one kernel inside the captured graph.
//
// The pass replaces the data input X [N,C,H,W] (the graph input that is not the labels) by two
// inputs: X's name now holds the pixels, u8 [N,H,W,C], and "<name>.flip" the flip flags, u8 [N].
// ImageInput's result takes X's place. When every reader of X is a Cast to one dtype (mixed
// precision's cast of the input, so this pass runs after mixed-precision), ImageInput writes
// that dtype and the Casts go. It runs on the train and the eval graphs alike, so that both
// programs read the same input tensors.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"
#include "passes/TrainGraphNames.h"

namespace hgp {

Status runImageInput(Graph& g, PassContext& ctx) {
  const TrainOptions& t = ctx.train;
  if (t.pixels != "u8") return Status::ok();
  Value* x = nullptr;
  for (Value* v : g.graphValues())
    if (v->role() == TensorRole::Input && v->name() != names::kLabels) {
      if (x) return Status(ErrorCode::InvalidModel, "--pixels u8 needs a model with one data input");
      x = v;
    }
  if (!x) return Status::ok();
  const Shape s = x->shape();
  if (s.size() != 4 || (s[1] != 1 && s[1] != 3) || x->dtype() != DType::F32)
    return Status(ErrorCode::InvalidModel,
                  "--pixels u8 needs a float input of N x C x H x W with 1 or 3 channels; '" +
                      x->name() + "' is " + dtypeName(x->dtype()) + " " + shapeToString(s));
  const int64_t c = s[1];
  auto perChannel = [&](const std::vector<double>& v, double def) {
    std::vector<double> out(size_t(c), def);
    for (size_t k = 0; k < out.size() && !v.empty(); ++k) out[k] = v[v.size() == 1 ? 0 : k];
    return out;
  };
  if ((t.pixelMean.size() > 1 && int64_t(t.pixelMean.size()) != c) ||
      t.pixelMean.size() != t.pixelStd.size())
    return Status(ErrorCode::Usage, "--normalize needs one mean and one std, or one of each per "
                                    "channel (" + std::to_string(c) + ")");
  // The result dtype: a Cast every reader applies, folded in.
  DType to = DType::F32;
  std::vector<Node*> casts;
  for (Node* u : x->users()) {
    if (u->op() != OpKind::Cast || (!casts.empty() && u->output(0)->dtype() != to)) {
      casts.clear();
      to = DType::F32;
      break;
    }
    casts.push_back(u);
    to = u->output(0)->dtype();
  }
  const std::string name = x->name();
  HGP_TRY(g.renameValue(x, g.uniqueName(name + ".f32")));
  HGP_ASSIGN_OR_RETURN(Value * pixels, g.addGraphValue(name, TensorRole::Input,
                                                       TensorType{DType::U8, {s[0], s[2], s[3], c}}));
  HGP_ASSIGN_OR_RETURN(Value * flip, g.addGraphValue(name + ".flip", TensorRole::Input,
                                                     TensorType{DType::U8, {s[0]}}));
  AttrMap a;
  a.setFloats("mean", perChannel(t.pixelMean, 0.0));
  a.setFloats("std", perChannel(t.pixelStd, 1.0));
  a.setString("to", dtypeName(to));
  g.setInsertionPoint(g.nodes().empty() ? nullptr : g.nodes().front());
  Expected<Node*> made = g.addNode(OpKind::ImageInput, {pixels, flip}, a, "image_input", 1,
                                   TensorRole::Activation, {g.uniqueName(name + ".image")});
  g.setInsertionPoint(nullptr);
  if (!made) return made.status();
  Value* y = (*made)->output(0);
  for (Node* cast : casts) {
    g.replaceAllUsesWith(cast->output(0), y);
    HGP_TRY(g.eraseNode(cast));
  }
  g.replaceAllUsesWith(x, y);
  HGP_TRY(g.eraseGraphValue(x));
  ctx.stats["image-input.casts-folded"] += int64_t(casts.size());
  return Status::ok();
}

} // namespace hgp
