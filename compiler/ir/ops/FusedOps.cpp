// Shape rule for FusedElementwise (runtime/plan/FusedProgram.h): every input and result has one
// shape; the program must read only defined values with the dtypes its ops require, and each
// result's dtype is the dtype of the value it writes.
#include "compiler/ir/OpInfo.h"
#include "runtime/plan/FusedProgram.h"

namespace hgp {

Status inferFusedElementwise(InferContext& ctx) {
  HGP_ASSIGN_OR_RETURN(FusedProgram p, parseFusedProgram(ctx.attrs, int(ctx.numInputs())));
  std::vector<DType> in;
  const Shape& shape = ctx.in(0).shape;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    if (ctx.in(i).shape != shape)
      return ctx.fail("FusedElementwise operand " + std::to_string(i) + " has shape " +
                      shapeToString(ctx.in(i).shape) + ", not " + shapeToString(shape));
    in.push_back(ctx.in(i).dtype);
  }
  HGP_ASSIGN_OR_RETURN(std::vector<DType> types, checkFusedTypes(p, in));
  ctx.outputs.clear();
  for (int r : p.results) ctx.outputs.push_back({types[size_t(r)], shape});
  return Status::ok();
}

} // namespace hgp
