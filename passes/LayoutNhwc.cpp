//===- LayoutNhwc.cpp - channels-last activations where the tensor cores want them ----------===//
//
// cuDNN's tensor-core convolutions read and write channels-last (NHWC) data. Given NCHW, cuDNN
// either transposes inside every call or picks slower kernels: on an H200 in bf16, hgpc's NCHW
// convolutions took 17.8 ms of ResNet-50's 27.6 ms step at batch 128, PyTorch's channels-last ones
// about 10. This pass stores the activations and gradients around the convolutions channels-last
// (the convention of runtime/plan/Layout.h) and converts only at the edges (docs/layout.md):
//
//   1. Eligible nodes: the ops with a channels-last form (ChannelsLast in OpList.def: the 2-D convolution
//      phases, BatchNorm, pooling) on rank-4 data; elementwise ops whose rank-4 operands all
//      have the result's shape (their other operands scalars), which work on either layout
//      unchanged; Concat and Split along the channels (axis 1 becomes 3); a ReduceSum over
//      (N, H, W) with keepdims=0, the gradient of a convolution's bias; Pad and PadBwd (an
//      average pool's explicit padding), their pads reordered. Elementwise ops may broadcast
//      rank-4 operands against each other (squeeze-excitation's Mul by [N,C,1,1]), and
//      ReduceSum and ReduceMean with keepdims=1 (that Mul's gradient) remap their axes; Slice
//      and SliceBwd permute their bounds; ReduceSum and ReduceMean with keepdims=0 too where the
//      kept dims keep their order (C reduced, or H and W); a Reshape between [N, C, 1, 1] and
//      [N, C] (the Flatten after global pooling, and back) is the same bytes in either layout;
//      and the channel shuffle (Reshape to [N, g, C/g, H, W],
//      Transpose of the two channel dims, Reshape back: ShuffleNet's, forward and backward)
//      becomes a Reshape of [N, H, W, C] to [N, H, W, g, C/g] (a view), a Transpose of the last
//      two dims and a Reshape back, eligible only as the whole chain. An exporter's permute
//      between NCHW and [N, H, W, C] (ConvNeXt's, around each LayerNorm and Linear pair, and
//      their gradients) is the identity on the bytes channels-last: it becomes a view, and joins
//      a region on its NCHW side only.
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
//      unchanged). Each Transpose is named for what forced it ("layout/to-nchw for Reshape
//      /x/Reshape", "layout/to-nhwc after Gemm ..."), and `hgpc plan` counts them by that op.
//
// The rewrite changes where each element lives, not what is computed: every op computes the same
// values (BatchNorm's and the convolutions' sums may add in another order on the GPU). It runs
// after autodiff and the optimizer, before the fuse-elementwise and fuse-casts passes, on the
// train and eval graphs, when --layout (or --layout auto with 16-bit precision) asks for it.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"
#include "runtime/plan/Layout.h"

#include <algorithm>
#include <map>
#include <set>

