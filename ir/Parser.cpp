#include "ir/Printer.h"

#include "runtime/support/TextScanner.h"

namespace hgp {

namespace {

class GraphParser {
public:
  GraphParser(std::string_view text, const std::string& source) : s_(text, source) {}

  Expected<std::unique_ptr<Graph>> parse() {
    HGP_TRY(s_.expectWord("graph"));
    HGP_ASSIGN_OR_RETURN(std::string name, s_.quoted());
    auto g = std::make_unique<Graph>(name);
    HGP_TRY(s_.expect('{'));
    while (!s_.consume('}')) {
      if (s_.atEnd()) return s_.error("unterminated graph");
      if (s_.peek() == '%') {
        HGP_TRY(parseNode(*g));
        continue;
      }
      HGP_ASSIGN_OR_RETURN(std::string kw, s_.word());
      if (kw == "output") {
        HGP_ASSIGN_OR_RETURN(Value * v, ref(*g));
        g->addOutput(v);
      } else if (kw == "carry") {
        HGP_ASSIGN_OR_RETURN(Value * state, ref(*g));
        HGP_TRY(s_.expect('<'));
        HGP_TRY(s_.expect('-'));
        HGP_ASSIGN_OR_RETURN(Value * next, ref(*g));
        g->addCarry(state, next);
      } else {
        auto role = parseRole(kw);
        if (!role) return s_.error("unexpected '" + kw + "'");
        HGP_ASSIGN_OR_RETURN(std::string vname, s_.percentName());
        HGP_TRY(s_.expect(':'));
        HGP_ASSIGN_OR_RETURN(TensorType t, type());
        auto v = g->addGraphValue(vname, *role, t);
        if (!v) return s_.error(v.status().message());
      }
    }
    if (!s_.atEnd()) return s_.error("text after the end of the graph");
    return g;
  }

private:
  Expected<Value*> ref(Graph& g) {
    HGP_ASSIGN_OR_RETURN(std::string name, s_.percentName());
    Value* v = g.findValue(name);
    if (!v) return s_.error("use of undefined value %" + name);
    return v;
  }

  Expected<TensorType> type() {
    TensorType t;
    HGP_ASSIGN_OR_RETURN(std::string dt, s_.word());
    auto d = parseDType(dt);
    if (!d) return s_.error(d.status().message());
    t.dtype = *d;
    HGP_TRY(s_.expect('['));
    if (!s_.consume(']')) {
      do {
        HGP_ASSIGN_OR_RETURN(int64_t dim, s_.integer());
        t.shape.push_back(dim);
      } while (s_.consume(','));
      HGP_TRY(s_.expect(']'));
    }
    return t;
  }

  Status parseNode(Graph& g) {
    std::vector<std::string> names;
    std::vector<TensorType> types;
    std::vector<TensorRole> roles;
    do {
      HGP_ASSIGN_OR_RETURN(std::string n, s_.percentName());
      HGP_TRY(s_.expect(':'));
      HGP_ASSIGN_OR_RETURN(std::string r, s_.word());
      auto role = parseRole(r);
      if (!role) return s_.error(role.status().message());
      HGP_ASSIGN_OR_RETURN(TensorType t, type());
      names.push_back(n);
      types.push_back(t);
      roles.push_back(*role);
    } while (s_.consume(','));
    HGP_TRY(s_.expect('='));
    HGP_ASSIGN_OR_RETURN(std::string opWord, s_.word());
    auto op = parseOpKind(opWord);
    if (!op) return s_.error(op.status().message());
    HGP_TRY(s_.expect('('));
    std::vector<Value*> inputs;
    if (!s_.consume(')')) {
      do {
        HGP_ASSIGN_OR_RETURN(Value * v, ref(g));
        inputs.push_back(v);
      } while (s_.consume(','));
      HGP_TRY(s_.expect(')'));
    }
    AttrMap attrs;
    if (s_.peek() == '{') {
        HGP_ASSIGN_OR_RETURN(attrs, AttrMap::parse(s_));
      }
    std::string loc;
    if (s_.consumeWord("loc")) {
      HGP_TRY(s_.expect('('));
      HGP_ASSIGN_OR_RETURN(loc, s_.quoted());
      HGP_TRY(s_.expect(')'));
    }
    auto node = g.addNodeUnchecked(*op, std::move(inputs), std::move(attrs), std::move(loc),
                                   std::move(types), std::move(names), std::move(roles));
    if (!node) return s_.error(node.status().message());
    return Status::ok();
  }

  TextScanner s_;
};

} // namespace

Expected<std::unique_ptr<Graph>> parseGraph(std::string_view text, const std::string& sourceName) {
  return GraphParser(text, sourceName).parse();
}

} // namespace hgp
