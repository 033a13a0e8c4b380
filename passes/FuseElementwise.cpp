//===- FuseElementwise.cpp - chains of elementwise ops as one FusedElementwise node ----------===//
//
// Memory-bound elementwise ops (the residual Add and its Relu, the gradient Sum at a block input
// and the ReluBwd after it, the Casts of mixed precision) each read and write whole activations.
// This pass groups connected chains of them over one shape into a single FusedElementwise node
// (runtime/plan/FusedProgram.h), so that a value used only inside the chain is never written to
// memory and the chain costs one pass over its inputs and results. It runs last in the train and
// eval pipelines (after autodiff and the optimizer), so the node needs no gradient rule.
//
// What may join a group (docs/fusion.md):
//  - an op marked Fusible in OpList.def whose operands and result all have the same shape, of rank
//    at least 1 and float dtype, and whose result is not carried (the state updates stay visible
//    as ops of their own); an op marked FusedBroadcast (Add, Sub, Mul, Div, Sum and the
//    pooling gradient GlobalAveragePoolBwd) may also read an operand in a broadcast shape
//    (fusedOperandMap: squeeze-excitation's [N,C,1,1] gate against [N,C,H,W], or [N,1,1,C]
//    channels-last; a per-channel bias [C] or layer scale [C,1,1]), which becomes an input of the fused node: a group is
//    over its members' one result shape, and a gate computed by small ops stays outside it;
//    Dropout and DropoutBwd when their second operand
//    is the i64 scalar iteration counter (it becomes an input of the fused node: the mask is
//    recomputed from it and the element's flat index, bit for bit the unfused op's) and their
//    ratio is one the executors accept (a Dropout without a counter is a copy and stays out);
//  - nothing else: ops with side effects, collectives, optimizer updates, reductions and
//    everything that is not elementwise are never members, so a group never crosses them.
// Groups grow in program order: a node joins the group of the first producer of its operands
// that it can join without making the graph cyclic, i.e. when no path leaves the group and comes
// back into the node through a node outside it (checked by a walk backwards from the node's other
// operands, bounded by the group's first position). A node left alone then joins the group of
// another reader of one of its operands where no path leads either way between the two through
// other nodes (horizontal fusion: the operand is read once), or else the group that reads its
// result under the same rule (a GlobalAveragePoolBwd whose [N,C,1,1] operand comes from outside,
// so its spread gradient is never written). Groups of one node are left alone. A member
// result read outside its group (or returned by the graph) becomes a result of the fused node and
// keeps its value name; the others are never materialized. The node list is then re-sorted
// topologically, stable with respect to the old order.
//
//===----------------------------------------------------------------------------------------===//
#include "passes/Pass.h"
#include "runtime/plan/FusedProgram.h"

#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>

