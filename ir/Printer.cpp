#include "ir/Printer.h"

#include "runtime/support/TextScanner.h"

namespace hgp {

namespace {
void appendRef(std::string& out, const Value* v) {
  out += '%';
  appendName(out, v->name());
}
} // namespace

std::string printGraph(const Graph& g) {
  std::string out = "graph ";
  appendQuoted(out, g.name());
  out += " {\n";
  for (const Value* v : g.graphValues()) {
    out += std::string("  ") + roleName(v->role()) + " ";
    appendRef(out, v);
    out += ": " + typeToString(v->type()) + "\n";
  }
  for (const Node* n : g.nodes()) {
    out += "  ";
    for (size_t i = 0; i < n->numOutputs(); ++i) {
      const Value* o = n->output(i);
      if (i) out += ", ";
      appendRef(out, o);
      out += std::string(": ") + roleName(o->role()) + " " + typeToString(o->type());
    }
    out += std::string(" = ") + n->opName() + "(";
    for (size_t i = 0; i < n->numInputs(); ++i) {
      if (i) out += ", ";
      appendRef(out, n->input(i));
    }
    out += ")";
    if (!n->attrs().empty()) out += " " + n->attrs().toString();
    if (!n->name().empty()) {
      out += " loc(";
      appendQuoted(out, n->name());
      out += ")";
    }
    out += "\n";
  }
  for (const Value* v : g.outputs()) {
    out += "  output ";
    appendRef(out, v);
    out += "\n";
  }
  for (const Carry& c : g.carries()) {
    out += "  carry ";
    appendRef(out, c.state);
    out += " <- ";
    appendRef(out, c.next);
    out += "\n";
  }
  return out + "}\n";
}

} // namespace hgp
