// The graph-level half of the importer: value definitions, unsupported ops, topological order,
// initializers, graph inputs, the node walk and graph outputs.
#include "frontends/onnx/OnnxModel.h"
#include "frontends/onnx/importers/Importers.h"

#include <queue>
#include <unordered_set>

namespace hgp {

namespace {

Status invalid(const std::string& msg) {
  return Status(ErrorCode::InvalidModel, msg);
}

bool isDefaultDomain(const std::string& d) {
  return d.empty() || d == "ai.onnx";
}

class GraphImporter {
public:
  GraphImporter(ImportContext& ctx, const onnx::GraphProto& g, const std::string& baseDir,
                OnnxModelInfo& info)
      : ctx_(ctx), g_(g), baseDir_(baseDir), info_(info) {}

  Status run() {
    if (g_.sparse_initializer_size())
      return invalid("sparse initializers are not supported (tensor '" +
                     g_.sparse_initializer(0).values().name() + "')");
    for (int i = 0; i < g_.node_size(); ++i) {
      const auto& node = g_.node(i);
      locs_.push_back(node.name().empty() ? node.op_type() + "_" + std::to_string(i) : node.name());
    }
    HGP_TRY(collectDefinitions());
    HGP_TRY(checkSupported());
    HGP_TRY(sortNodes());
    countUses();
    HGP_TRY(importInputs());
    HGP_TRY(importInitializers());
    for (int i : order_) HGP_TRY(importNode(i));
    HGP_TRY(importOutputs());
    return eraseUnused();
  }

private:
  std::string describe(int node) const {
    return "node '" + locs_[size_t(node)] + "' (" + g_.node(node).op_type() + ")";
  }

  Status define(const std::string& name, const std::string& by) {
    auto [it, fresh] = definer_.emplace(name, by);
    if (!fresh)
      return invalid("value '" + name + "' is defined twice: by " + it->second + " and by " + by);
    return Status::ok();
  }

  Status collectDefinitions() {
    for (const auto& t : g_.initializer()) {
      if (t.name().empty()) return invalid("an initializer has no name");
      if (!initNames_.insert(t.name()).second)
        return invalid("initializer '" + t.name() + "' is defined twice");
      HGP_TRY(define(t.name(), "initializer '" + t.name() + "'"));
    }
    std::unordered_set<std::string> inputs;
    for (const auto& vi : g_.input()) {
      if (vi.name().empty()) return invalid("a graph input has no name");
      if (!inputs.insert(vi.name()).second)
        return invalid("graph input '" + vi.name() + "' is listed twice");
      if (!initNames_.count(vi.name())) HGP_TRY(define(vi.name(), "graph input"));
    }
    for (int i = 0; i < g_.node_size(); ++i) {
      const auto& node = g_.node(i);
      std::unordered_set<std::string> attrs;
      for (const auto& a : node.attribute())
        if (!attrs.insert(a.name()).second)
          return invalid(describe(i) + ": attribute '" + a.name() + "' is given twice");
      for (const auto& o : node.output())
        if (!o.empty()) {
          HGP_TRY(define(o, describe(i)));
          producer_[o] = i;
        }
    }
    return Status::ok();
  }

  Status checkSupported() {
    std::string list;
    int count = 0;
    for (int i = 0; i < g_.node_size(); ++i) {
      const auto& node = g_.node(i);
      if (isDefaultDomain(node.domain()) && findOnnxOp(node.op_type())) continue;
      if (++count > 20) continue;
      std::string op = node.op_type().empty() ? "(no op_type)" : node.op_type();
      if (!isDefaultDomain(node.domain())) op = node.domain() + "." + op;
      list += (list.empty() ? "" : ", ") + op + " (node '" + locs_[size_t(i)] + "')";
    }
    if (count > 20) list += ", and " + std::to_string(count - 20) + " more";
    if (count) return invalid("unsupported ops: " + list);
    return Status::ok();
  }

  /// Kahn's algorithm, preferring the file's order, so a sorted graph keeps its order.
  Status sortNodes() {
    int n = g_.node_size();
    std::vector<int> pending(size_t(n), 0);
    std::vector<std::vector<int>> users{size_t(n)};
    for (int i = 0; i < n; ++i) {
      for (const auto& in : g_.node(i).input()) {
        if (in.empty()) continue;
        auto p = producer_.find(in);
        if (p != producer_.end()) {
          ++pending[size_t(i)];
          users[size_t(p->second)].push_back(i);
        } else if (!definer_.count(in)) {
          return invalid(describe(i) + ": input '" + in +
                         "' is not defined by any node, initializer or graph input");
        }
      }
    }
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
    for (int i = 0; i < n; ++i)
      if (!pending[size_t(i)]) ready.push(i);
    while (!ready.empty()) {
      int i = ready.top();
      ready.pop();
      order_.push_back(i);
      for (int u : users[size_t(i)])
        if (--pending[size_t(u)] == 0) ready.push(u);
    }
    if (int(order_.size()) == n) return Status::ok();
    // Walk back through unsorted producers until a node repeats: that node is on a cycle.
    int at = 0;
    while (!pending[size_t(at)]) ++at;
    std::vector<bool> seen(size_t(n), false);
    while (!seen[size_t(at)]) {
      seen[size_t(at)] = true;
      for (const auto& in : g_.node(at).input()) {
        auto p = producer_.find(in);
        if (!in.empty() && p != producer_.end() && pending[size_t(p->second)]) {
          at = p->second;
          break;
        }
      }
    }
    return invalid("the graph has a cycle through " + describe(at));
  }

