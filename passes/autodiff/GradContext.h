// GradContext.h - what a gradient rule sees and the builders it uses.
//
// The autodiff pass (Autodiff.cpp) walks the forward nodes backwards. For each node whose
// results received gradients and some of whose inputs need one, it calls the op's rule
// `Status grad<Name>(GradContext&)`, declared here for every op that OpList.def marks Diff and
// defined in passes/autodiff/<Family>Grad.cpp. A rule reads the gradients of the node's results
// (outGrad, null where a result got none), emits backward nodes through the builders, and hands
// each input's gradient to setInputGrad. The pass adds up gradients that reach a value along
// several paths.
#pragma once

#include "ir/Graph.h"

#include <vector>

namespace hgp {

class GradContext {
public:
  GradContext(Graph& g, Node& n, std::vector<Value*> outGrads, std::vector<bool> needs)
      : graph_(g), node_(n), outGrads_(std::move(outGrads)), needs_(std::move(needs)),
        inGrads_(node_.numInputs(), nullptr) {}

  Node& node() const { return node_; }
  Graph& graph() const { return graph_; }
  Value* in(size_t i) const { return node_.input(i); }
  Value* out(size_t i) const { return node_.output(i); }
  const AttrMap& attrs() const { return node_.attrs(); }

  /// The gradient of result i, or null when nothing downstream needed it.
  Value* outGrad(size_t i) const { return outGrads_[i]; }
  /// Whether input i needs a gradient (it depends on a parameter).
  bool needs(size_t i) const { return i < needs_.size() && needs_[i]; }
  /// Gives input i its gradient (ignored when the input needs none).
  void setInputGrad(size_t i, Value* g) {
    if (needs(i)) inGrads_[i] = g;
  }
  const std::vector<Value*>& inputGrads() const { return inGrads_; }

  /// Adds a backward node and returns its results. Nodes are named after the forward node.
  Expected<std::vector<Value*>> emit(OpKind op, std::vector<Value*> inputs, AttrMap attrs = {},
                                     int numOutputs = -1);
  /// Adds a single-result backward node.
  Expected<Value*> emit1(OpKind op, std::vector<Value*> inputs, AttrMap attrs = {});

  Expected<Value*> reshape(Value* v, const Shape& shape);
  Expected<Value*> scale(Value* v, double alpha);
  /// Sums a gradient of a broadcast result back to the shape of the operand it came from.
  Expected<Value*> unbroadcast(Value* g, const Shape& to);

private:
  Graph& graph_;
  Node& node_;
  std::vector<Value*> outGrads_;
  std::vector<bool> needs_;
  std::vector<Value*> inGrads_;
};

#define HGP_GRAD_DECL_Diff(Name) Status grad##Name(GradContext& ctx);
#define HGP_GRAD_DECL_NoDiff(Name)
#define HGP_OP(Name, Family, MinIn, MaxIn, MinOut, MaxOut, Grad, ...) HGP_GRAD_DECL_##Grad(Name)
#include "runtime/plan/OpList.def"
#undef HGP_GRAD_DECL_Diff
#undef HGP_GRAD_DECL_NoDiff

} // namespace hgp
