// ImportContext.h - the state of one ONNX import and the view an op importer gets of its node.
//
// The importer walks the ONNX nodes in topological order. Every ONNX value name maps to an IR
// value, to a tensor known at compile time, or to both:
//
//  - `values` holds IR values: graph inputs, parameters, states, and node results;
//  - `known` holds tensors whose contents are known at compile time and may be folded:
//    Constant outputs, non-float initializers, constant-bound inputs, and everything computed
//    from them (shape chains such as Shape -> Gather -> Unsqueeze -> Concat -> Reshape);
//  - `initializers` holds the contents of every initializer, so that an operand that must be
//    known (Clip's min, Pad's value) can also come from a float initializer, which is a trainable
//    parameter and therefore never folded.
//
// A known tensor becomes an IR constant (role Const) the first time a compute op reads it as
// data. Op importers (importers/*Importers.cpp) see their node through OnnxNode, which reads
// attributes with type checks, fetches operands and binds results, and formats every error as
// "node '<name>' (<OpType>): <what is wrong>".
#pragma once

#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/OnnxTensor.h"

#include <onnx/onnx_pb.h>

#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace hgp {

/// The per-import state shared by all op importers.
struct ImportContext {
  ImportContext(Graph& g, const OnnxImportOptions& o) : graph(g), options(o) {}

  Graph& graph;
  const OnnxImportOptions& options;
  /// The default-domain opset the model imports.
  int64_t opset = 0;
  /// Whether the model says PyTorch wrote it (PyTorch keeps the running variance unbiased).
  bool pytorchProducer = false;

  std::unordered_map<std::string, Value*> values;
  std::unordered_map<std::string, TensorDataPtr> known;
  std::unordered_map<std::string, TensorDataPtr> initializers;
  /// How often each ONNX value is read: by node inputs, plus once per graph output.
  std::unordered_map<std::string, int> uses;
  /// States already carried (a running statistic may be updated by one BatchNormalization).
  std::set<Value*> carried;
  /// The next Dropout site's key.
  int64_t nextDropoutKey = 0;
  /// RandomUniformLike results not imported yet: the draw becomes a Bernoulli mask when a Less
  /// or Greater compares it with a constant (importers/RandomImporters.cpp). Name -> the node.
  std::unordered_map<std::string, const onnx::NodeProto*> uniformDraws;
  /// ONNX bool values that are 0/1 masks of a float dtype in the IR (a comparison's, Not's or a
  /// Bernoulli's result; importers/CompareImporters.cpp). A Cast to float takes the mask as it
  /// is; a graph output declared bool gets a Cast to bool.
  std::set<std::string> boolMasks;
  /// BatchNormalization nodes seen, by mode (OnnxModelInfo's counts).
  int64_t trainingBatchNorms = 0, retrainedBatchNorms = 0, frozenBatchNorms = 0;
  /// Dim 0 of the first data input as the file wrote it, when static (0 when symbolic), and how
  /// many shape constants followBatch moved from it to --batch.
  int64_t exportBatch = 0, rebatchedShapes = 0;
};

/// One ONNX node as an op importer sees it.
class OnnxNode {
public:
  OnnxNode(ImportContext& ctx, const onnx::NodeProto& proto, std::string loc)
      : ctx_(ctx), proto_(proto), loc_(std::move(loc)) {}

  ImportContext& ctx() { return ctx_; }
  Graph& graph() { return ctx_.graph; }
  const onnx::NodeProto& proto() const { return proto_; }
  const std::string& opType() const { return proto_.op_type(); }
  /// The node's name, or "<op_type>_<index>" when it has none; IR nodes carry it as their name.
  const std::string& loc() const { return loc_; }
  int64_t opset() const { return ctx_.opset; }

  // --- Errors ---------------------------------------------------------------------------------
  /// An InvalidModel error "node '<loc>' (<OpType>): msg".
  Status fail(const std::string& msg) const;

