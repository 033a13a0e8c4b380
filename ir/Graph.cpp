#include "ir/Graph.h"

#include "ir/OpInfo.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace hgp {

double TensorData::elementAsDouble(int64_t i) const {
  if (bytes.empty()) return 0;
  const uint8_t* p = bytes.data() + i * dtypeSize(type.dtype);
  switch (type.dtype) {
  case DType::F32: { float v; std::memcpy(&v, p, 4); return v; }
  case DType::F64: { double v; std::memcpy(&v, p, 8); return v; }
  case DType::I64: { int64_t v; std::memcpy(&v, p, 8); return double(v); }
  case DType::I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
  case DType::I8: return double(int8_t(*p));
  case DType::U8: case DType::Bool: return double(*p);
  case DType::F16: case DType::BF16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    uint32_t bits;
    if (type.dtype == DType::BF16) {
      bits = uint32_t(h) << 16;
    } else {
      uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023;
      if (exp == 0 && man == 0) bits = sign;
      else if (exp == 0) { // subnormal
        float f = std::ldexp(float(man), -24);
        return sign ? -f : f;
      } else if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
      else bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  }
  return 0;
}

int64_t TensorData::elementAsInt(int64_t i) const {
  if (bytes.empty()) return 0;
  const uint8_t* p = bytes.data() + i * dtypeSize(type.dtype);
  switch (type.dtype) {
  case DType::I64: { int64_t v; std::memcpy(&v, p, 8); return v; }
  case DType::I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
  default: return int64_t(elementAsDouble(i));
  }
}

void Node::setInput(size_t i, Value* v) {
  Value* old = inputs_[i];
  if (old == v) return;
  auto it = std::find(old->users_.begin(), old->users_.end(), this);
  if (it != old->users_.end()) old->users_.erase(it);
  inputs_[i] = v;
  v->users_.push_back(this);
}

std::string Node::describe() const {
  std::string s = hgp::opName(op_);
  if (!name_.empty()) s += " '" + name_ + "'";
  else s += " #" + std::to_string(id_);
  return s;
}

Value* Graph::newValue(std::string name, TensorType type, TensorRole role) {
  auto v = std::make_unique<Value>();
  v->id_ = nextValueId_++;
  v->name_ = std::move(name);
  v->type_ = std::move(type);
  v->role_ = role;
  Value* raw = v.get();
  byName_[raw->name_] = raw;
  valueStore_.push_back(std::move(v));
  return raw;
}

Expected<Value*> Graph::addGraphValue(const std::string& name, TensorRole role, TensorType type,
                                      std::shared_ptr<const TensorData> data) {
  if (name.empty()) return Status(ErrorCode::InvalidModel, "a graph value has an empty name");
  if (byName_.count(name))
    return Status(ErrorCode::InvalidModel, "the name '" + name + "' is defined twice");
  if (!isPersistentRole(role))
    return Status(ErrorCode::Internal, "graph value '" + name + "' must be an input, param, "
                                       "state or const");
  Value* v = newValue(name, std::move(type), role);
  v->data_ = std::move(data);
  graphValues_.push_back(v);
  return v;
}

std::string Graph::uniqueName(const std::string& base) {
  if (!byName_.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string n = base + "." + std::to_string(i);
    if (!byName_.count(n)) return n;
  }
}

void Graph::insertNode(Node* n) {
  if (insertBefore_) {
    auto it = std::find(order_.begin(), order_.end(), insertBefore_);
    order_.insert(it, n);
  } else {
    order_.push_back(n);
  }
}

Expected<Node*> Graph::addNode(OpKind op, std::vector<Value*> inputs, AttrMap attrs,
                               std::string name, int numOutputs, TensorRole role,
                               std::vector<std::string> outputNames) {
  std::vector<TensorType> inTypes;
  inTypes.reserve(inputs.size());
  for (Value* v : inputs) inTypes.push_back(v->type());
  std::vector<TensorType> outTypes;
  Status st = inferTypes(op, attrs, inTypes, numOutputs, outTypes);
  if (!st.isOk()) {
    std::string who = std::string(opName(op)) + (name.empty() ? "" : " '" + name + "'");
    return std::move(st).withContext("node " + who);
  }
  std::vector<std::string> names = std::move(outputNames);
  names.resize(outTypes.size());
  std::vector<TensorRole> roles(outTypes.size(), role);
  return addNodeUnchecked(op, std::move(inputs), std::move(attrs), std::move(name),
                          std::move(outTypes), std::move(names), std::move(roles));
}

Expected<Node*> Graph::addNodeUnchecked(OpKind op, std::vector<Value*> inputs, AttrMap attrs,
                                        std::string name, std::vector<TensorType> outTypes,
                                        std::vector<std::string> outNames,
                                        std::vector<TensorRole> outRoles) {
  for (const auto& n : outNames)
    if (!n.empty() && byName_.count(n))
      return Status(ErrorCode::InvalidModel, "the name '" + n + "' is defined twice");
  auto node = std::make_unique<Node>();
  node->id_ = nextNodeId_++;
  node->op_ = op;
  node->name_ = std::move(name);
  node->attrs_ = std::move(attrs);
  node->inputs_ = std::move(inputs);
  for (Value* v : node->inputs_) v->users_.push_back(node.get());
  for (size_t i = 0; i < outTypes.size(); ++i) {
    std::string n = i < outNames.size() && !outNames[i].empty() ? outNames[i] : "";
    if (n.empty()) {
      do {
        n = "t" + std::to_string(nextTemp_++);
      } while (byName_.count(n));
    }
    TensorRole r = i < outRoles.size() ? outRoles[i] : TensorRole::Activation;
    Value* v = newValue(n, std::move(outTypes[i]), r);
    v->producer_ = node.get();
    v->resultIndex_ = int(i);
    node->outputs_.push_back(v);
  }
  Node* raw = node.get();
  nodeStore_.push_back(std::move(node));
  insertNode(raw);
  return raw;
}

void Graph::replaceAllUsesWith(Value* from, Value* to) {
  if (from == to) return;
  std::vector<Node*> users = from->users_;
  for (Node* u : users)
    for (size_t i = 0; i < u->inputs_.size(); ++i)
      if (u->inputs_[i] == from) u->setInput(i, to);
  for (Value*& o : outputs_)
    if (o == from) o = to;
  for (Carry& c : carries_)
    if (c.next == from) c.next = to;
}

Status Graph::eraseNode(Node* n) {
  for (Value* o : n->outputs_) {
    if (!o->users_.empty())
      return Status(ErrorCode::Internal, "cannot erase " + n->describe() + ": result in use");
    if (std::find(outputs_.begin(), outputs_.end(), o) != outputs_.end())
      return Status(ErrorCode::Internal, "cannot erase " + n->describe() + ": graph output");
  }
  for (Value* in : n->inputs_) {
    auto it = std::find(in->users_.begin(), in->users_.end(), n);
    if (it != in->users_.end()) in->users_.erase(it);
  }
  for (Value* o : n->outputs_) byName_.erase(o->name_);
  n->dead_ = true;
  order_.erase(std::find(order_.begin(), order_.end(), n));
  if (insertBefore_ == n) insertBefore_ = nullptr;
  return Status::ok();
}

Status Graph::reorderNodes(std::vector<Node*> order) {
  std::vector<Node*> a = order, b = order_;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  if (a != b) return Status(ErrorCode::Internal, "reorderNodes: not a permutation of the nodes");
  order_ = std::move(order);
  return Status::ok();
}

Status Graph::eraseGraphValue(Value* v) {
  if (!v->users_.empty() ||
      std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end())
    return Status(ErrorCode::Internal, "cannot erase '" + v->name_ + "': still in use");
  std::erase_if(carries_, [&](const Carry& c) { return c.state == v; });
  std::erase(graphValues_, v);
  byName_.erase(v->name_);
  return Status::ok();
}

Value* Graph::findValue(const std::string& name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : it->second;
}

Status Graph::renameValue(Value* v, const std::string& name) {
  if (v->name_ == name) return Status::ok();
  if (byName_.count(name))
    return Status(ErrorCode::InvalidModel, "the name '" + name + "' is defined twice");
  byName_.erase(v->name_);
  v->name_ = name;
  byName_[name] = v;
  return Status::ok();
}

} // namespace hgp