  void countUses() {
    for (const auto& node : g_.node())
      for (const auto& in : node.input())
        if (!in.empty()) ++ctx_.uses[in];
    for (const auto& o : g_.output()) ++ctx_.uses[o.name()];
    for (const auto& node : g_.node())
      if (node.op_type() == "BatchNormalization" && isDefaultDomain(node.domain()))
        for (int k = 3; k < 5 && k < node.input_size(); ++k) stateNames_.insert(node.input(k));
  }

  Status importInitializers() {
    for (const auto& t : g_.initializer()) {
      std::string what = "initializer '" + t.name() + "'";
      HGP_ASSIGN_OR_RETURN(std::shared_ptr<TensorData> data, tensorFromProto(t, baseDir_, what));
      data->onnxName = t.name();
      ctx_.initializers[t.name()] = data;
      // Non-float initializers are constants (shape operands, mostly); so are empty tensors,
      // which can only serve as compile-time operands.
      if (!isFloatDType(data->type.dtype) || data->type.numElements() == 0) {
        ctx_.known[t.name()] = data;
        continue;
      }
      TensorRole role = stateNames_.count(t.name()) ? TensorRole::State : TensorRole::Param;
      HGP_ASSIGN_OR_RETURN(Value * v, ctx_.graph.addGraphValue(t.name(), role, data->type, data));
      ctx_.values[t.name()] = v;
    }
    return Status::ok();
  }

  Expected<TensorType> inputType(const onnx::ValueInfoProto& vi) {
    std::string what = "graph input '" + vi.name() + "'";
    if (!vi.has_type() || !vi.type().has_tensor_type()) return invalid(what + " is not a tensor");
    const auto& tt = vi.type().tensor_type();
    HGP_ASSIGN_OR_RETURN(DType dt, dtypeFromOnnx(tt.elem_type(), what));
    if (!tt.has_shape()) return invalid(what + " has no shape");
    std::vector<int64_t> dims;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      if (d.has_dim_value()) {
        dims.push_back(d.dim_value());
        if (i == 0 && ctx_.options.batch > 0) dims[0] = ctx_.options.batch;
        continue;
      }
      std::string sym = d.has_dim_param() ? " ('" + d.dim_param() + "')" : "";
      if (i != 0)
        return invalid(what + " dim " + std::to_string(i) + " is symbolic" + sym +
                       "; only the batch dim (dim 0) may be symbolic");
      if (ctx_.options.batch <= 0)
        return invalid(what + " has a symbolic batch dim" + sym + "; pass --batch");
      dims.push_back(ctx_.options.batch);
    }
    HGP_ASSIGN_OR_RETURN(Shape shape, checkedShape(dims, what, /*allowZero=*/false));
    return TensorType{dt, shape};
  }

  Status importInputs() {
    std::unordered_set<std::string> inputNames;
    for (const auto& vi : g_.input()) inputNames.insert(vi.name());
    for (const auto& [name, data] : ctx_.options.constantInputs) {
      if (!inputNames.count(name) || initNames_.count(name))
        return invalid("constant input '" + name + "' is not a graph input of the model");
      if (!data) return invalid("constant input '" + name + "' has no data");
      HGP_TRY(checkedShape(data->type.shape, "constant input '" + name + "'", true).status());
      if (int64_t(data->bytes.size()) != data->type.bytes())
        return invalid("constant input '" + name + "' has " + std::to_string(data->bytes.size()) +
                       " bytes, its type needs " + std::to_string(data->type.bytes()));
    }
    bool first = true;
    for (const auto& vi : g_.input()) {
      if (initNames_.count(vi.name())) continue;
      if (auto c = ctx_.options.constantInputs.find(vi.name());
          c != ctx_.options.constantInputs.end()) {
        ctx_.known[vi.name()] = c->second;
        continue;
      }
      HGP_ASSIGN_OR_RETURN(TensorType t, inputType(vi));
      if (first && vi.type().tensor_type().shape().dim_size() > 0 &&
          vi.type().tensor_type().shape().dim(0).has_dim_value())
        ctx_.exportBatch = vi.type().tensor_type().shape().dim(0).dim_value();
      HGP_ASSIGN_OR_RETURN(Value * v, ctx_.graph.addGraphValue(vi.name(), TensorRole::Input, t));
      ctx_.values[vi.name()] = v;
      if (first && t.rank() > 0) info_.batch = t.shape[0];
      first = false;
    }
    return Status::ok();
  }

