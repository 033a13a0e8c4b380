// Shape rules for the activation family: one-input elementwise ops and their gradients.
#include "ir/OpInfo.h"

namespace hgp {

namespace {

Status unary(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "input"));
  ctx.outputs = {ctx.in(0)};
  return Status::ok();
}

Status unaryBwd(InferContext& ctx) {
  HGP_TRY(requireFloat(ctx, 0, "dY"));
  if (ctx.in(1) != ctx.in(0))
    return ctx.fail("dY " + typeToString(ctx.in(0)) + " and the saved tensor " +
                    typeToString(ctx.in(1)) + " must have the same type");
  ctx.outputs = {ctx.in(0)};
  return Status::ok();
}

Status clipBounds(InferContext& ctx) {
  if (ctx.attrs.has("min") && ctx.attrs.has("max") &&
      ctx.attrs.getFloat("min") > ctx.attrs.getFloat("max"))
    return ctx.fail("Clip min is greater than max");
  return Status::ok();
}

} // namespace

Status inferRelu(InferContext& ctx) { return unary(ctx); }
Status inferLeakyRelu(InferContext& ctx) { return unary(ctx); }
Status inferClip(InferContext& ctx) {
  HGP_TRY(clipBounds(ctx));
  return unary(ctx);
}
Status inferSigmoid(InferContext& ctx) { return unary(ctx); }
Status inferTanh(InferContext& ctx) { return unary(ctx); }
Status inferHardSigmoid(InferContext& ctx) { return unary(ctx); }
Status inferHardSwish(InferContext& ctx) { return unary(ctx); }
Status inferSilu(InferContext& ctx) { return unary(ctx); }
Status inferNeg(InferContext& ctx) { return unary(ctx); }
Status inferScale(InferContext& ctx) {
  if (!ctx.attrs.has("alpha")) return ctx.fail("Scale needs attribute 'alpha'");
  return unary(ctx);
}

Status inferGelu(InferContext& ctx) {
  std::string form = ctx.attrs.getString("approximate", "none");
  if (form != "none" && form != "tanh")
    return ctx.fail("Gelu approximate must be \"none\" or \"tanh\", not \"" + form + "\"");
  return unary(ctx);
}
Status inferErf(InferContext& ctx) { return unary(ctx); }
Status inferExp(InferContext& ctx) { return unary(ctx); }
Status inferLog(InferContext& ctx) { return unary(ctx); }
Status inferSqrt(InferContext& ctx) { return unary(ctx); }
Status inferReciprocal(InferContext& ctx) { return unary(ctx); }
Status inferGeluBwd(InferContext& ctx) {
  HGP_TRY(inferGelu(ctx));
  return unaryBwd(ctx);
}

Status inferReluBwd(InferContext& ctx) { return unaryBwd(ctx); }
Status inferLeakyReluBwd(InferContext& ctx) { return unaryBwd(ctx); }
Status inferClipBwd(InferContext& ctx) {
  HGP_TRY(clipBounds(ctx));
  return unaryBwd(ctx);
}
Status inferSigmoidBwd(InferContext& ctx) { return unaryBwd(ctx); }
Status inferTanhBwd(InferContext& ctx) { return unaryBwd(ctx); }
Status inferHardSigmoidBwd(InferContext& ctx) { return unaryBwd(ctx); }
Status inferHardSwishBwd(InferContext& ctx) { return unaryBwd(ctx); }
Status inferSiluBwd(InferContext& ctx) { return unaryBwd(ctx); }

} // namespace hgp
