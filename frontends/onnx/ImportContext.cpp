#include "frontends/onnx/ImportContext.h"

namespace hgp {

namespace {

const char* attrTypeName(int type) {
  static const char* const kNames[] = {"UNDEFINED", "FLOAT",   "INT",    "STRING",
                                       "TENSOR",    "GRAPH",   "FLOATS", "INTS",
                                       "STRINGS",   "TENSORS", "GRAPHS"};
  return type >= 0 && type < int(std::size(kNames)) ? kNames[type] : "an unknown type";
}

/// For attributes without a type (very old writers): whether the field for `type` is set.
bool fieldPresent(const onnx::AttributeProto& a, int type) {
  switch (type) {
  case onnx::AttributeProto::FLOAT:
    return a.has_f();
  case onnx::AttributeProto::INT:
    return a.has_i();
  case onnx::AttributeProto::STRING:
    return a.has_s();
  case onnx::AttributeProto::TENSOR:
    return a.has_t();
  case onnx::AttributeProto::FLOATS:
    return a.floats_size() > 0;
  case onnx::AttributeProto::INTS:
    return a.ints_size() > 0;
  default:
    return false;
  }
}

} // namespace

Status OnnxNode::fail(const std::string& msg) const {
  return Status(ErrorCode::InvalidModel, "node '" + loc_ + "' (" + opType() + "): " + msg);
}

Expected<Value*> OnnxNode::input(size_t i) {
  if (!hasInput(i)) return fail("input " + std::to_string(i) + " is missing");
  const std::string& name = inputName(i);
  if (ctx_.uniformDraws.count(name))
    return fail("reads the draw of RandomUniformLike '" + name +
                "', which hgpc supports only compared with a constant (Less or Greater: a "
                "Bernoulli mask, as torch exports bernoulli_)");
  auto it = ctx_.values.find(name);
  if (it != ctx_.values.end()) return it->second;
  TensorDataPtr t;
  if (auto k = ctx_.known.find(name); k != ctx_.known.end())
    t = k->second;
  else if (auto z = ctx_.initializers.find(name); z != ctx_.initializers.end())
    t = z->second;
  if (!t) return fail("input '" + name + "' is not defined");
  for (int64_t d : t->type.shape)
    if (d < 1)
      return fail("constant '" + name + "' has shape " + shapeToString(t->type.shape) +
                  "; a tensor with a zero dim cannot be an operand");
  if (int64_t(t->bytes.size()) != t->type.bytes())
    return Status(ErrorCode::Internal, "constant '" + name + "' has the wrong number of bytes");
  HGP_ASSIGN_OR_RETURN(Value * v, ctx_.graph.addGraphValue(ctx_.graph.uniqueName(name),
                                                           TensorRole::Const, t->type, t));
  ctx_.values[name] = v;
  return v;
}

TensorDataPtr OnnxNode::known(size_t i) const {
  if (!hasInput(i)) return nullptr;
  auto k = ctx_.known.find(inputName(i));
  return k == ctx_.known.end() ? nullptr : k->second;
}

Expected<TensorType> OnnxNode::inputType(size_t i) const {
  if (!hasInput(i)) return fail("input " + std::to_string(i) + " is missing");
  const std::string& name = inputName(i);
  if (auto it = ctx_.values.find(name); it != ctx_.values.end()) return it->second->type();
  if (auto k = ctx_.known.find(name); k != ctx_.known.end()) return k->second->type;
  if (auto z = ctx_.initializers.find(name); z != ctx_.initializers.end()) return z->second->type;
  return fail("input '" + name + "' is not defined");
}

Expected<TensorDataPtr> OnnxNode::staticInput(size_t i, const char* what) const {
  if (!hasInput(i))
    return fail(std::string(what) + " (input " + std::to_string(i) + ") is missing");
  const std::string& name = inputName(i);
  if (auto k = ctx_.known.find(name); k != ctx_.known.end()) return k->second;
  if (auto z = ctx_.initializers.find(name); z != ctx_.initializers.end()) return z->second;
  return fail(std::string(what) + " '" + name +
              "' must be known at compile time, but it is computed at run time");
}

Expected<std::vector<int64_t>> OnnxNode::staticInts(size_t i, const char* what) const {
  HGP_ASSIGN_OR_RETURN(TensorDataPtr t, staticInput(i, what));
  if (isFloatDType(t->type.dtype) || t->type.dtype == DType::Bool)
    return fail(std::string(what) + " must be an integer tensor, not " + dtypeName(t->type.dtype));
  if (t->type.rank() > 1)
    return fail(std::string(what) + " must be 1-D, got shape " + shapeToString(t->type.shape));
  // Shapes, axes, pads and sizes are short; a long list is a hostile model, not a shape.
  if (t->type.numElements() > (int64_t(1) << 20))
    return fail(std::string(what) + " has " + std::to_string(t->type.numElements()) +
                " entries, more than 2^20");
  return readInts(*t);
}

Expected<double> OnnxNode::staticScalar(size_t i, const char* what) const {
  HGP_ASSIGN_OR_RETURN(TensorDataPtr t, staticInput(i, what));
  if (t->type.numElements() != 1)
    return fail(std::string(what) + " must have one element, got shape " +
                shapeToString(t->type.shape));
  return readDouble(*t, 0);
}

bool OnnxNode::outputUsed(size_t i) const {
  if (!hasOutput(i)) return false;
  auto it = ctx_.uses.find(outputName(i));
  return it != ctx_.uses.end() && it->second > 0;
}

void OnnxNode::setOutput(size_t i, Value* v) {
  if (hasOutput(i)) ctx_.values[outputName(i)] = v;
}

void OnnxNode::setKnownOutput(size_t i, TensorDataPtr t) {
  if (hasOutput(i)) ctx_.known[outputName(i)] = std::move(t);
}

void OnnxNode::aliasOutput(size_t i, size_t j) {
  if (!hasOutput(i) || !hasInput(j)) return;
  const std::string& in = inputName(j);
  if (auto it = ctx_.values.find(in); it != ctx_.values.end()) setOutput(i, it->second);
  if (auto k = ctx_.known.find(in); k != ctx_.known.end())
    setKnownOutput(i, k->second);
  else if (auto z = ctx_.initializers.find(in);
           z != ctx_.initializers.end() && !ctx_.values.count(in))
    setKnownOutput(i, z->second);
}

Expected<Node*> OnnxNode::emit(OpKind op, std::vector<Value*> inputs, AttrMap attrs,
                               int numOutputs) {
  return ctx_.graph.addNode(op, std::move(inputs), std::move(attrs), loc_, numOutputs);
}

const onnx::AttributeProto* OnnxNode::attr(const char* name) const {
  for (const auto& a : proto_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

Status OnnxNode::checkAttrType(const onnx::AttributeProto& a, int type) const {
  if (a.type() == type) return Status::ok();
  if (a.type() == onnx::AttributeProto::UNDEFINED && fieldPresent(a, type)) return Status::ok();
  return fail("attribute '" + a.name() + "' must be " + attrTypeName(type) + ", got " +
              attrTypeName(a.type()));
}

Expected<int64_t> OnnxNode::attrInt(const char* name, int64_t def) const {
  const auto* a = attr(name);
  if (!a) return def;
  HGP_TRY(checkAttrType(*a, onnx::AttributeProto::INT));
  return int64_t(a->i());
}

Expected<double> OnnxNode::attrFloat(const char* name, double def) const {
  const auto* a = attr(name);
  if (!a) return def;
  HGP_TRY(checkAttrType(*a, onnx::AttributeProto::FLOAT));
  return double(a->f());
}

Expected<std::string> OnnxNode::attrString(const char* name, const std::string& def) const {
  const auto* a = attr(name);
  if (!a) return def;
  HGP_TRY(checkAttrType(*a, onnx::AttributeProto::STRING));
  return a->s();
}

Expected<std::vector<int64_t>> OnnxNode::attrInts(const char* name,
                                                  std::vector<int64_t> def) const {
  const auto* a = attr(name);
  if (!a) return def;
  HGP_TRY(checkAttrType(*a, onnx::AttributeProto::INTS));
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

Expected<std::vector<double>> OnnxNode::attrFloats(const char* name,
                                                   std::vector<double> def) const {
  const auto* a = attr(name);
  if (!a) return def;
  HGP_TRY(checkAttrType(*a, onnx::AttributeProto::FLOATS));
  return std::vector<double>(a->floats().begin(), a->floats().end());
}

Expected<TensorDataPtr> OnnxNode::attrTensor(const char* name) const {
  const auto* a = attr(name);
  if (!a) return TensorDataPtr();
  HGP_TRY(checkAttrType(*a, onnx::AttributeProto::TENSOR));
  // Constant tensors live inline; external data in attributes is not supported.
  HGP_ASSIGN_OR_RETURN(
      auto t, tensorFromProto(a->t(), "", "node '" + loc_ + "' attribute '" + a->name() + "'"));
  return TensorDataPtr(std::move(t));
}

Expected<int64_t> normalizeAxisFor(const OnnxNode& n, int64_t axis, int64_t rank,
                                   const char* what) {
  if (axis < -rank || axis >= rank)
    return n.fail(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
                  std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

Expected<int64_t> checkedProduct(const OnnxNode& n, const Shape& dims) {
  int64_t p = 1;
  for (int64_t d : dims) {
    if (d < 0) return n.fail("negative dim in " + shapeToString(dims));
    if (d > 0 && p > kMaxTensorElements / d)
      return n.fail("shape " + shapeToString(dims) + " has more than 2^40 elements");
    p *= d;
  }
  return p;
}

bool followBatch(ImportContext& ctx, std::vector<int64_t>& shape, int64_t leadingDim) {
  int64_t from = ctx.exportBatch, to = ctx.options.batch;
  if (from <= 0 || to <= 0 || from == to || shape.empty() || shape[0] != from) return false;
  if (leadingDim >= 0 ? leadingDim != to : shape.size() < 2) return false;
  shape[0] = to;
  ++ctx.rebatchedShapes;
  return true;
}

} // namespace hgp
