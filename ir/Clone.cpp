#include "ir/Clone.h"

#include <map>

namespace hgp {

Expected<std::unique_ptr<Graph>> cloneGraph(const Graph& g) {
  auto out = std::make_unique<Graph>(g.name());
  std::map<const Value*, Value*> map;
  for (const Value* v : g.graphValues()) {
    HGP_ASSIGN_OR_RETURN(Value * c, out->addGraphValue(v->name(), v->role(), v->type(), v->sharedData()));
    map[v] = c;
  }
  for (const Node* n : g.nodes()) {
    std::vector<Value*> ins;
    for (const Value* in : n->inputs()) ins.push_back(map.at(in));
    std::vector<TensorType> types;
    std::vector<std::string> names;
    std::vector<TensorRole> roles;
    for (const Value* o : n->outputs()) {
      types.push_back(o->type());
      names.push_back(o->name());
      roles.push_back(o->role());
    }
    HGP_ASSIGN_OR_RETURN(Node * c, out->addNodeUnchecked(n->op(), ins, n->attrs(), n->name(), types,
                                                         names, roles));
    for (size_t i = 0; i < n->numOutputs(); ++i) map[n->output(i)] = c->output(i);
  }
  for (const Value* o : g.outputs()) out->addOutput(map.at(o));
  for (const Carry& c : g.carries()) out->addCarry(map.at(c.state), map.at(c.next));
  return out;
}

} // namespace hgp
