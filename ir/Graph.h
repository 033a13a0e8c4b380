// Graph.h - the layer-DAG IR: values (tensors) and nodes (ops) in SSA form.
//
// A Graph holds graph-level values (inputs, parameters, states and constants, each with a
// static type and, for the last three, optional initial data) and a list of nodes kept in a
// topological order. Every node result is a fresh value; nothing is mutated in place. Values
// that persist across training steps (parameters, BN running statistics, optimizer buffers,
// counters) are updated through carries: `carry %state <- %next` says that %next is the value
// %state holds in the next step. The plan emitter gives each carried pair one buffer.
//
// Ops come from the one op table (runtime/plan/OpList.def); their shape rules and verifiers live
// in ir/ops/. The printed form (Printer.cpp) is what golden tests compare, and the
// parser (Parser.cpp) reads it back to the same text.
#pragma once

#include "runtime/plan/Attr.h"
#include "runtime/plan/OpKind.h"
#include "runtime/plan/Types.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace hgp {

class Node;

/// The initial contents of a parameter, state or constant.
struct TensorData {
  TensorType type;
  /// Row-major little-endian bytes; empty when the tensor starts as zeros.
  std::vector<uint8_t> bytes;
  /// The ONNX initializer it came from, if any. --save writes the trained value back there.
  std::string onnxName;

  /// Element i as a double (for constant folding and shape chains).
  double elementAsDouble(int64_t i) const;
  int64_t elementAsInt(int64_t i) const;
};

class Value {
public:
  int id() const { return id_; }
  const std::string& name() const { return name_; }
  const TensorType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const Shape& shape() const { return type_.shape; }
  int64_t rank() const { return int64_t(type_.shape.size()); }
  TensorRole role() const { return role_; }
  void setRole(TensorRole r) { role_ = r; }

  /// The node that computes it; nullptr for graph-level values.
  Node* producer() const { return producer_; }
  /// Which result of the producer it is.
  int resultIndex() const { return resultIndex_; }
  /// Every node that reads it, once per operand position.
  const std::vector<Node*>& users() const { return users_; }
  bool isGraphLevel() const { return producer_ == nullptr; }

  /// Initial contents, for parameters, states and constants; may be null.
  const TensorData* data() const { return data_.get(); }
  std::shared_ptr<const TensorData> sharedData() const { return data_; }
  void setData(std::shared_ptr<const TensorData> d) { data_ = std::move(d); }

private:
  friend class Graph;
  friend class Node;
  int id_ = 0;
  std::string name_;
  TensorType type_;
  TensorRole role_ = TensorRole::Activation;
  Node* producer_ = nullptr;
  int resultIndex_ = 0;
  std::vector<Node*> users_;
  std::shared_ptr<const TensorData> data_;
};

class Node {
public:
  int id() const { return id_; }
  OpKind op() const { return op_; }
  const char* opName() const { return hgp::opName(op_); }
  /// The source node's name (the ONNX node name), for messages and traces.
  const std::string& name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }

  const AttrMap& attrs() const { return attrs_; }
  AttrMap& attrs() { return attrs_; }

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* input(size_t i) const { return inputs_[i]; }
  Value* output(size_t i) const { return outputs_[i]; }
  size_t numInputs() const { return inputs_.size(); }
  size_t numOutputs() const { return outputs_.size(); }

  /// Rewires operand i to read `v`, keeping use lists right.
  void setInput(size_t i, Value* v);

  /// "Conv 'name'" or "Conv #12", for error messages.
  std::string describe() const;

private:
  friend class Graph;
  int id_ = 0;
  OpKind op_ = OpKind::Relu;
  std::string name_;
  AttrMap attrs_;
  std::vector<Value*> inputs_, outputs_;
  bool dead_ = false;
};

/// A persistent value and the value it takes in the next step.
struct Carry {
  Value* state;
  Value* next;
};

class Graph {
public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }

  // --- Graph-level values -------------------------------------------------------------------
  /// Adds an input, parameter, state or constant. The name must be unused.
  Expected<Value*> addGraphValue(const std::string& name, TensorRole role, TensorType type,
                                 std::shared_ptr<const TensorData> data = nullptr);
  /// Graph-level values in declaration order.
  const std::vector<Value*>& graphValues() const { return graphValues_; }

  // --- Nodes --------------------------------------------------------------------------------
  /// Appends a node after inferring its result types from the op's shape rule (or inserts it
  /// before the insertion point, when one is set). Result values get fresh names "t<k>", or
  /// `outputNames` when given. The error names the node and what is wrong.
  Expected<Node*> addNode(OpKind op, std::vector<Value*> inputs, AttrMap attrs,
                          std::string name = "", int numOutputs = -1,
                          TensorRole role = TensorRole::Activation,
                          std::vector<std::string> outputNames = {});
  /// Appends a node with the given result types and names, without inference (the parser uses
  /// this; run the verifier afterwards).
  Expected<Node*> addNodeUnchecked(OpKind op, std::vector<Value*> inputs, AttrMap attrs,
                                   std::string name, std::vector<TensorType> outTypes,
                                   std::vector<std::string> outNames,
                                   std::vector<TensorRole> outRoles);

  /// Nodes in topological order (erased nodes excluded).
  const std::vector<Node*>& nodes() const { return order_; }
  /// New nodes go right before `n` until cleared with nullptr (then they are appended).
  void setInsertionPoint(Node* n) { insertBefore_ = n; }

  /// Replaces every read of `from` (and its uses as graph output or carry) with `to`.
  void replaceAllUsesWith(Value* from, Value* to);
  /// Removes a node whose results are unused.
  Status eraseNode(Node* n);
  /// Replaces the node order with `order`, a permutation of nodes() (passes that contract
  /// several nodes into one re-sort with it; the verifier checks the order is topological).
  Status reorderNodes(std::vector<Node*> order);
  /// Removes a graph-level value nothing reads.
  Status eraseGraphValue(Value* v);

  // --- Outputs and carries ------------------------------------------------------------------
  void addOutput(Value* v) { outputs_.push_back(v); }
  const std::vector<Value*>& outputs() const { return outputs_; }
  std::vector<Value*>& mutableOutputs() { return outputs_; }
  void addCarry(Value* state, Value* next) { carries_.push_back({state, next}); }
  const std::vector<Carry>& carries() const { return carries_; }
  std::vector<Carry>& mutableCarries() { return carries_; }

  // --- Lookup -------------------------------------------------------------------------------
  Value* findValue(const std::string& name) const;
  /// A name not yet used, starting from `base`.
  std::string uniqueName(const std::string& base);
  /// Renames a value (to an unused name).
  Status renameValue(Value* v, const std::string& name);

private:
  Value* newValue(std::string name, TensorType type, TensorRole role);
  void insertNode(Node* n);

  std::string name_;
  std::vector<std::unique_ptr<Value>> valueStore_;
  std::vector<std::unique_ptr<Node>> nodeStore_;
  std::vector<Value*> graphValues_;
  std::vector<Node*> order_;
  std::vector<Value*> outputs_;
  std::vector<Carry> carries_;
  std::map<std::string, Value*> byName_;
  Node* insertBefore_ = nullptr;
  int nextValueId_ = 0, nextNodeId_ = 0, nextTemp_ = 0;
};

} // namespace hgp