  Status importNode(int i) {
    const auto& node = g_.node(i);
    const OnnxOpEntry* e = findOnnxOp(node.op_type());
    auto range = [](int lo, int hi) {
      return std::to_string(lo) + (hi == lo ? ""
                                   : hi < 0 ? " or more"
                                            : " to " + std::to_string(hi));
    };
    int ins = node.input_size(), outs = node.output_size();
    if (ins < e->minInputs || (e->maxInputs >= 0 && ins > e->maxInputs))
      return invalid(describe(i) + ": has " + std::to_string(ins) + " inputs, " + e->opType +
                     " takes " + range(e->minInputs, e->maxInputs));
    if (outs < e->minOutputs || (e->maxOutputs >= 0 && outs > e->maxOutputs))
      return invalid(describe(i) + ": has " + std::to_string(outs) + " outputs, " + e->opType +
                     " gives " + range(e->minOutputs, e->maxOutputs));
    OnnxNode n(ctx_, node, locs_[size_t(i)]);
    return e->import(n);
  }

  Status importOutputs() {
    if (g_.output_size() == 0)
      return invalid("the graph has no outputs; hgpc trains and evaluates the first one");
    for (const auto& vi : g_.output()) {
      const std::string& name = vi.name();
      Value* v = nullptr;
      if (auto it = ctx_.values.find(name); it != ctx_.values.end()) {
        v = it->second;
      } else if (auto k = ctx_.known.find(name); k != ctx_.known.end()) {
        for (int64_t d : k->second->type.shape)
          if (d < 1) return invalid("graph output '" + name + "' is an empty constant");
        HGP_ASSIGN_OR_RETURN(v, ctx_.graph.addGraphValue(ctx_.graph.uniqueName(name),
                                                         TensorRole::Const, k->second->type,
                                                         k->second));
        ctx_.values[name] = v;
      } else {
        return invalid("graph output '" + name + "' is not computed by the graph");
      }
      if (vi.has_type() && vi.type().has_tensor_type() && vi.type().tensor_type().elem_type()) {
        auto dt = dtypeFromOnnx(vi.type().tensor_type().elem_type(), "graph output '" + name + "'");
        if (!dt) return dt.takeStatus();
        if (*dt == DType::Bool && isFloatDType(v->dtype()) && ctx_.boolMasks.count(name)) {
          // A 0/1 mask (the IR's bool) leaves the graph as ONNX's bool: a Cast, which takes the
          // output's name.
          if (ctx_.graph.findValue(name) == v)
            HGP_TRY(ctx_.graph.renameValue(v, ctx_.graph.uniqueName(name + ".mask")));
          AttrMap a;
          a.setString("to", dtypeName(DType::Bool));
          HGP_ASSIGN_OR_RETURN(Node * cast, ctx_.graph.addNode(OpKind::Cast, {v}, a,
                                                               ctx_.graph.uniqueName(name + ".cast")));
          v = cast->output(0);
        }
        if (*dt != v->dtype())
          return invalid("graph output '" + name + "' is declared " + dtypeName(*dt) +
                         " but computes " + dtypeName(v->dtype()));
      }
      if (!v->isGraphLevel() && !ctx_.graph.findValue(name))
        HGP_TRY(ctx_.graph.renameValue(v, name));
      ctx_.graph.addOutput(v);
    }
    return Status::ok();
  }

  /// Drops parameters and constants nothing reads (initializers used only as compile-time
  /// operands, or not at all).
  Status eraseUnused() {
    std::unordered_set<Value*> outputs(ctx_.graph.outputs().begin(), ctx_.graph.outputs().end());
    std::vector<Value*> values = ctx_.graph.graphValues();
    for (Value* v : values)
      if (v->role() != TensorRole::Input && v->users().empty() && !outputs.count(v))
        HGP_TRY(ctx_.graph.eraseGraphValue(v));
    return Status::ok();
  }

  ImportContext& ctx_;
  const onnx::GraphProto& g_;
  const std::string& baseDir_;
  OnnxModelInfo& info_;
  std::vector<std::string> locs_;
  std::unordered_map<std::string, std::string> definer_;
  std::unordered_map<std::string, int> producer_;
  std::unordered_set<std::string> initNames_, stateNames_;
  std::vector<int> order_;
};

} // namespace

Status importGraph(ImportContext& ctx, const onnx::GraphProto& g, const std::string& baseDir,
                   OnnxModelInfo& info) {
  return GraphImporter(ctx, g, baseDir, info).run();
}

} // namespace hgp
