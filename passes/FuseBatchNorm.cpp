//===- FuseBatchNorm.cpp - BatchNorm + Relu (+ residual Add) into one op, forward and backward -===//
//
// Every BatchNorm of a CNN is followed by a Relu, in ResNets often by Add(BN, shortcut) and then
// a Relu; the backward pass mirrors it: ReluBwd, then BatchNormBwd. Each of those elementwise
// ops streams whole activations through memory for a few instructions per element, so the pass
// folds them into the BatchNorm, which streams the same tensors anyway (docs/fusion.md):
//
//   forward   Y = BatchNormTrain(X); Z = Relu(Y)
//               => Z = BatchNormTrain{activation="relu"}(X)
//             Y = BatchNormTrain(X); A = Add(Y, S); Z = Relu(A)
//               => Z = BatchNormTrain{activation="relu"}(X, scale, bias, S)
//             Y = BatchNorm(X, ...); Z = Relu(Y)  (inference mode: eval, frozen BN)
//               => Z = BatchNorm{activation="relu"}(X, ...)
//   backward  G = ReluBwd(dZ, Z); (dX, ...) = BatchNormBwd(G, X, scale, mean, var)
//               => (dX, ...) = BatchNormBwd{activation="relu"}(dZ, X, scale, mean, var, Z)
//             and when G has other readers (a residual block's shortcut gradient):
//               => (dX, ..., G) = BatchNormBwd{activation="relu"}(dZ, X, scale, mean, var, Z)
//
// Silu and HardSwish (EfficientNet, MobileNet-v3) fuse too, forward and backward together:
//
//   forward   Y = BatchNormTrain(X); Z = Silu(Y)  =>  Z = BatchNormTrain{activation="silu"}(X)
//   backward  G = SiluBwd(dZ, Y); (dX, ...) = BatchNormBwd(G, X, scale, mean, var)
//               => (dX, ..., G) = BatchNormBwd{activation="silu"}(dZ, X, scale, mean, var, bias)
//
// Their gradient reads their input Y, which the fused forward no longer stores, so the fused
// backward recomputes Y from X, the saved statistics and the BatchNorm's bias (once, in its sums
// pass, which writes the activation's gradient G for its dX pass), and both halves fuse or
// neither does: Y's readers must be exactly the activation and its gradient, G's only the
// BatchNorm's own gradient. Per element: unfused BN 2 + Silu 2 + SiluBwd 3 + BatchNormBwd 5 = 12
// units of memory traffic, fused 2 + 6 = 8. The recomputed Y is
// rounded to Y's dtype as the stored one was; its coefficients come from the saved f32 mean and
// variance where the forward's came from the double statistics, so it can differ from the stored
// Y in the last place of float32 (in bf16 it rarely survives the rounding).
//
// The gradient Sum a BatchNormBwd reads can be folded into it as well: fuse-gradient-sums.
//
// Legality. The forward intermediates (Y, A) must have no other reader and must not be a graph
// output or carried: they disappear. The fused op takes the BatchNorm's place in the order, so
// every reader of the statistics and of Z still comes after it; the residual S must therefore
// be defined before the BatchNorm. In the backward the fused op takes the ReluBwd's place (its
// operands are all defined by then), so it also precedes every other reader of G. When both operands of the
// Add are BatchNorm results (a ResNet block with a downsampling shortcut), the later BatchNorm
// takes the earlier one's result as its residual; Add is commutative, so the values are the
// same. The residual must have Y's exact type (no broadcast). Relu's gradient is defined on its
// output (ReluBwd's mask is Z > 0), and the fused forward still produces Z, so the backward
// needs nothing new.
//
// The residual case in the backward. At a block end G = ReluBwd(dZ, Z) is read by the
// BatchNormBwd and by the shortcut's gradient (a Sum, or the downsampling BatchNormBwd), so G is
// needed in memory. The first BatchNormBwd that reads G as its dY absorbs the ReluBwd and writes
// G as a fourth result in its sums pass (which reads dZ, Z and X anyway); its dX pass then reads
// G and X. Per element, in units of one activation: unfused ReluBwd 3 + BatchNormBwd 5 = 8;
// fused 4 (dZ, Z, X read, G written) + 3 (G, X read, dX written) = 7, and one launch less.
// Without other readers the fused op writes no G and its dX pass reads dZ, Z and X: also 7.
//
// Rounding. The fused ops compute the unfused chain's values exactly (bit-identical on the CPU
// in f32, bf16 and f16): relu is exact, so relu(round(v)) == round(relu(v)); with a residual the
// BatchNorm result is rounded to Y's dtype before the add, as storing Y rounded it; the Relu
// mask on the gradient is exact. On the GPU the same holds up to the BatchNorm kernels' own
// tolerance against the CPU.
//
// Runs after autodiff (the fused ops have no gradient rules); `hgpc compile/plan --no-fuse`
// leaves it (and every other fuse-* pass) out of the pipelines.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"

#include <algorithm>
#include <unordered_map>