namespace hgp {

namespace {

/// Limits that keep a generated kernel's parameter list small.
constexpr int kMaxInputs = 16, kMaxResults = 8, kMaxMembers = 32;

bool isFloat(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

class Fuser {
public:
  Fuser(Graph& g, PassContext& ctx) : g_(g), ctx_(ctx) {}

  Status run() {
    std::vector<Node*> order = g_.nodes();
    for (size_t i = 0; i < order.size(); ++i) pos_[order[i]] = int(i);
    for (const Carry& c : g_.carries()) carried_.insert(c.next), carried_.insert(c.state);
    for (Node* n : order) {
      if (!candidate(n)) continue;
      int joined = -1;
      for (Value* v : n->inputs()) {
        Node* p = v->producer();
        auto it = p ? group_.find(p) : group_.end();
        if (it == group_.end()) continue;
        if (canJoin(it->second, n)) {
          joined = it->second;
          break;
        }
      }
      if (joined < 0) {
        joined = int(groups_.size());
        groups_.emplace_back();
      }
      groups_[size_t(joined)].push_back(n);
      group_[n] = joined;
    }
    // Then a node left alone joins the group of another reader of one of its operands (horizontal
    // fusion of siblings: SiLU's backward multiplies the incoming gradient by s and by x), so that
    // operand is read once. After the chains, so that a sibling never takes a node's place in a
    // longer chain; checked both ways, since the node may come before members.
    for (Node* n : order) {
      auto self = group_.find(n);
      if (self == group_.end() || groups_[size_t(self->second)].size() != 1) continue;
      int alone = self->second, joined = -1;
      // Candidates: the groups of the other readers of its operands (siblings), then the groups
      // that read its result (a producer left alone: the pooling gradient a squeeze-excitation
      // backward adds, whose operand comes from a convolution's gradient).
      std::vector<const Node*> near;
      for (size_t i = 0; i < n->numInputs(); ++i)
        if (n->input(i)->dtype() != DType::I64) // dropouts share the counter only
          for (const Node* u : n->input(i)->users()) near.push_back(u);
      for (const Node* u : n->output(0)->users()) near.push_back(u);
      for (const Node* u : near) {
        auto it = group_.find(u);
        if (u == n || it == group_.end() || groups_[size_t(it->second)].size() < 2) continue;
        if (canJoin(it->second, n) && !reaches(n, it->second)) {
          joined = it->second;
          break;
        }
      }
      if (joined < 0) continue;
      groups_[size_t(alone)].clear();
      std::vector<Node*>& members = groups_[size_t(joined)];
      members.push_back(n);
      std::sort(members.begin(), members.end(), [&](Node* x, Node* y) { return pos_[x] < pos_[y]; });
      group_[n] = joined;
    }
    // Each group is convex on its own; two groups could still reach each other both ways. Such
    // a pair cannot both become nodes, so dissolve groups until the contracted graph is acyclic.
    while (true) {
      int stuck = cyclicGroup(order);
      if (stuck < 0) break;
      for (Node* m : groups_[size_t(stuck)]) group_.erase(m);
      groups_[size_t(stuck)].clear();
    }
    int fusedGroups = 0, fusedOps = 0;
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      if (groups_[gi].size() < 2) continue;
      HGP_ASSIGN_OR_RETURN(bool done, contract(int(gi)));
      if (done) ++fusedGroups, fusedOps += int(groups_[gi].size());
    }
    ctx_.stats["fuse-elementwise.groups"] += fusedGroups;
    ctx_.stats["fuse-elementwise.ops-fused"] += fusedOps;
    if (fusedGroups == 0) return Status::ok();
    return g_.reorderNodes(topologicalOrder());
  }

private:
  bool candidate(const Node* n) const {
    if (!opHas(n->op(), OpFlag::Fusible) || n->numOutputs() != 1) return false;
    const Value* y = n->output(0);
    if (y->rank() < 1 || !isFloat(y->dtype()) || carried_.count(y)) return false;
    if (n->numInputs() > size_t(kMaxInputs)) return false;
    if (isFusedDropout(n->op())) {
      double ratio = n->attrs().getFloat("ratio", 0.5);
      const Value* iter = n->numInputs() == 2 ? n->input(1) : nullptr;
      if (!iter || iter->dtype() != DType::I64 || iter->rank() != 0) return false;
      if (!(ratio >= 0 && ratio < 1)) return false;
      const Value* x = n->input(0);
      return x->shape() == y->shape() && x->dtype() == y->dtype();
    }
    bool broadcasts = opHas(n->op(), OpFlag::FusedBroadcast);
    for (const Value* v : n->inputs()) {
      if (!isFloat(v->dtype())) return false;
      if (v->shape() == y->shape()) continue;
      if (!broadcasts || !fusedOperandMap(v->shape(), y->shape())) return false;
    }
    if (n->op() == OpKind::Scale && !n->attrs().has("alpha")) return false; // executors refuse it
    if (opHas(n->op(), OpFlag::FusedApprox)) { // the executors' two forms only
      std::string form = n->attrs().getString("approximate", "none");
      if (form != "none" && form != "tanh") return false;
    }
    if (opHas(n->op(), OpFlag::FusedCount) && numElements(n->input(0)->shape()) < 1) return false;
    return true;
  }

  /// The float attributes of a member, with the executors' defaults (runtime/*/ActivationOps).
  static void readAttrs(const Node& m, FusedInstr& ins) {
    const AttrMap& a = m.attrs();
    bool hard = ins.op == OpKind::HardSigmoid || ins.op == OpKind::HardSigmoidBwd;
    if (opHas(ins.op, OpFlag::FusedAlpha)) ins.alpha = float(a.getFloat("alpha", hard ? 0.2 : 0.01));
    if (opHas(ins.op, OpFlag::FusedBeta)) ins.beta = float(a.getFloat("beta", 0.5));
    if (opHas(ins.op, OpFlag::FusedBounds)) {
      if ((ins.hasLo = a.has("min"))) ins.lo = float(a.getFloat("min"));
      if ((ins.hasHi = a.has("max"))) ins.hi = float(a.getFloat("max"));
    }
    if (opHas(ins.op, OpFlag::FusedApprox)) ins.tanhForm = a.getString("approximate", "none") == "tanh";
    if (opHas(ins.op, OpFlag::FusedCount)) // the pooled elements per operand element
      ins.count = numElements(m.output(0)->shape()) / std::max<int64_t>(1, numElements(m.input(0)->shape()));
    if (isFusedDropout(ins.op)) { // the executors' defaults (runtime/*/RandomOps)
      ins.ratio = a.getFloat("ratio", 0.5);
      ins.seed = a.getInt("seed", 0);
      ins.key = a.getInt("key", 0);
    }
  }

  /// Whether `n` may join group `gi`: no path from the group to `n` through an outside node, and
  /// the group stays within the kernel limits.
  bool canJoin(int gi, Node* n) {
    const std::vector<Node*>& members = groups_[size_t(gi)];
    if (int(members.size()) >= kMaxMembers) return false;
    if (members.front()->output(0)->shape() != n->output(0)->shape()) return false;
    int first = pos_[members.front()];
    std::set<Node*> seen;
    std::vector<Node*> stack;
    for (Value* v : n->inputs())
      if (Node* p = v->producer(); p && inGroup(p, gi) == false) stack.push_back(p);
    while (!stack.empty()) {
      Node* m = stack.back();
      stack.pop_back();
      if (pos_[m] < first || !seen.insert(m).second) continue;
      if (inGroup(m, gi)) return false; // out of the group and back in
      for (Value* v : m->inputs())
        if (Node* p = v->producer()) stack.push_back(p);
    }
    // Inputs and results of the grown group.
    std::set<Node*> grown(members.begin(), members.end());
    grown.insert(n);
    std::set<Value*> inputs;
    for (Node* m : grown)
      for (Value* v : m->inputs())
        if (!v->producer() || !grown.count(v->producer())) inputs.insert(v);
    return int(inputs.size()) <= kMaxInputs;
  }

  /// Whether a path leads from `n` through nodes outside group `gi` to a member of it (a member
  /// reading `n`'s result directly is no such path: `n` then joins as a producer).
  bool reaches(Node* n, int gi) {
    int last = pos_[groups_[size_t(gi)].back()];
    std::set<Node*> seen;
    std::vector<Node*> stack;
    for (Value* v : n->outputs())
      for (Node* u : v->users())
        if (!inGroup(u, gi)) stack.push_back(u);
    while (!stack.empty()) {
      Node* m = stack.back();
      stack.pop_back();
      if (pos_[m] > last || !seen.insert(m).second) continue;
      if (inGroup(m, gi)) return true;
      for (Value* v : m->outputs())
        for (Node* u : v->users()) stack.push_back(u);
    }
    return false;
  }

  /// A group (of two or more nodes) on a cycle of the graph with every group contracted, the
  /// last formed of them; -1 when the contracted graph is acyclic.
  int cyclicGroup(const std::vector<Node*>& order) const {
    auto id = [&](const Node* n) {
      auto it = group_.find(n);
      if (it != group_.end() && groups_[size_t(it->second)].size() >= 2) return it->second;
      return int(groups_.size()) + pos_.at(n);
    };
    std::map<int, std::set<int>> next;
    std::map<int, int> indegree;
    for (Node* n : order) {
      int to = id(n);
      indegree.emplace(to, 0);
      for (Value* v : n->inputs()) {
        Node* p = v->producer();
        if (!p) continue;
        int from = id(p);
        if (from != to && next[from].insert(to).second) ++indegree[to];
      }
    }
    std::vector<int> ready;
    for (auto& [k, d] : indegree)
      if (d == 0) ready.push_back(k);
    while (!ready.empty()) {
      int k = ready.back();
      ready.pop_back();
      for (int j : next[k])
        if (--indegree[j] == 0) ready.push_back(j);
    }
    int worst = -1;
    for (auto& [k, d] : indegree)
      if (d > 0 && k < int(groups_.size())) worst = std::max(worst, k);
    return worst;
  }

  bool inGroup(Node* n, int gi) const {
    auto it = group_.find(n);
    return it != group_.end() && it->second == gi;
  }

  bool usedOutside(const Value* v, const std::set<const Node*>& members) const {
    for (const Node* u : v->users())
      if (!members.count(u)) return true;
    const auto& outs = g_.outputs();
    return std::find(outs.begin(), outs.end(), v) != outs.end();
  }

  /// Replaces the group's members by one FusedElementwise node; false when it has no result or
  /// too many.
  Expected<bool> contract(int gi) {
    std::vector<Node*>& members = groups_[size_t(gi)];
    std::set<const Node*> inside(members.begin(), members.end());
    std::map<const Value*, int> number;
    std::vector<Value*> inputs;
    for (Node* m : members)
      for (Value* v : m->inputs())
        if ((!v->producer() || !inside.count(v->producer())) && !number.count(v)) {
          number[v] = int(inputs.size());
          inputs.push_back(v);
        }
    FusedProgram p;
    p.numInputs = int(inputs.size());
    std::vector<Value*> results;
    for (Node* m : members) {
      FusedInstr ins;
      ins.op = m->op();
      ins.dtype = m->output(0)->dtype();
      for (Value* v : m->inputs()) ins.args.push_back(number.at(v));
      readAttrs(*m, ins);
      number[m->output(0)] = p.numValues();
      p.instrs.push_back(ins);
      if (usedOutside(m->output(0), inside)) {
        p.results.push_back(number[m->output(0)]);
        results.push_back(m->output(0));
      }
    }
    if (results.empty() || int(results.size()) > kMaxResults) return false;
    AttrMap attrs;
    p.store(attrs);
    Node* last = members.back();
    std::vector<Node*> order = g_.nodes();
    auto after = std::find(order.begin(), order.end(), last) + 1;
    g_.setInsertionPoint(after == order.end() ? nullptr : *after);
    std::string base = last->name().empty() ? std::to_string(last->id()) : last->name();
    std::string name = "fused" + std::string(base[0] == '/' ? "" : "/") + base;
    Expected<Node*> fused = g_.addNode(OpKind::FusedElementwise, inputs, attrs, name,
                                       int(results.size()));
    g_.setInsertionPoint(nullptr);
    if (!fused) return fused.status();
    std::vector<std::string> names;
    for (size_t r = 0; r < results.size(); ++r) {
      (*fused)->output(r)->setRole(results[r]->role());
      names.push_back(results[r]->name());
      g_.replaceAllUsesWith(results[r], (*fused)->output(r));
    }
    for (auto it = members.rbegin(); it != members.rend(); ++it) HGP_TRY(g_.eraseNode(*it));
    for (size_t r = 0; r < results.size(); ++r) HGP_TRY(g_.renameValue((*fused)->output(r), names[r]));
    return true;
  }

  /// The nodes in a topological order that keeps the current order wherever it is valid.
  std::vector<Node*> topologicalOrder() const {
    const std::vector<Node*>& order = g_.nodes();
    std::unordered_map<const Node*, int> index, pending;
    for (size_t i = 0; i < order.size(); ++i) index[order[i]] = int(i);
    std::vector<std::vector<int>> next(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
      std::set<int> deps;
      for (Value* v : order[i]->inputs())
        if (Node* p = v->producer()) deps.insert(index.at(p));
      pending[order[i]] = int(deps.size());
      for (int d : deps) next[size_t(d)].push_back(int(i));
    }
    std::priority_queue<int, std::vector<int>, std::greater<>> ready;
    for (size_t i = 0; i < order.size(); ++i)
      if (pending[order[i]] == 0) ready.push(int(i));
    std::vector<Node*> out;
    while (!ready.empty()) {
      int i = ready.top();
      ready.pop();
      out.push_back(order[size_t(i)]);
      for (int j : next[size_t(i)])
        if (--pending[order[size_t(j)]] == 0) ready.push(j);
    }
    return out;
  }

  Graph& g_;
  PassContext& ctx_;
  std::unordered_map<const Node*, int> pos_;
  std::set<const Value*> carried_;
  std::vector<std::vector<Node*>> groups_;
  std::unordered_map<const Node*, int> group_;
};

} // namespace

Status runFuseElementwise(Graph& g, PassContext& ctx) { return Fuser(g, ctx).run(); }

} // namespace hgp
