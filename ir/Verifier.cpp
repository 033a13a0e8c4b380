#include "ir/OpInfo.h"
#include "ir/Printer.h"

#include <set>

namespace hgp {

Status verifyGraph(const Graph& g) {
  auto fail = [](const std::string& m) { return Status(ErrorCode::InvalidModel, m); };
  std::set<const Value*> defined;
  std::set<std::string> names;
  for (const Value* v : g.graphValues()) {
    if (!names.insert(v->name()).second) return fail("value '" + v->name() + "' defined twice");
    if (!isPersistentRole(v->role()))
      return fail("graph value '" + v->name() + "' has role " + roleName(v->role()));
    for (int64_t d : v->shape())
      if (d <= 0) return fail("value '" + v->name() + "' has a non-positive dim");
    defined.insert(v);
  }
  for (const Node* n : g.nodes()) {
    std::vector<TensorType> ins;
    for (const Value* in : n->inputs()) {
      if (!defined.count(in))
        return fail(n->describe() + " reads '" + in->name() + "' before it is defined");
      ins.push_back(in->type());
    }
    std::vector<TensorType> outs;
    Status st = inferTypes(n->op(), n->attrs(), ins, int(n->numOutputs()), outs);
    if (!st.isOk()) return std::move(st).withContext("node " + n->describe());
    if (outs.size() != n->numOutputs())
      return fail(n->describe() + " has " + std::to_string(n->numOutputs()) + " results, its "
                  "shape rule gives " + std::to_string(outs.size()));
    for (size_t i = 0; i < outs.size(); ++i) {
      const Value* o = n->output(i);
      if (o->type() != outs[i])
        return fail(n->describe() + " result '" + o->name() + "' is declared " +
                    typeToString(o->type()) + " but its shape rule gives " +
                    typeToString(outs[i]));
      if (o->role() != TensorRole::Activation && o->role() != TensorRole::Gradient)
        return fail(n->describe() + " result '" + o->name() + "' must be act or grad");
      if (!names.insert(o->name()).second) return fail("value '" + o->name() + "' defined twice");
      defined.insert(o);
    }
  }
  for (const Value* o : g.outputs())
    if (!defined.count(o)) return fail("graph output '" + o->name() + "' is not defined");
  std::set<const Value*> carried;
  for (const Carry& c : g.carries()) {
    if (!c.state->isGraphLevel() ||
        (c.state->role() != TensorRole::State && c.state->role() != TensorRole::Param))
      return fail("carry target '" + c.state->name() + "' must be a param or state");
    if (!defined.count(c.next)) return fail("carry source '" + c.next->name() + "' undefined");
    if (c.state->type() != c.next->type())
      return fail("carry '" + c.state->name() + "' <- '" + c.next->name() + "' changes type");
    if (!carried.insert(c.state).second)
      return fail("'" + c.state->name() + "' is carried twice");
  }
  return Status::ok();
}

} // namespace hgp
