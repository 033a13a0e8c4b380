//===- RecognizeGelu.cpp - the exporters' erf formula of GELU as one Gelu --------------------===//
//
// torch.onnx's TorchScript exporter writes nn.GELU() as x * (1 + erf(x / sqrt 2)) * 0.5:
//   Div(x, 1.4142135) -> Erf -> Add(., 1) -> Mul(x, .) -> Mul(., 0.5)
// (or with Mul(x, 0.70710678) for the Div, and the 0.5 multiplied into x first). This pass finds
// that chain, each intermediate read only by the next, with scalar constants of those values,
// and replaces it by one Gelu (approximate="none"), whose forward and backward are one kernel
// each. Anything else stays as it is: Erf is an op of its own.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"

#include <cmath>
#include <set>

namespace hgp {

namespace {

/// The value of a scalar (one-element) f32 constant, or NaN.
double constScalar(const Value* v) {
  if (v->role() != TensorRole::Const || !v->data() || v->type().numElements() != 1 ||
      v->dtype() != DType::F32)
    return NAN;
  return v->data()->elementAsDouble(0);
}

bool near(double v, double want) {
  return std::fabs(v - want) <= 1e-6 * std::fabs(want);
}

/// Matches the chain over one graph; `escaping` holds its outputs and carried values, results
/// that must stay even when no node reads them.
struct GeluMatcher {
  const std::set<const Value*>& escaping;

  /// The node producing `v` when it is an `op` whose result only `reader` reads.
  Node* soleProducer(const Value* v, OpKind op, const Node* reader) {
    Node* p = v->producer();
    if (!p || p->op() != op || p->numOutputs() != 1 || escaping.count(v)) return nullptr;
    for (const Node* u : v->users())
      if (u != reader) return nullptr;
    return p;
  }

  /// For a binary node with one scalar-constant operand: the other operand, and the constant.
  Value* otherThanConst(const Node* n, double& c) {
    for (size_t i = 0; i < 2; ++i) {
      c = constScalar(n->input(i));
      if (!std::isnan(c)) return n->input(1 - i);
    }
    return nullptr;
  }

  /// Whether `v` is erf(x / sqrt 2) + 1, read only by `reader`; sets x.
  bool isErfPlusOne(const Value* v, const Node* reader, Value*& x) {
    Node* add = soleProducer(v, OpKind::Add, reader);
    double c;
    Value* e = add ? otherThanConst(add, c) : nullptr;
    if (!e || !near(c, 1.0)) return false;
    Node* erf = soleProducer(e, OpKind::Erf, add);
    if (!erf) return false;
    Node* scaled = erf->input(0)->producer();
    if (!scaled || erf->input(0)->users().size() != 1 || escaping.count(erf->input(0)))
      return false;
    if (scaled->op() == OpKind::Div) {
      if (!near(constScalar(scaled->input(1)), std::sqrt(2.0))) return false;
      x = scaled->input(0);
      return true;
    }
    if (scaled->op() != OpKind::Mul) return false;
    x = otherThanConst(scaled, c);
    return x && near(c, std::sqrt(0.5));
  }

  /// Matches the chain ending at `outer` (the last Mul); returns x or null.
  Value* matchGelu(const Node* outer) {
    if (outer->op() != OpKind::Mul) return nullptr;
    double c;
    if (Value* inner = otherThanConst(outer, c); inner && near(c, 0.5)) {
      // (x * (erf(x / sqrt 2) + 1)) * 0.5
      Node* m = soleProducer(inner, OpKind::Mul, outer);
      if (!m) return nullptr;
      for (size_t i = 0; i < 2; ++i) {
        Value* x = nullptr;
        if (isErfPlusOne(m->input(1 - i), m, x) && x == m->input(i)) return x;
      }
      return nullptr;
    }
    // (x * 0.5) * (erf(x / sqrt 2) + 1)
    for (size_t i = 0; i < 2; ++i) {
      Node* half = soleProducer(outer->input(i), OpKind::Mul, outer);
      Value* x0 = half ? otherThanConst(half, c) : nullptr;
      Value* x = nullptr;
      if (x0 && near(c, 0.5) && isErfPlusOne(outer->input(1 - i), outer, x) && x == x0) return x;
    }
    return nullptr;
  }
};

} // namespace

Status runRecognizeGelu(Graph& g, PassContext& ctx) {
  std::set<const Value*> escaping(g.outputs().begin(), g.outputs().end());
  for (const Carry& c : g.carries()) escaping.insert(c.next);
  GeluMatcher m{escaping};
  for (Node* n : std::vector<Node*>(g.nodes())) {
    Value* x = m.matchGelu(n);
    if (!x || x->type() != n->output(0)->type()) continue;
    AttrMap a;
    a.setString("approximate", "none");
    g.setInsertionPoint(n);
    HGP_ASSIGN_OR_RETURN(Node * gelu, g.addNode(OpKind::Gelu, {x}, a, n->name()));
    g.setInsertionPoint(nullptr);
    g.replaceAllUsesWith(n->output(0), gelu->output(0));
    ++ctx.stats["recognize-gelu.gelus"];
  }
  return runCanonicalize(g, ctx); // the old chain is dead now
}

} // namespace hgp