  // --- Operands -------------------------------------------------------------------------------
  size_t numInputs() const { return size_t(proto_.input_size()); }
  /// Whether optional input i is present (listed with a non-empty name).
  bool hasInput(size_t i) const { return i < numInputs() && !proto_.input(int(i)).empty(); }
  const std::string& inputName(size_t i) const { return proto_.input(int(i)); }
  /// Input i as an IR value; a known tensor is turned into a Const graph value on first use.
  Expected<Value*> input(size_t i);
  /// Input i's contents when they are known at compile time and foldable; else null.
  TensorDataPtr known(size_t i) const;
  /// Input i's type, whether it is an IR value or a known tensor.
  Expected<TensorType> inputType(size_t i) const;
  /// Input i's contents, which must be known at compile time (from a constant, a folded shape
  /// chain or an initializer); `what` names the operand in the error.
  Expected<TensorDataPtr> staticInput(size_t i, const char* what) const;
  /// A static integer list (rank 0 or 1, integer dtype).
  Expected<std::vector<int64_t>> staticInts(size_t i, const char* what) const;
  /// A static single-element number.
  Expected<double> staticScalar(size_t i, const char* what) const;

  // --- Results --------------------------------------------------------------------------------
  size_t numOutputs() const { return size_t(proto_.output_size()); }
  bool hasOutput(size_t i) const { return i < numOutputs() && !proto_.output(int(i)).empty(); }
  const std::string& outputName(size_t i) const { return proto_.output(int(i)); }
  /// Whether result i is read by a node or is a graph output.
  bool outputUsed(size_t i) const;
  /// Binds result i to an IR value (an alias when `v` already has a name).
  void setOutput(size_t i, Value* v);
  /// Binds result i to a tensor known at compile time.
  void setKnownOutput(size_t i, TensorDataPtr t);
  /// Binds result i to the same IR value and/or known tensor as input j (Identity and friends).
  void aliasOutput(size_t i, size_t j);
  /// Adds an IR node named after this ONNX node; errors name it.
  Expected<Node*> emit(OpKind op, std::vector<Value*> inputs, AttrMap attrs, int numOutputs = -1);

  // --- Attributes -----------------------------------------------------------------------------
  /// The attribute, or null. Attribute names are unique (the graph importer checks).
  const onnx::AttributeProto* attr(const char* name) const;
  bool hasAttr(const char* name) const { return attr(name) != nullptr; }
  Expected<int64_t> attrInt(const char* name, int64_t def) const;
  Expected<double> attrFloat(const char* name, double def) const;
  Expected<std::string> attrString(const char* name, const std::string& def) const;
  Expected<std::vector<int64_t>> attrInts(const char* name, std::vector<int64_t> def = {}) const;
  Expected<std::vector<double>> attrFloats(const char* name, std::vector<double> def = {}) const;
  /// A TENSOR attribute's contents, or null when absent.
  Expected<TensorDataPtr> attrTensor(const char* name) const;

private:
  Status checkAttrType(const onnx::AttributeProto& a, int type) const;

  ImportContext& ctx_;
  const onnx::NodeProto& proto_;
  std::string loc_;
};

/// Axis `axis` normalized against `rank` (negative counts from the end), or the node's error.
Expected<int64_t> normalizeAxisFor(const OnnxNode& n, int64_t axis, int64_t rank,
                                   const char* what = "axis");

/// A static export (the dynamo exporter's, or any traced at a fixed batch) writes the batch it was
/// traced at into shape constants: a Reshape's target such as ShuffleNet's channel shuffle
/// [N, g, C/g, H, W], an Expand's, stochastic depth's noise shape [N, 1, 1, 1]. When --batch
/// re-batches such a model, a shape whose dim 0 is the export's batch follows the new batch, if
/// the tensor it reshapes starts with the new batch (`leadingDim`; -1 for a shape that makes a
/// tensor of its own, as ConstantOfShape's, which must then have rank 2 or more). Returns
/// whether it rewrote `shape`; the importer warns once with the count (OnnxImporter.cpp).
bool followBatch(ImportContext& ctx, std::vector<int64_t>& shape, int64_t leadingDim);

/// Multiplies dims with overflow and 2^40 checks; errors name the node.
Expected<int64_t> checkedProduct(const OnnxNode& n, const Shape& dims);

} // namespace hgp
