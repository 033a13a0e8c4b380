#include "ir/OpInfo.h"

#include "runtime/plan/Layout.h"

#include <algorithm>

namespace hgp {

namespace {
using InferFn = Status (*)(InferContext&);
constexpr InferFn kInfer[] = {
#define HGP_OP(Name, ...) &infer##Name,
#include "runtime/plan/OpList.def"
};
} // namespace

Status InferContext::fail(const std::string& msg) const {
  return Status(ErrorCode::InvalidModel, msg);
}

Status inferTypes(OpKind op, const AttrMap& attrs, const std::vector<TensorType>& inputs,
                  int numOutputs, std::vector<TensorType>& outputs) {
  const OpTraits& tr = opTraits(op);
  int n = int(inputs.size());
  if (n < tr.minInputs || (tr.maxInputs >= 0 && n > tr.maxInputs))
    return Status(ErrorCode::InvalidModel,
                  std::string(tr.name) + " takes " + std::to_string(tr.minInputs) +
                      (tr.maxInputs == tr.minInputs ? ""
                       : tr.maxInputs < 0           ? " or more"
                                                    : " to " + std::to_string(tr.maxInputs)) +
                      " inputs, got " + std::to_string(n));
  if (numOutputs >= 0 &&
      (numOutputs < tr.minOutputs || (tr.maxOutputs >= 0 && numOutputs > tr.maxOutputs)))
    return Status(ErrorCode::InvalidModel, std::string(tr.name) + " cannot have " +
                                               std::to_string(numOutputs) + " results");
  for (const TensorType& t : inputs)
    for (int64_t d : t.shape)
      if (d <= 0) return Status(ErrorCode::InvalidModel, "an input has a non-positive dim");
  // Channels-last ops (runtime/plan/Layout.h): the NCHW rule on the permuted rank-4 operands.
  HGP_ASSIGN_OR_RETURN(Layout layout, layoutOf(op, attrs));
  std::vector<TensorType> nchw;
  if (layout == Layout::NHWC) {
    nchw = inputs;
    for (TensorType& t : nchw) t.shape = channelsFirstShape(t.shape);
  }
  InferContext ctx{op, attrs, layout == Layout::NHWC ? nchw : inputs, numOutputs, {}};
  HGP_TRY(kInfer[int(op)](ctx));
  if (layout == Layout::NHWC)
    for (TensorType& t : ctx.outputs) t.shape = channelsLastShape(t.shape);
  if (numOutputs >= 0 && int(ctx.outputs.size()) != numOutputs)
    return Status(ErrorCode::InvalidModel, std::string(tr.name) + " gives " +
                                               std::to_string(ctx.outputs.size()) +
                                               " results here, not " + std::to_string(numOutputs));
  constexpr int64_t kMaxElements = int64_t(1) << 40;
  for (const TensorType& t : ctx.outputs) {
    int64_t e = 1;
    for (int64_t d : t.shape) {
      if (d <= 0) return Status(ErrorCode::InvalidModel, "a result would have a non-positive dim " +
                                                             shapeToString(t.shape));
      if (e > kMaxElements / d)
        return Status(ErrorCode::InvalidModel, "a result would have more than 2^40 elements");
      e *= d;
    }
  }
  outputs = std::move(ctx.outputs);
  return Status::ok();
}

Expected<Shape> broadcastShapes(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      return Status(ErrorCode::InvalidModel, "shapes " + shapeToString(a) + " and " +
                                                 shapeToString(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Status requireF32(const InferContext& ctx, size_t i, const char* what) {
  if (ctx.in(i).dtype != DType::F32)
    return ctx.fail(std::string(what) + " must be f32, not " + dtypeName(ctx.in(i).dtype));
  return Status::ok();
}

Status requireFloat(const InferContext& ctx, size_t i, const char* what) {
  DType t = ctx.in(i).dtype;
  if (t != DType::F32 && t != DType::BF16 && t != DType::F16)
    return ctx.fail(std::string(what) + " must be f32, bf16 or f16, not " + dtypeName(t));
  return Status::ok();
}

Status requireSameFloat(const InferContext& ctx, size_t i, size_t ref, const char* what) {
  HGP_TRY(requireFloat(ctx, i, what));
  if (ctx.in(i).dtype != ctx.in(ref).dtype)
    return ctx.fail(std::string(what) + " is " + dtypeName(ctx.in(i).dtype) + " but operand " +
                    std::to_string(ref) + " is " + dtypeName(ctx.in(ref).dtype) +
                    " (mixed dtypes need an explicit Cast)");
  return Status::ok();
}

Expected<std::vector<int64_t>> intsOfLength(const InferContext& ctx, const char* name, size_t n) {
  HGP_ASSIGN_OR_RETURN(auto v, ctx.attrs.requireInts(name));
  if (v.size() != n)
    return ctx.fail(std::string("attribute '") + name + "' must have " + std::to_string(n) +
                    " entries, has " + std::to_string(v.size()));
  return v;
}

} // namespace hgp
