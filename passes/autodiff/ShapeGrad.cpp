// Gradient rules for data movement.
#include "passes/autodiff/GradContext.h"

namespace hgp {

namespace {
/// A zero tensor of the given type, for the results of a Split that got no gradient.
Expected<Value*> zeros(GradContext& ctx, const TensorType& t) {
  auto data = std::make_shared<TensorData>();
  data->type = t;
  return ctx.graph().addGraphValue(ctx.graph().uniqueName("zeros"), TensorRole::Const, t, data);
}
} // namespace

Status gradConcat(GradContext& ctx) {
  std::vector<int64_t> sizes;
  int64_t axis = ctx.attrs().getInt("axis");
  for (Value* in : ctx.node().inputs()) sizes.push_back(in->shape()[size_t(axis)]);
  AttrMap a;
  a.setInt("axis", axis);
  a.setInts("split", sizes);
  HGP_ASSIGN_OR_RETURN(auto parts, ctx.emit(OpKind::Split, {ctx.outGrad(0)}, a, int(sizes.size())));
  for (size_t i = 0; i < parts.size(); ++i) ctx.setInputGrad(i, parts[i]);
  return Status::ok();
}

Status gradSplit(GradContext& ctx) {
  std::vector<Value*> parts;
  for (size_t i = 0; i < ctx.node().numOutputs(); ++i) {
    Value* g = ctx.outGrad(i);
    if (!g) {
      HGP_ASSIGN_OR_RETURN(g, zeros(ctx, ctx.out(i)->type()));
    }
    parts.push_back(g);
  }
  AttrMap a;
  a.setInt("axis", ctx.attrs().getInt("axis"));
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::Concat, parts, a));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

Status gradSlice(GradContext& ctx) {
  AttrMap a = ctx.attrs();
  a.setInts("x_shape", ctx.in(0)->shape());
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::SliceBwd, {ctx.outGrad(0)}, a));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

Status gradReshape(GradContext& ctx) {
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.reshape(ctx.outGrad(0), ctx.in(0)->shape()));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

Status gradTranspose(GradContext& ctx) {
  std::vector<int64_t> perm = ctx.attrs().getInts("perm"), inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[size_t(perm[i])] = int64_t(i);
  AttrMap a;
  a.setInts("perm", inverse);
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::Transpose, {ctx.outGrad(0)}, a));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

Status gradPad(GradContext& ctx) {
  AttrMap a = ctx.attrs();
  a.setInts("x_shape", ctx.in(0)->shape());
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::PadBwd, {ctx.outGrad(0)}, a));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

Status gradExpand(GradContext& ctx) {
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.unbroadcast(ctx.outGrad(0), ctx.in(0)->shape()));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

Status gradCast(GradContext& ctx) {
  // A bool (a graph boundary's 0/1 byte) carries no gradient, either way.
  if (ctx.in(0)->dtype() == DType::Bool || ctx.out(0)->dtype() == DType::Bool) return Status::ok();
  AttrMap a;
  a.setString("to", dtypeName(ctx.in(0)->dtype()));
  HGP_ASSIGN_OR_RETURN(Value * dx, ctx.emit1(OpKind::Cast, {ctx.outGrad(0)}, a));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

} // namespace hgp