namespace hgp {

namespace {

bool isUnfused(const Node* n) {
  return n->attrs().getString("activation", "none") == "none";
}

class Fuser {
public:
  Fuser(Graph& g, PassContext& ctx) : g_(g), ctx_(ctx) {}

  Status run() {
    for (Node* n : std::vector<Node*>(g_.nodes())) {
      if (!alive(n)) continue;
      if ((n->op() == OpKind::BatchNormTrain && n->numInputs() == 3 && isUnfused(n)) ||
          (n->op() == OpKind::BatchNorm && isUnfused(n))) {
        bool done = false;
        HGP_TRY(fuseSmooth(n, done));
        if (!done) HGP_TRY(fuseForward(n));
      }
      else if (n->op() == OpKind::ReluBwd)
        HGP_TRY(fuseBackward(n));
    }
    return Status::ok();
  }

private:
  bool alive(const Node* n) const {
    return std::find(g_.nodes().begin(), g_.nodes().end(), n) != g_.nodes().end();
  }

  size_t position(const Node* n) const {
    return size_t(std::find(g_.nodes().begin(), g_.nodes().end(), n) - g_.nodes().begin());
  }

  /// Whether `v` is available before node `n`: graph-level, or computed by an earlier node.
  bool definedBefore(const Value* v, const Node* n) const {
    return v->isGraphLevel() || position(v->producer()) < position(n);
  }

  /// The activations whose gradient reads their input, by the name the fused op carries.
  static const char* smoothName(OpKind op) {
    return op == OpKind::Silu ? "silu" : op == OpKind::HardSwish ? "hardswish" : nullptr;
  }

  /// BatchNorm -> Silu or HardSwish, and in the backward the activation's gradient -> the
  /// BatchNorm's gradient, fused together (the fused forward no longer stores y, which the
  /// activation's gradient read): Z = BatchNorm{act}(X, ...) and BatchNormBwd{act}(dZ, X, scale,
  /// mean, var, bias), which recomputes y from X. Without a backward (an inference graph, a
  /// frozen branch), the forward alone. Sets `done` when it fused.
  Status fuseSmooth(Node* bn, bool& done) {
    Value* y = bn->output(0);
    if (escapesGraph(g_, y)) return Status::ok();
    Node *act = nullptr, *actBwd = nullptr;
    for (Node* u : y->users()) {
      if (!act && smoothName(u->op()) && u->input(0) == y) act = u;
      else if (!actBwd && u->numInputs() == 2 && u->input(1) == y && u->input(0) != y) actBwd = u;
      else return Status::ok();
    }
    if (!act || act->output(0)->type() != y->type()) return Status::ok();
    OpKind bwdOp = act->op() == OpKind::Silu ? OpKind::SiluBwd : OpKind::HardSwishBwd;
    if (actBwd) {
      Value* g = actBwd->output(0);
      Node* bnBwd = soleReader(g_, g);
      Value* mean = bn->op() == OpKind::BatchNormTrain ? bn->output(1) : bn->input(3);
      Value* var = bn->op() == OpKind::BatchNormTrain ? bn->output(2) : bn->input(4);
      if (actBwd->op() != bwdOp || escapesGraph(g_, g) || !bnBwd || !readsAsDy(bnBwd, g) ||
          bnBwd->input(1) != bn->input(0) || bnBwd->input(2) != bn->input(1) ||
          bnBwd->input(3) != mean || bnBwd->input(4) != var ||
          actBwd->input(0)->type() != g->type())
        return Status::ok();
      std::vector<Value*> inputs = bnBwd->inputs();
      inputs[0] = actBwd->input(0);
      inputs.push_back(bn->input(2)); // the bias, to recompute y
      AttrMap attrs = bnBwd->attrs();
      attrs.setString("activation", smoothName(act->op()));
      g_.setInsertionPoint(actBwd);
      // Four results: G, the activation's gradient, is written by the sums pass and read by
      // the dX pass, so the recompute runs once (a transient the memory plan places).
      auto fused = g_.addNode(OpKind::BatchNormBwd, inputs, attrs, bnBwd->name(), 4);
      g_.setInsertionPoint(nullptr);
      if (!fused) return fused.status();
      std::vector<std::pair<Value*, Value*>> take;
      for (size_t i = 0; i < bnBwd->numOutputs(); ++i)
        take.push_back({bnBwd->output(i), (*fused)->output(i)});
      HGP_TRY(takeOverValues(g_, ctx_, take, {bnBwd}));
      HGP_TRY(g_.eraseNode(actBwd));
      ++ctx_.stats[std::string("fuse-batch-norm.bwd-") + smoothName(act->op())];
    }
    AttrMap attrs = bn->attrs();
    attrs.setString("activation", smoothName(act->op()));
    g_.setInsertionPoint(bn);
    auto fused = g_.addNode(bn->op(), bn->inputs(), attrs, bn->name());
    g_.setInsertionPoint(nullptr);
    if (!fused) return fused.status();
    std::vector<std::pair<Value*, Value*>> take = {{act->output(0), (*fused)->output(0)}};
    for (size_t i = 1; i < bn->numOutputs(); ++i) take.push_back({bn->output(i), (*fused)->output(i)});
    HGP_TRY(takeOverValues(g_, ctx_, take, {act, bn}));
    ++ctx_.stats[std::string("fuse-batch-norm.") + smoothName(act->op())];
    done = true;
    return Status::ok();
  }

