//===- LayoutNhwc.cpp - channels-last activations where the tensor cores want them ----------===//
//
// cuDNN's tensor-core convolutions read and write channels-last (NHWC) data. Given NCHW, cuDNN
// either transposes inside every call or picks slower kernels: on an H200 in bf16, hgpc's NCHW
// convolutions took 17.8 ms of ResNet-50's 27.6 ms step at batch 128, PyTorch's channels-last ones
// about 10. This pass stores the activations and gradients around the convolutions channels-last
// (the convention of runtime/plan/Layout.h) and converts only at the edges (docs/layout.md):
//
//   1. Eligible nodes: the ops with a channels-last form (acceptsLayout: the 2-D convolution
//      phases, BatchNorm, pooling) on rank-4 data; elementwise ops whose rank-4 operands all
//      have the result's shape (their other operands scalars), which work on either layout
//      unchanged; Concat and Split along the channels (axis 1 becomes 3); a ReduceSum over
//      (N, H, W) with keepdims=0, the gradient of a convolution's bias; Pad and PadBwd (an
//      average pool's explicit padding), their pads reordered.
//   2. Regions: eligible nodes joined by the rank-4 values one produces and the other reads. A
//      region goes channels-last when it holds a convolution with multiples of 8 channels on
//      both sides of its filter (what the tensor-core kernels take); the rest stays as it is, so
//      an island of elementwise ops between two NCHW-only ops costs no conversion, and LeNet-5
//      (1 -> 6 -> 16 channels, launch-bound) pays for no Transposes it cannot win back.
//   3. Rewrite: each chosen node is rebuilt with layout="nhwc" (or its axes remapped) on
//      channels-last operands. A rank-4 operand from outside the region gets one Transpose to
//      channels-last, shared by all its readers in the region (a convolution's weights become
//      [K, R, S, C]; the image, a Transpose after its cast); a rank-4 result read outside the
//      region, or leaving the graph, gets one Transpose back, which takes over the old value's
//      name and role (the weight gradients the optimizer reads, checkpoints and bindings are
//      unchanged).
//
// The rewrite changes where each element lives, not what is computed: every op computes the same
// values (BatchNorm's and the convolutions' sums may add in another order on the GPU). It runs
// after autodiff and the optimizer, before the fuse-elementwise and fuse-casts passes, on the
// train and eval graphs, when --layout (or --layout auto with 16-bit precision) asks for it.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"
#include "runtime/plan/Layout.h"

#include <map>
#include <set>

namespace hgp {

namespace {

bool isElementwise(OpKind op) {
  switch (op) {
  case OpKind::Relu: case OpKind::LeakyRelu: case OpKind::Clip: case OpKind::Sigmoid:
  case OpKind::Tanh: case OpKind::HardSigmoid: case OpKind::HardSwish: case OpKind::Neg:
  case OpKind::Scale: case OpKind::ReluBwd: case OpKind::LeakyReluBwd: case OpKind::ClipBwd:
  case OpKind::SigmoidBwd: case OpKind::TanhBwd: case OpKind::HardSigmoidBwd:
  case OpKind::HardSwishBwd: case OpKind::Add: case OpKind::Sub: case OpKind::Mul:
  case OpKind::Div: case OpKind::Sum:
    return true;
  default:
    return false;
  }
}

/// A 2-D convolution phase whose filter [K, C/group, R, S] has multiples of 8 channels on both
/// sides: the shapes cuDNN's channels-last tensor-core kernels take without padding.
bool isTensorCoreConvolution(const Node* n) {
  const Value* w = nullptr;
  if (n->op() == OpKind::Conv || n->op() == OpKind::ConvBwdData) w = n->input(1);
  if (n->op() == OpKind::ConvBwdFilter) w = n->output(0);
  return w && w->rank() == 4 && w->shape()[0] % 8 == 0 && w->shape()[1] % 8 == 0;
}

/// How a chosen node changes.
enum class Form { None, Attribute, Agnostic, ChannelAxis, BiasGradient, Padding };

Form formOf(const Node* n) {
  if (n->numInputs() == 0 || n->numOutputs() == 0) return Form::None;
  if (acceptsLayout(n->op())) return n->input(0)->rank() == 4 ? Form::Attribute : Form::None;
  if (isElementwise(n->op())) {
    const Shape& y = n->output(0)->shape();
    if (y.size() != 4) return Form::None;
    for (const Value* v : n->inputs())
      if (v->rank() != 0 && v->shape() != y) return Form::None;
    return Form::Agnostic;
  }
  if (n->op() == OpKind::Concat || n->op() == OpKind::Split) {
    for (const Value* v : n->inputs())
      if (v->rank() != 4) return Form::None;
    for (const Value* v : n->outputs())
      if (v->rank() != 4) return Form::None;
    int64_t axis = n->attrs().getInt("axis", 0);
    return axis == 1 || axis == -3 ? Form::ChannelAxis : Form::None;
  }
  if ((n->op() == OpKind::Pad || n->op() == OpKind::PadBwd) && n->input(0)->rank() == 4 &&
      n->attrs().getInts("pads").size() == 8)
    return Form::Padding;
  if (n->op() == OpKind::ReduceSum && n->input(0)->rank() == 4 &&
      n->attrs().getInt("keepdims", 1) == 0 &&
      n->attrs().getInts("axes") == std::vector<int64_t>{0, 2, 3})
    return Form::BiasGradient;
  return Form::None;
}

class LayoutPass {
public:
  LayoutPass(Graph& g, PassContext& ctx) : g_(g), ctx_(ctx) {}

