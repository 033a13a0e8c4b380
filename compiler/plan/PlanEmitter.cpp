#include "compiler/plan/PlanEmitter.h"

#include "compiler/analysis/MemoryPlan.h"
#include "compiler/analysis/Views.h"

#include <algorithm>
#include <set>

namespace hgp {

namespace {

Status internal(const std::string& m) { return Status(ErrorCode::Internal, "plan emission: " + m); }

class Emitter {
public:
  explicit Emitter(const EmitOptions& opts) : opts_(opts) {}

  Expected<EmittedPlan> run(const std::vector<ProgramSource>& programs) {
    out_.plan.modelName = opts_.modelName;
    out_.plan.meta = opts_.meta;
    for (const auto& src : programs) HGP_TRY(addPersistent(*src.graph));
    out_.plan.persistentBytes = persistentEnd_;
    for (const auto& src : programs) HGP_TRY(addProgram(src));
    HGP_TRY(out_.plan.validate());
    return std::move(out_);
  }

private:
  Status addPersistent(const Graph& g) {
    for (const Value* v : g.graphValues()) {
      int existing = out_.plan.findTensor(v->name());
      if (existing >= 0) {
        const PlanTensor& t = out_.plan.tensors[size_t(existing)];
        if (t.type != v->type() || t.role != v->role())
          return internal("'" + v->name() + "' differs between programs");
        continue;
      }
      PlanTensor t;
      t.name = v->name();
      t.role = v->role();
      t.type = v->type();
      t.storage = StorageClass::Persistent;
      t.offset = persistentEnd_;
      persistentEnd_ = alignUp(persistentEnd_ + t.bytes());
      if (const TensorData* d = v->data()) {
        auto it = opts_.fileOffsets.find(d->onnxName);
        if (!d->onnxName.empty() && it != opts_.fileOffsets.end()) {
          t.init = InitKind::File;
          t.dataOffset = it->second;
        } else if (d->bytes.empty()) {
          t.init = InitKind::Zero;
        } else {
          if (int64_t(d->bytes.size()) != t.bytes())
            return internal("data of '" + v->name() + "' has the wrong size");
          t.init = InitKind::Data;
          t.dataOffset = int64_t(out_.data.size());
          out_.data.insert(out_.data.end(), d->bytes.begin(), d->bytes.end());
          out_.data.resize(size_t(alignUp(int64_t(out_.data.size()))));
        }
      } else if (v->role() == TensorRole::State) {
        t.init = InitKind::Zero;
      }
      out_.plan.tensors.push_back(std::move(t));
    }
    return Status::ok();
  }

  Status addProgram(const ProgramSource& src) {
    const Graph& g = *src.graph;
    // Carry results write into their state's storage.
    std::map<const Value*, int> carryTarget;
    std::vector<const Value*> skip;
    for (const Carry& c : g.carries()) {
      carryTarget[c.next] = out_.plan.findTensor(c.state->name());
      skip.push_back(c.next);
    }
    ViewPlan views;
    if (opts_.views)
      views = findViews(g, std::set<const Value*>(skip.begin(), skip.end()), opts_.stridedViews);
    MemoryPlan mem = planMemory(g, skip, opts_.reuseMemory, &views);
    out_.plan.transientBytes = std::max(out_.plan.transientBytes, mem.arenaBytes);

    std::map<const Value*, int> index;
    for (const Value* v : g.graphValues()) index[v] = out_.plan.findTensor(v->name());
    std::map<const Node*, int> position;
    for (size_t i = 0; i < g.nodes().size(); ++i) position[g.nodes()[i]] = int(i);

    PlanProgram prog;
    prog.name = src.name;
    for (const Node* n : g.nodes()) {
      PlanStep step;
      step.op = n->op();
      step.attrs = n->attrs();
      step.loc = n->name();
      for (const Value* in : n->inputs()) step.inputs.push_back(index.at(in));
      for (size_t o = 0; o < n->numOutputs(); ++o) {
        const Value* v = n->output(o);
        auto ct = carryTarget.find(v);
        if (ct != carryTarget.end()) {
          HGP_TRY(checkInPlace(n, int(o), ct->second, index, position));
          index[v] = ct->second;
          step.outputs.push_back(ct->second);
          continue;
        }
        PlanTensor t;
        t.name = v->name();
        if (out_.plan.findTensor(t.name) >= 0) t.name = src.name + "/" + t.name;
        if (out_.plan.findTensor(t.name) >= 0)
          return internal("value name '" + t.name + "' is used twice");
        t.role = v->role();
        t.type = v->type();
        t.storage = StorageClass::Transient;
        t.offset = mem.offsets.at(v);
        index[v] = int(out_.plan.tensors.size());
        out_.plan.tensors.push_back(std::move(t));
        step.outputs.push_back(index[v]);
      }
      auto copy = views.copies.find(n);
      if (copy != views.copies.end()) step.attrs.setString("copy", copy->second);
      if (!views.elided.count(n)) prog.steps.push_back(std::move(step));
    }
    for (const auto& [v, view] : views.views) {
      PlanTensor& t = out_.plan.tensors[size_t(index.at(v))];
      t.alias = view.kind;
      t.aliasOf = index.at(view.parent);
      t.row = view.row;
      t.pitch = view.pitch;
    }
    for (const auto& [bindName, valueName] : src.bindings) {
      const Value* v = g.findValue(valueName);
      if (!v || !index.count(v))
        return internal("binding '" + bindName + "' names unknown value '" + valueName + "'");
      out_.plan.bindings[bindName] = index.at(v);
    }
    out_.plan.programs.push_back(std::move(prog));
    return Status::ok();
  }

  /// A carry result must come from an op that overwrites the state in place, after every other
  /// reader of the state.
  Status checkInPlace(const Node* n, int output, int stateIndex, const std::map<const Value*, int>& index,
                      const std::map<const Node*, int>& position) {
    int in = opTraits(n->op()).inPlaceInput(output);
    if (in < 0 || in >= int(n->numInputs()) || index.at(n->input(size_t(in))) != stateIndex)
      return internal(n->describe() + " produces a carried value but does not update '" +
                      out_.plan.tensors[size_t(stateIndex)].name + "' in place");
    const Value* state = n->input(size_t(in));
    for (const Node* u : state->users())
      if (u != n && position.at(u) > position.at(n))
        return internal(u->describe() + " reads '" + state->name() + "' after " + n->describe() +
                        " overwrote it");
    return Status::ok();
  }

  const EmitOptions& opts_;
  EmittedPlan out_;
  int64_t persistentEnd_ = 0;
};

} // namespace

Expected<EmittedPlan> emitPlan(const std::vector<ProgramSource>& programs,
                               const EmitOptions& options) {
  return Emitter(options).run(programs);
}

} // namespace hgp