  Status fuseForward(Node* bn) {
    Value* y = bn->output(0);
    Node* user = soleReader(g_, y);
    if (!user) return Status::ok();
    Node* relu = nullptr;
    Value* residual = nullptr;
    if (user->op() == OpKind::Relu) {
      relu = user;
    } else if (user->op() == OpKind::Add && bn->op() == OpKind::BatchNormTrain) {
      Value* s = user->input(0) == y ? user->input(1) : user->input(0);
      if (s == y || s->type() != y->type() || user->output(0)->type() != y->type() ||
          !definedBefore(s, bn))
        return Status::ok();
      Node* next = soleReader(g_, user->output(0));
      if (!next || next->op() != OpKind::Relu) return Status::ok();
      relu = next;
      residual = s;
    }
    if (!relu || relu->output(0)->type() != y->type()) return Status::ok();

    std::vector<Value*> inputs = bn->inputs();
    if (residual) inputs.push_back(residual);
    AttrMap attrs = bn->attrs();
    attrs.setString("activation", "relu");
    g_.setInsertionPoint(bn);
    auto fused = g_.addNode(bn->op(), inputs, attrs, bn->name());
    g_.setInsertionPoint(nullptr);
    if (!fused) return fused.status();
    std::vector<Node*> dead = {relu};
    if (residual) dead.push_back(user);
    dead.push_back(bn);
    // The fused results take over the Relu's output and the BatchNorm's statistics, names too.
    std::vector<std::pair<Value*, Value*>> take = {{relu->output(0), (*fused)->output(0)}};
    for (size_t i = 1; i < bn->numOutputs(); ++i) take.push_back({bn->output(i), (*fused)->output(i)});
    HGP_TRY(takeOverValues(g_, ctx_, take, dead));
    ++ctx_.stats[residual ? "fuse-batch-norm.add-relu" : "fuse-batch-norm.relu"];
    return Status::ok();
  }

  /// Whether `n` is a plain BatchNormBwd that reads `g` as its dY and nowhere else.
  static bool readsAsDy(const Node* n, const Value* g) {
    if (n->op() != OpKind::BatchNormBwd || n->numInputs() != 5 || !isUnfused(n)) return false;
    if (n->input(0) != g) return false;
    for (size_t i = 1; i < n->numInputs(); ++i)
      if (n->input(i) == g) return false;
    return true;
  }

  Status fuseBackward(Node* reluBwd) {
    Value* g = reluBwd->output(0);
    if (g->users().empty() || escapesGraph(g_, g)) return Status::ok();
    // The first BatchNormBwd (in program order) that reads G as its dY absorbs the ReluBwd.
    Node* bwd = nullptr;
    for (const Node* n : g_.nodes())
      if (std::find(g->users().begin(), g->users().end(), n) != g->users().end() &&
          readsAsDy(n, g)) {
        bwd = const_cast<Node*>(n);
        break;
      }
    if (!bwd) return Status::ok();
    bool shared = g->users().size() > 1; // others read G: the fused op writes it
    Value *dz = reluBwd->input(0), *z = reluBwd->input(1);
    if (z->type() != bwd->input(1)->type() || dz->type() != g->type()) return Status::ok();
    std::vector<Value*> inputs = bwd->inputs();
    inputs[0] = dz;
    inputs.push_back(z);
    AttrMap attrs = bwd->attrs();
    attrs.setString("activation", "relu");
    g_.setInsertionPoint(reluBwd);
    auto fused = g_.addNode(OpKind::BatchNormBwd, inputs, attrs, bwd->name(), shared ? 4 : 3);
    g_.setInsertionPoint(nullptr);
    if (!fused) return fused.status();
    std::vector<std::pair<Value*, Value*>> take;
    for (size_t i = 0; i < bwd->numOutputs(); ++i) take.push_back({bwd->output(i), (*fused)->output(i)});
    // The BatchNormBwd goes first, so that G's remaining readers are the others.
    HGP_TRY(takeOverValues(g_, ctx_, take, {bwd}));
    if (shared) HGP_TRY(takeOverValues(g_, ctx_, {{g, (*fused)->output(3)}}, {reluBwd}));
    else HGP_TRY(g_.eraseNode(reluBwd));
    ++ctx_.stats[shared ? "fuse-batch-norm.bwd-relu-shared" : "fuse-batch-norm.bwd-relu"];
    return Status::ok();
  }

  Graph& g_;
  PassContext& ctx_;
};

} // namespace

Status runFuseBatchNorm(Graph& g, PassContext& ctx) {
  return Fuser(g, ctx).run();
}

} // namespace hgp
