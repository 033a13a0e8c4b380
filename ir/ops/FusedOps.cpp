// Shape rule for FusedElementwise (runtime/plan/FusedProgram.h): the results have the (numpy)
// broadcast of the float inputs' shapes, and every float input has that shape or a broadcast form of it
// (fusedOperandMap) that only FusedBroadcast instructions read; an i64 input is a dropout's
// iteration counter and must be a scalar (shape []); the program must read only defined values
// with the dtypes its ops require (checkFusedTypes also refuses an i64 input that is not a
// counter), and each result's dtype is the dtype of the value it writes.
#include "ir/OpInfo.h"
#include "runtime/plan/FusedProgram.h"

#include <algorithm>
#include <optional>

namespace hgp {

Status inferFusedElementwise(InferContext& ctx) {
  HGP_ASSIGN_OR_RETURN(FusedProgram p, parseFusedProgram(ctx.attrs, int(ctx.numInputs())));
  std::vector<DType> in;
  std::optional<Shape> shape;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    const TensorType& t = ctx.in(i);
    in.push_back(t.dtype);
    if (t.dtype == DType::I64) {
      if (!t.shape.empty())
        return ctx.fail("FusedElementwise counter operand " + std::to_string(i) + " has shape " +
                        shapeToString(t.shape) + ", not []");
      continue;
    }
    if (!shape) shape = t.shape;
    if (t.shape.size() > shape->size()) // numpy: the lower rank is padded with leading 1s
      shape->insert(shape->begin(), t.shape.size() - shape->size(), 1);
    size_t off = shape->size() - t.shape.size();
    for (size_t j = 0; j < t.shape.size(); ++j)
      (*shape)[off + j] = std::max((*shape)[off + j], t.shape[j]);
  }
  if (!shape) return ctx.fail("FusedElementwise has no element-wise operand");
  std::vector<FusedOperandMap> maps;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    if (ctx.in(i).dtype == DType::I64) {
      maps.emplace_back();
      continue;
    }
    Expected<FusedOperandMap> m = fusedOperandMap(ctx.in(i).shape, *shape);
    if (!m) return ctx.fail("FusedElementwise operand " + std::to_string(i) + ": " + m.status().message());
    maps.push_back(*m);
  }
  HGP_TRY(checkFusedBroadcasts(p, maps));
  HGP_ASSIGN_OR_RETURN(std::vector<DType> types, checkFusedTypes(p, in));
  ctx.outputs.clear();
  for (int r : p.results) ctx.outputs.push_back({types[size_t(r)], *shape});
  return Status::ok();
}

} // namespace hgp
