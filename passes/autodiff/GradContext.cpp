#include "passes/autodiff/GradContext.h"

namespace hgp {

Expected<std::vector<Value*>> GradContext::emit(OpKind op, std::vector<Value*> inputs,
                                                AttrMap attrs, int numOutputs) {
  HGP_ASSIGN_OR_RETURN(Node * n, graph_.addNode(op, std::move(inputs), std::move(attrs),
                                                node_.name().empty() ? "" : node_.name() + "/bwd",
                                                numOutputs, TensorRole::Gradient));
  return n->outputs();
}

Expected<Value*> GradContext::emit1(OpKind op, std::vector<Value*> inputs, AttrMap attrs) {
  HGP_ASSIGN_OR_RETURN(auto outs, emit(op, std::move(inputs), std::move(attrs)));
  return outs[0];
}

Expected<Value*> GradContext::reshape(Value* v, const Shape& shape) {
  if (v->shape() == shape) return v;
  AttrMap a;
  a.setInts("shape", shape);
  return emit1(OpKind::Reshape, {v}, a);
}

Expected<Value*> GradContext::scale(Value* v, double alpha) {
  if (alpha == 1.0) return v;
  AttrMap a;
  a.setFloat("alpha", alpha);
  return emit1(OpKind::Scale, {v}, a);
}

Expected<Value*> GradContext::unbroadcast(Value* g, const Shape& to) {
  const Shape& from = g->shape();
  if (from == to) return g;
  size_t lead = from.size() - to.size();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < from.size(); ++i)
    if (i < lead || (to[i - lead] == 1 && from[i] != 1)) axes.push_back(int64_t(i));
  Value* summed = g;
  if (!axes.empty()) {
    AttrMap a;
    a.setInts("axes", axes);
    a.setInt("keepdims", 0);
    HGP_ASSIGN_OR_RETURN(summed, emit1(OpKind::ReduceSum, {g}, a));
  }
  return reshape(summed, to);
}

} // namespace hgp
