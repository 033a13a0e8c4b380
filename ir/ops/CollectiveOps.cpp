// Shape rules for collectives: AllReduce returns one tensor of the same type per operand.
#include "ir/OpInfo.h"

namespace hgp {

Status inferAllReduce(InferContext& ctx) {
  std::string reduce = ctx.attrs.getString("reduce", "avg");
  if (reduce != "avg" && reduce != "sum")
    return ctx.fail("reduce must be avg or sum, not '" + reduce + "'");
  if (ctx.attrs.getInt("ranks", 1) < 1) return ctx.fail("ranks must be >= 1");
  if (ctx.numOutputs >= 0 && size_t(ctx.numOutputs) != ctx.numInputs())
    return ctx.fail("an all-reduce has one result per operand");
  ctx.outputs.clear();
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    HGP_TRY(requireF32(ctx, i, "operand"));
    ctx.outputs.push_back(ctx.in(i));
  }
  return Status::ok();
}

} // namespace hgp
