// Shape rule for FusedElementwise (runtime/plan/FusedProgram.h): every float input and every
// result has one shape; an i64 input is a dropout's iteration counter and must be a scalar (shape
// []); the program must read only defined values with the dtypes its ops require (checkFusedTypes
// also refuses an i64 input that is not a counter), and each result's dtype is the dtype of the
// value it writes.
#include "ir/OpInfo.h"
#include "runtime/plan/FusedProgram.h"

namespace hgp {

Status inferFusedElementwise(InferContext& ctx) {
  HGP_ASSIGN_OR_RETURN(FusedProgram p, parseFusedProgram(ctx.attrs, int(ctx.numInputs())));
  std::vector<DType> in;
  const Shape* shape = nullptr;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    const TensorType& t = ctx.in(i);
    in.push_back(t.dtype);
    if (t.dtype == DType::I64) {
      if (!t.shape.empty())
        return ctx.fail("FusedElementwise counter operand " + std::to_string(i) + " has shape " +
                        shapeToString(t.shape) + ", not []");
      continue;
    }
    if (!shape) shape = &t.shape;
    if (t.shape != *shape)
      return ctx.fail("FusedElementwise operand " + std::to_string(i) + " has shape " +
                      shapeToString(t.shape) + ", not " + shapeToString(*shape));
  }
  if (!shape) return ctx.fail("FusedElementwise has no element-wise operand");
  HGP_ASSIGN_OR_RETURN(std::vector<DType> types, checkFusedTypes(p, in));
  Shape out = *shape;
  ctx.outputs.clear();
  for (int r : p.results) ctx.outputs.push_back({types[size_t(r)], out});
  return Status::ok();
}

} // namespace hgp
