//===- LossScaling.cpp - --precision fp16: dynamic loss scaling on the device -----------------===//
//
// f16 has 5 exponent bits: small activation gradients flush to zero. As torch.cuda.amp.GradScaler
// does, the backward pass starts from the loss gradient `loss_scale` (a state, 2^16 at first)
// instead of 1, so every gradient is scaled by it; the optimizer multiplies each gradient by
// 1 / loss_scale as it reads it (SgdUpdate/AdamUpdate with grad_scale=1, still one multi-tensor
// launch). A step whose loss or gradients are not finite (CheckFinite, already there) is skipped
// as before, and LossScaleUpdate halves the scale; after 2000 finite steps in a row it doubles.
// Everything lives on the device, inside the captured graph: no host sync.
//
// This pass only adds the two states (the scale and the count of good steps); autodiff seeds the
// backward pass with names::kLossScale when the graph has it, and add-optimizer appends the scale
// to the updates and adds the LossScaleUpdate. It runs after add-loss and before autodiff, in the
// train pipeline only, and only for fp16 (bf16 has f32's exponent range and needs no scaling).
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"
#include "passes/TrainGraphNames.h"

#include <cstring>

namespace hgp {

Status runLossScaling(Graph& g, PassContext& ctx) {
  if (ctx.precision != Precision::FP16) return Status::ok();
  if (g.findValue(names::kLossScale)) return Status::ok();
  auto scale = std::make_shared<TensorData>();
  scale->type = {DType::F32, {}};
  float init = float(ctx.initialLossScale);
  scale->bytes.resize(4);
  std::memcpy(scale->bytes.data(), &init, 4);
  HGP_TRY(g.addGraphValue(names::kLossScale, TensorRole::State, scale->type, scale).status());
  HGP_TRY(g.addGraphValue(names::kLossScaleGood, TensorRole::State, {DType::I64, {}}).status());
  return Status::ok();
}

} // namespace hgp