  Status run() {
    chooseRegions();
    std::vector<Node*> order = g_.nodes();
    for (Node* n : order)
      if (chosen_.count(n)) HGP_TRY(rewrite(n));
    ctx_.stats["layout-nhwc.nodes"] += int64_t(chosen_.size());
    ctx_.stats["layout-nhwc.transposes"] += transposes_;
    return Status::ok();
  }

private:
  Node* find(Node* n) {
    while (parent_[n] != n) n = parent_[n] = parent_[parent_[n]];
    return n;
  }

  void chooseRegions() {
    std::vector<Node*> eligible;
    for (Node* n : g_.nodes())
      if (formOf(n) != Form::None) eligible.push_back(n), parent_[n] = n;
    for (Node* n : eligible)
      for (const Value* v : n->inputs())
        if (v->rank() == 4 && v->producer() && parent_.count(v->producer()))
          parent_[find(n)] = find(v->producer());
    std::set<Node*> withConv;
    for (Node* n : eligible)
      if (isTensorCoreConvolution(n)) withConv.insert(find(n));
    for (Node* n : eligible)
      if (withConv.count(find(n))) chosen_.insert(n);
  }

  /// A Transpose of `v` by `perm`, inserted before the insertion point.
  Expected<Value*> transpose(Value* v, std::vector<int64_t> perm, const std::string& name) {
    AttrMap a;
    a.setInts("perm", std::move(perm));
    HGP_ASSIGN_OR_RETURN(Node * t, g_.addNode(OpKind::Transpose, {v}, a, name));
    t->output(0)->setRole(v->role() == TensorRole::Gradient ? TensorRole::Gradient
                                                            : TensorRole::Activation);
    ++transposes_;
    return t->output(0);
  }

  /// The channels-last form of a rank-4 value from outside the regions, made once.
  Expected<Value*> toLast(Value* v) {
    auto it = last_.find(v);
    if (it != last_.end()) return it->second;
    HGP_ASSIGN_OR_RETURN(Value * t, transpose(v, {0, 2, 3, 1}, "layout/to-nhwc"));
    return last_[v] = t;
  }

  Status rewrite(Node* n) {
    Form form = formOf(n);
    std::vector<Value*> inputs;
    g_.setInsertionPoint(n);
    for (Value* v : n->inputs()) {
      if (v->rank() != 4 || channelsLast_.count(v)) {
        inputs.push_back(v);
        continue;
      }
      HGP_ASSIGN_OR_RETURN(Value * t, toLast(v));
      inputs.push_back(t);
    }
    AttrMap attrs = n->attrs();
    if (form == Form::Attribute) attrs.setString("layout", "nhwc");
    if (form == Form::ChannelAxis) attrs.setInt("axis", 3);
    if (form == Form::BiasGradient) attrs.setInts("axes", {0, 1, 2});
    if (form == Form::Padding) {
      std::vector<int64_t> p = attrs.getInts("pads");
      attrs.setInts("pads", {p[0], p[2], p[3], p[1], p[4], p[6], p[7], p[5]});
      if (attrs.has("x_shape")) attrs.setInts("x_shape", channelsLastShape(attrs.getInts("x_shape")));
    }
    HGP_ASSIGN_OR_RETURN(Node * m, g_.addNode(n->op(), inputs, attrs, n->name(),
                                              int(n->numOutputs())));
    std::vector<std::pair<Value*, Value*>> take; // old value -> the value that keeps its name
    for (size_t i = 0; i < n->numOutputs(); ++i) {
      Value *old = n->output(i), *r = m->output(i);
      r->setRole(old->role());
      if (r->rank() != 4) {
        take.push_back({old, r});
        continue;
      }
      channelsLast_.insert(r);
      // Readers inside the regions take the channels-last result; the rest, and graph
      // outputs and carries, a Transpose back.
      Value* back = nullptr;
      std::vector<Node*> readers(old->users().begin(), old->users().end());
      bool outside = escapesGraph(g_, old);
      for (Node* u : readers) outside |= !chosen_.count(u);
      if (outside) {
        HGP_ASSIGN_OR_RETURN(back, transpose(r, {0, 3, 1, 2}, "layout/to-nchw"));
      }
      for (Node* u : readers)
        for (size_t j = 0; j < u->numInputs(); ++j)
          if (u->input(j) == old) u->setInput(j, chosen_.count(u) ? r : back);
      take.push_back({old, back ? back : r});
    }
    g_.setInsertionPoint(nullptr);
    return takeOverValues(g_, ctx_, take, {n});
  }

  Graph& g_;
  PassContext& ctx_;
  std::map<Node*, Node*> parent_;
  std::set<Node*> chosen_;
  std::set<const Value*> channelsLast_;
  std::map<Value*, Value*> last_;
  int64_t transposes_ = 0;
};

} // namespace

Status runLayoutNhwc(Graph& g, PassContext& ctx) {
  return LayoutPass(g, ctx).run();
}

} // namespace hgp
