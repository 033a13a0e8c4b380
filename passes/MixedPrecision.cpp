//===- MixedPrecision.cpp - --precision bf16|fp16: activations in 16 bits --------------------===//
//
// Runs on the forward training (or eval) graph after add-loss and before autodiff, so that the
// backward pass inherits the dtypes: the gradient of a bf16 value is bf16, and the gradient of a
// Cast is the Cast back. What it does, as PyTorch AMP does:
//
//   - Every op of the model computes on 16-bit operands (PassContext::precision, bf16 or f16):
//     convolutions, matrix products, BatchNorm's X and Y, pooling, activations, elementwise and
//     data movement. The executors accumulate in float32 and round on store.
//   - Parameters stay float32: they are the master weights the optimizer updates. A parameter a
//     16-bit op reads gets one Cast per step (made before its first use and shared by every use);
//     its gradient comes back through the Cast as float32, so the optimizer and its state stay
//     float32. BatchNorm's and LayerNorm's scale, bias and statistics are float32 operands and
//     get no Cast.
//   - The loss and the accuracy count read float32 logits: the model's output is cast up, and the
//     float32 copy takes the output's name (the eval program binds it as eval.logits).
//   - The data input stays float32 on the host side and is cast once at its first use.
//
// It inserts the fewest Casts this policy allows: one per (value, dtype) pair. Nodes whose
// operand types change are rebuilt in place, keeping their names and their results' names.
//
//===----------------------------------------------------------------------------------------===//
#include "ir/OpInfo.h"
#include "passes/Pass.h"
#include "runtime/plan/Half.h"

#include <map>

namespace hgp {

namespace {

bool isFloat(DType t) {
  return t == DType::F32 || isHalfDType(t);
}

/// The dtype operand `i` of `n` must have: float32 for the operands that stay float32 in every
/// precision, `low` for the rest.
DType operandDType(const Node& n, size_t i, DType low) {
  switch (opTraits(n.op()).precisionRule()) {
  case PrecisionRule::Low: return low;
  case PrecisionRule::F32: return DType::F32;
  case PrecisionRule::LowFirst1: return i == 0 ? low : DType::F32;
  case PrecisionRule::LowFirst2: return i <= 1 ? low : DType::F32;
  case PrecisionRule::Keep: return n.input(i)->dtype();
  }
  return low;
}

class Rewriter {
public:
  Rewriter(Graph& g, PassContext& ctx, DType low) : g_(g), ctx_(ctx), low_(low) {}

  Status run() {
    for (Node* n : std::vector<Node*>(g_.nodes())) HGP_TRY(visit(n));
    g_.setInsertionPoint(nullptr);
    return Status::ok();
  }

private:
  /// `v` in dtype `t`: itself, or one shared Cast of it, made right before `user`.
  Expected<Value*> castTo(Value* v, DType t, Node* user) {
    if (v->dtype() == t) return v;
    auto key = std::make_pair(v, t);
    if (auto it = casts_.find(key); it != casts_.end()) return it->second;
    AttrMap a;
    a.setString("to", dtypeName(t));
    // A value cast up for the loss hands its name to the float32 copy, so names that the plan
    // binds (the logits) keep meaning float32 values.
    bool takeName = t == DType::F32 && !v->isGraphLevel();
    std::string name = v->name();
    if (takeName)
      HGP_TRY(g_.renameValue(v, g_.uniqueName(name + "." + dtypeName(v->dtype()))));
    else
      name = g_.uniqueName(name + "." + dtypeName(t));
    g_.setInsertionPoint(user);
    HGP_ASSIGN_OR_RETURN(Node * c, g_.addNode(OpKind::Cast, {v}, a, "cast/" + name, 1,
                                              TensorRole::Activation, {name}));
    ++ctx_.stats["mixed-precision.casts"];
    casts_[key] = c->output(0);
    return c->output(0);
  }

  Status visit(Node* n) {
    if (n->op() == OpKind::Cast) return Status::ok();
    std::vector<Value*> ins = n->inputs();
    std::vector<TensorType> inTypes;
    bool changed = false;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (isFloat(ins[i]->dtype())) {
        HGP_ASSIGN_OR_RETURN(Value * c, castTo(ins[i], operandDType(*n, i, low_), n));
        changed |= c != ins[i];
        ins[i] = c;
      }
      inTypes.push_back(ins[i]->type());
    }
    std::vector<TensorType> outTypes;
    HGP_TRY_CTX(inferTypes(n->op(), n->attrs(), inTypes, int(n->numOutputs()), outTypes),
                "node '" + n->name() + "' in " + dtypeName(low_));
    for (size_t i = 0; i < n->numOutputs(); ++i) changed |= outTypes[i] != n->output(i)->type();
    if (!changed) return Status::ok();

    // Rebuild the node over the new operands; its results keep their names and roles.
    std::vector<std::string> names;
    for (Value* o : n->outputs()) {
      names.push_back(o->name());
      HGP_TRY(g_.renameValue(o, g_.uniqueName(o->name() + ".f32")));
    }
    g_.setInsertionPoint(n);
    HGP_ASSIGN_OR_RETURN(Node * m, g_.addNode(n->op(), ins, n->attrs(), n->name(),
                                              int(n->numOutputs()), n->output(0)->role(), names));
    for (size_t i = 0; i < n->numOutputs(); ++i) g_.replaceAllUsesWith(n->output(i), m->output(i));
    ++ctx_.stats["mixed-precision.nodes"];
    return g_.eraseNode(n);
  }

  Graph& g_;
  PassContext& ctx_;
  DType low_;
  std::map<std::pair<Value*, DType>, Value*> casts_;
};

} // namespace

Status runMixedPrecision(Graph& g, PassContext& ctx) {
  if (!isMixedPrecision(ctx.precision)) return Status::ok();
  return Rewriter(g, ctx, activationDType(ctx.precision)).run();
}

} // namespace hgp
