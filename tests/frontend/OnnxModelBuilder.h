// OnnxModelBuilder.h - builds small ONNX models in C++ for the frontend's tests.
//
// Tests describe a model node by node with the generated onnx protobuf classes and import the
// serialized bytes, exactly as a file would arrive:
//
//   OnnxModelBuilder b;
//   b.input("x", {-1, 3, 8, 8});          // -1: the symbolic batch dim "N"
//   b.initializer("w", {4, 3, 3, 3}, ones);
//   auto& conv = b.node("Conv", {"x", "w"}, {"y"});
//   setInts(conv, "pads", {1, 1, 1, 1});
//   b.output("y");
//   auto r = b.import({.batch = 2});
//
// importOk() and importError() wrap the import with the checks most tests want.
#pragma once

#include "ir/Printer.h"
#include "frontends/onnx/OnnxImporter.h"

#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>
#include <vector>

namespace hgp::test {

inline void setInt(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void setFloat(onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void setString(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
inline void setInts(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void setFloats(onnx::NodeProto& n, const std::string& name, const std::vector<float>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}

/// A tensor proto with float_data (or int64_data) set.
inline onnx::TensorProto floatTensor(const std::string& name, const std::vector<int64_t>& dims,
                                     const std::vector<float>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  for (float v : values) t.add_float_data(v);
  return t;
}
inline onnx::TensorProto int64Tensor(const std::string& name, const std::vector<int64_t>& dims,
                                     const std::vector<int64_t>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t.add_dims(d);
  for (int64_t v : values) t.add_int64_data(v);
  return t;
}

class OnnxModelBuilder {
public:
  explicit OnnxModelBuilder(int64_t opset = 17, int64_t irVersion = 8,
                            const std::string& producer = "hgp-test") {
    model.set_ir_version(irVersion);
    model.set_producer_name(producer);
    auto* o = model.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    model.mutable_graph()->set_name("test");
  }

  onnx::GraphProto& graph() { return *model.mutable_graph(); }

  /// A graph input; a dim of -1 is the symbolic batch dim "N".
  void input(const std::string& name, const std::vector<int64_t>& dims,
             int32_t elemType = onnx::TensorProto::FLOAT) {
    auto* vi = graph().add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elemType);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = shape->add_dim();
      if (d < 0)
        dim->set_dim_param("N");
      else
        dim->set_dim_value(d);
    }
  }
  /// A graph output; with `dims`, its shape is declared too (a dim of -1 is "N").
  void output(const std::string& name, int32_t elemType = onnx::TensorProto::FLOAT,
              std::optional<std::vector<int64_t>> dims = std::nullopt) {
    auto* vi = graph().add_output();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elemType);
    if (!dims) return;
    auto* shape = tt->mutable_shape();
    for (int64_t d : *dims) {
      auto* dim = shape->add_dim();
      if (d < 0)
        dim->set_dim_param("N");
      else
        dim->set_dim_value(d);
    }
  }
  /// A float initializer; `values` empty means all ones.
  void initializer(const std::string& name, const std::vector<int64_t>& dims,
                   std::vector<float> values = {}) {
    if (values.empty()) {
      int64_t n = 1;
      for (int64_t d : dims) n *= d;
      values.assign(size_t(n), 1.0f);
    }
    *graph().add_initializer() = floatTensor(name, dims, values);
  }
  void initializerI64(const std::string& name, const std::vector<int64_t>& dims,
                      const std::vector<int64_t>& values) {
    *graph().add_initializer() = int64Tensor(name, dims, values);
  }
  /// A Constant node producing an int64 tensor (1-D, or a scalar when `dims` is empty).
  void constantI64(const std::string& name, const std::vector<int64_t>& dims,
                   const std::vector<int64_t>& values) {
    auto& n = node("Constant", {}, {name});
    auto* a = n.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = int64Tensor("", dims, values);
  }
  void constantF32(const std::string& name, const std::vector<int64_t>& dims,
                   const std::vector<float>& values) {
    auto& n = node("Constant", {}, {name});
    auto* a = n.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = floatTensor("", dims, values);
  }
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    auto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return *n;
  }

  std::string bytes() const { return model.SerializeAsString(); }

  Expected<OnnxImportResult> import(const OnnxImportOptions& options = {},
                                    const std::string& baseDir = "") const {
    std::string b = bytes();
    return importOnnxBytes(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(b.data()), b.size()), baseDir,
        options);
  }

  onnx::ModelProto model;
};

/// Imports, checks that the IR verifies, and returns the graph.
inline std::unique_ptr<Graph> importOk(const OnnxModelBuilder& b, int64_t batch = 0) {
  OnnxImportOptions o;
  o.batch = batch;
  auto r = b.import(o);
  EXPECT_TRUE(r.hasValue()) << r.status().toString();
  if (!r) return nullptr;
  Status v = verifyGraph(*r->graph);
  EXPECT_TRUE(v.isOk()) << v.toString() << "\n" << printGraph(*r->graph);
  return std::move(r->graph);
}

/// The error message of an import that must fail with InvalidModel.
inline std::string importError(const OnnxModelBuilder& b, int64_t batch = 0) {
  OnnxImportOptions o;
  o.batch = batch;
  auto r = b.import(o);
  EXPECT_FALSE(r.hasValue());
  if (r) return "";
  EXPECT_EQ(r.status().code(), ErrorCode::InvalidModel);
  return r.status().message();
}

/// The first node of kind `op`.
inline const Node* findOp(const Graph& g, OpKind op) {
  for (const Node* n : g.nodes())
    if (n->op() == op) return n;
  return nullptr;
}

inline int countOps(const Graph& g, OpKind op) {
  int c = 0;
  for (const Node* n : g.nodes()) c += n->op() == op;
  return c;
}

} // namespace hgp::test