namespace hgp {

namespace {

/// A 2-D convolution phase whose filter [K, C/group, R, S] has multiples of 8 channels on both
/// sides: the shapes cuDNN's channels-last tensor-core kernels take without padding.
bool isTensorCoreConvolution(const Node* n) {
  const Value* w = nullptr;
  if (n->op() == OpKind::Conv || n->op() == OpKind::ConvBwdData) w = n->input(1);
  if (n->op() == OpKind::ConvBwdFilter) w = n->output(0);
  return w && w->rank() == 4 && w->shape()[0] % 8 == 0 && w->shape()[1] % 8 == 0;
}

/// How a chosen node changes.
enum class Form {
  None, Attribute, Agnostic, ChannelAxis, BiasGradient, Padding, ReduceAxes, SliceAxes,
  ChannelSplit, ChannelShuffle, ChannelMerge, SpatialOnes, ToLastPermute, FromLastPermute
};

/// A Reshape of [N, C, H, W] into [N, a, b, H, W] (a * b = C): the first step of a channel
/// shuffle (ShuffleNet's view + transpose + view), channels-last a Reshape of [N, H, W, C] into
/// [N, H, W, a, b], which the memory plan makes a view.
bool splitsChannels(const Node* n) {
  if (n->op() != OpKind::Reshape || n->input(0)->rank() != 4 || n->output(0)->rank() != 5)
    return false;
  const Shape &x = n->input(0)->shape(), &y = n->output(0)->shape();
  return y[0] == x[0] && y[1] * y[2] == x[1] && y[3] == x[2] && y[4] == x[3];
}

/// The Transpose of the channel shuffle: [N, a, b, H, W] -> [N, b, a, H, W].
bool swapsChannelGroups(const Node* n) {
  return n->op() == OpKind::Transpose && n->input(0)->rank() == 5 &&
         n->attrs().getInts("perm") == std::vector<int64_t>{0, 2, 1, 3, 4};
}

/// A Reshape of [N, a, b, H, W] back into [N, a * b, H, W].
bool mergesChannels(const Node* n) {
  if (n->op() != OpKind::Reshape || n->input(0)->rank() != 5 || n->output(0)->rank() != 4)
    return false;
  const Shape &x = n->input(0)->shape(), &y = n->output(0)->shape();
  return y[0] == x[0] && y[1] == x[1] * x[2] && y[2] == x[3] && y[3] == x[4];
}

/// A Reshape between [N, C, 1, 1] and [N, C] (a Flatten after global pooling, or the gradient's
/// way back): the same bytes in either layout, channels-last [N, 1, 1, C].
bool spatialOnes(const Node* n) {
  const Shape &x = n->input(0)->shape(), &y = n->output(0)->shape();
  const Shape& four = x.size() == 4 ? x : y;
  const Shape& two = x.size() == 4 ? y : x;
  return four.size() == 4 && two.size() == 2 && four[2] == 1 && four[3] == 1 &&
         four[0] == two[0] && four[1] == two[1];
}

/// Whether every reader of every result of `n` passes `test`.
bool allReaders(const Node* n, bool (*test)(const Node*)) {
  for (const Value* v : n->outputs())
    for (const Node* u : v->users())
      if (!test(u)) return false;
  return true;
}

/// The three steps of a channel shuffle, each eligible only as a whole chain: a split whose
/// every reader is the swap, whose every reader merges back.
bool shuffleSplit(const Node* n) {
  return splitsChannels(n) && !n->output(0)->users().empty() &&
         allReaders(n, [](const Node* t) {
           return swapsChannelGroups(t) && !t->output(0)->users().empty() &&
                  allReaders(t, mergesChannels);
         });
}
bool shuffleSwap(const Node* n) {
  return swapsChannelGroups(n) && n->input(0)->producer() && shuffleSplit(n->input(0)->producer());
}
bool shuffleMerge(const Node* n) {
  return mergesChannels(n) && n->input(0)->producer() && shuffleSwap(n->input(0)->producer());
}

Form formOf(const Node* n) {
  if (n->numInputs() == 0 || n->numOutputs() == 0) return Form::None;
  if (opHas(n->op(), OpFlag::ChannelsLast)) return n->input(0)->rank() == 4 ? Form::Attribute : Form::None;
  if (opHas(n->op(), OpFlag::LayoutFree)) {
    // Rank-4 operands may broadcast against each other (a squeeze-excitation's Mul of [N,C,H,W]
    // by [N,C,1,1]): permuted alike, they broadcast alike. Lower ranks would align with other dims.
    // Lower-rank operands align with the last dims, as numpy broadcasts them (ConvNeXt's layer
    // scale, [C, 1, 1]): they are made rank 4 first, then permuted.
    if (n->output(0)->rank() != 4) return Form::None;
    for (const Value* v : n->inputs())
      if (v->rank() > 4) return Form::None;
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
  if (shuffleSplit(n)) return Form::ChannelSplit;
  if (shuffleSwap(n)) return Form::ChannelShuffle;
  if (shuffleMerge(n)) return Form::ChannelMerge;
  if (n->op() == OpKind::Slice && n->input(0)->rank() == 4) return Form::SliceAxes;
  if (n->op() == OpKind::SliceBwd && n->output(0)->rank() == 4) return Form::SliceAxes;
  if ((n->op() == OpKind::Pad || n->op() == OpKind::PadBwd) && n->input(0)->rank() == 4 &&
      n->attrs().getInts("pads").size() == 8)
    return Form::Padding;
  if (n->op() == OpKind::ReduceSum && n->input(0)->rank() == 4 &&
      n->attrs().getInt("keepdims", 1) == 0 &&
      n->attrs().getInts("axes") == std::vector<int64_t>{0, 2, 3})
    return Form::BiasGradient;
  if ((n->op() == OpKind::ReduceSum || n->op() == OpKind::ReduceMean) && n->input(0)->rank() == 4) {
    // With keepdims=0 the result is the same in both layouts when the dims it keeps come in
    // the same order: C reduced, or H and W both (a Mul's broadcast gradient, [N,C]).
    std::vector<int64_t> axes = n->attrs().getInts("axes");
    auto reduced = [&](int64_t d) { return std::find(axes.begin(), axes.end(), d) != axes.end(); };
    if (n->attrs().getInt("keepdims", 1) != 0 || reduced(1) || (reduced(2) && reduced(3)))
      return Form::ReduceAxes;
  }
  if (n->op() == OpKind::Reshape && spatialOnes(n)) return Form::SpatialOnes;
  if (n->op() == OpKind::Transpose && n->input(0)->rank() == 4) {
    std::vector<int64_t> perm = n->attrs().getInts("perm");
    if (perm == std::vector<int64_t>{0, 2, 3, 1}) return Form::ToLastPermute;
    if (perm == std::vector<int64_t>{0, 3, 1, 2}) return Form::FromLastPermute;
  }
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
    // Forms are decided on the graph as it is: the rewrite changes the shapes they look at.
    for (Node* n : g_.nodes())
      if (Form f = formOf(n); f != Form::None) eligible.push_back(n), parent_[n] = n, forms_[n] = f;
    // An exporter's permute joins the region on its NCHW side only: the other side is plain
    // [N, H, W, C] data, whatever the layout.
    for (Node* n : eligible) {
      if (forms_[n] == Form::FromLastPermute) continue;
      for (const Value* v : n->inputs())
        if ((v->rank() == 4 || v->rank() == 5) && v->producer() && parent_.count(v->producer()) &&
            forms_[v->producer()] != Form::ToLastPermute)
          parent_[find(n)] = find(v->producer());
    }
    std::set<Node*> withConv;
    for (Node* n : eligible)
      if (isTensorCoreConvolution(n)) withConv.insert(find(n));
    for (Node* n : eligible)
      if (withConv.count(find(n))) chosen_.insert(n);
  }

  /// A Transpose of `v` by `perm`, inserted before the insertion point; a Reshape (a view in
  /// the memory plan) when the permutation moves only dims of size 1, so that the bytes keep
  /// their order (a squeeze-excitation gate [N, C, 1, 1], a one-channel image). A parameter
  /// keeps its Transpose: fuse-casts gathers those of every filter into one CastGroup launch,
  /// where a Reshape of persistent data would be a copy of its own.
  Expected<Value*> transpose(Value* v, std::vector<int64_t> perm, const std::string& name) {
    const Shape& x = v->shape();
    std::vector<int64_t> kept; // the non-unit dims, in the order the result has them
    for (int64_t d : perm)
      if (x[size_t(d)] != 1) kept.push_back(d);
    if (v->role() != TensorRole::Param && std::is_sorted(kept.begin(), kept.end())) {
      Shape y;
      for (int64_t d : perm) y.push_back(x[size_t(d)]);
      HGP_ASSIGN_OR_RETURN(Node * r, reshape(v, y, name));
      return r->output(0);
    }
    AttrMap a;
    a.setInts("perm", std::move(perm));
    HGP_ASSIGN_OR_RETURN(Node * t, g_.addNode(OpKind::Transpose, {v}, a, name));
    t->output(0)->setRole(v->role() == TensorRole::Gradient ? TensorRole::Gradient
                                                            : TensorRole::Activation);
    ++transposes_;
    return t->output(0);
  }

  /// A Reshape of `v` to `shape`, inserted before the insertion point, with v's role.
  Expected<Node*> reshape(Value* v, const Shape& shape, const std::string& name) {
    AttrMap a;
    a.setInts("shape", shape);
    HGP_ASSIGN_OR_RETURN(Node * r, g_.addNode(OpKind::Reshape, {v}, a, name));
    r->output(0)->setRole(v->role() == TensorRole::Gradient ? TensorRole::Gradient
                                                            : TensorRole::Activation);
    return r;
  }

  /// The channels-last form of a rank-4 value from outside the regions, made once. Its name
  /// says what forced it: the op that produced the value in NCHW, or the graph value it is.
  Expected<Value*> toLast(Value* v) {
    auto it = last_.find(v);
    if (it != last_.end()) return it->second;
    std::string cause = v->producer() ? v->producer()->opName() + std::string(" ") + v->producer()->name()
                                      : std::string(roleName(v->role())) + " " + v->name();
    HGP_ASSIGN_OR_RETURN(Value * t, transpose(v, {0, 2, 3, 1}, "layout/to-nhwc after " + cause));
    return last_[v] = t;
  }

  /// An exporter's permute between NCHW and the channels-last order (ConvNeXt's, around its
  /// LayerNorms and Linear layers): in a channels-last region its result is the bytes it reads,
  /// so it becomes a Reshape to the same shape, which the memory plan makes a view. Into the
  /// channels-last order ([0, 2, 3, 1]) the view is a plain [N, H, W, C] value; out of it
  /// ([0, 3, 1, 2]) the view is the channels-last form of the NCHW result.
  Status rewritePermute(Node* n, Form form) {
    g_.setInsertionPoint(n);
    Value* in = n->input(0);
    if (form == Form::ToLastPermute && !channelsLast_.count(in)) {
      HGP_ASSIGN_OR_RETURN(in, toLast(in));
    }
    HGP_ASSIGN_OR_RETURN(Node * view, reshape(in, in->shape(), n->name()));
    Value *old = n->output(0), *r = view->output(0);
    r->setRole(old->role());
    std::vector<std::pair<Value*, Value*>> take = {{old, r}};
    if (form == Form::FromLastPermute) {
      take.clear();
      HGP_TRY(route(old, r, take));
    }
    g_.setInsertionPoint(nullptr);
    return takeOverValues(g_, ctx_, take, {n});
  }

  /// Gives `r`, the channels-last form of `old`, to old's readers in the regions, and a
  /// Transpose back to the rest (and to graph outputs and carries); records which value takes
  /// over old's name.
  Status route(Value* old, Value* r, std::vector<std::pair<Value*, Value*>>& take) {
    channelsLast_.insert(r);
    // The conversion's name says what forced it: the first NCHW-only reader, or the graph's
    // interface (an output, a carry).
    Value* back = nullptr;
    std::vector<Node*> readers(old->users().begin(), old->users().end());
    std::string cause;
    for (Node* u : readers)
      if (!chosen_.count(u) && cause.empty()) cause = u->opName() + std::string(" ") + u->name();
    if (cause.empty() && escapesGraph(g_, old)) cause = "output " + old->name();
    if (!cause.empty()) {
      HGP_ASSIGN_OR_RETURN(back, transpose(r, {0, 3, 1, 2}, "layout/to-nchw for " + cause));
    }
    for (Node* u : readers)
      for (size_t j = 0; j < u->numInputs(); ++j)
        if (u->input(j) == old) u->setInput(j, chosen_.count(u) ? r : back);
    take.push_back({old, back ? back : r});
    return Status::ok();
  }

  Status rewrite(Node* n) {
    Form form = forms_.at(n);
    if (form == Form::ToLastPermute || form == Form::FromLastPermute) return rewritePermute(n, form);
    std::vector<Value*> inputs;
    g_.setInsertionPoint(n);
    for (Value* v : n->inputs()) {
      if (form == Form::Agnostic && v->rank() > 0 && v->rank() < 4) { // broadcast from the right
        auto it = ranked_.find(v);
        if (it == ranked_.end()) {
          Shape four(4 - size_t(v->rank()), 1);
          four.insert(four.end(), v->shape().begin(), v->shape().end());
          HGP_ASSIGN_OR_RETURN(Node * r, reshape(v, four, "layout/rank-4 " + v->name()));
          it = ranked_.emplace(v, r->output(0)).first;
        }
        v = it->second;
      }
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
    if (form == Form::SliceAxes) // per-dim bounds, permuted as the dims are
      for (const char* name : {"starts", "ends", "steps", "x_shape"})
        if (attrs.has(name)) attrs.setInts(name, channelsLastShape(attrs.getInts(name)));
    if (form == Form::ChannelSplit || form == Form::ChannelMerge) {
      Shape y = n->output(0)->shape(); // [N, a, b, H, W] or [N, C, H, W]
      attrs.setInts("shape", y.size() == 5 ? Shape{y[0], y[3], y[4], y[1], y[2]} : channelsLastShape(y));
    }
    if (form == Form::ChannelShuffle) attrs.setInts("perm", {0, 1, 2, 4, 3});
    if (form == Form::SpatialOnes && n->output(0)->rank() == 4)
      attrs.setInts("shape", channelsLastShape(n->output(0)->shape()));
    if (form == Form::ReduceAxes) { // N, C, H, W sit at 0, 3, 1, 2 channels-last
      std::vector<int64_t> axes;
      for (int64_t a : attrs.getInts("axes")) axes.push_back(a == 0 ? 0 : a == 1 ? 3 : a - 1);
      std::sort(axes.begin(), axes.end());
      attrs.setInts("axes", axes);
    }
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
      HGP_TRY(route(old, r, take));
    }
    g_.setInsertionPoint(nullptr);
    return takeOverValues(g_, ctx_, take, {n});
  }

  Graph& g_;
  PassContext& ctx_;
  std::map<Node*, Node*> parent_;
  std::set<Node*> chosen_;
  std::map<Node*, Form> forms_;
  std::set<const Value*> channelsLast_;
  std::map<Value*, Value*> last_;
  std::map<Value*, Value*> ranked_; ///< lower-rank broadcast operands, made rank 4 once
  int64_t transposes_ = 0;
};

} // namespace

Status runLayoutNhwc(Graph& g, PassContext& ctx) {
  return LayoutPass(g, ctx).run();
}

} // namespace hgp
