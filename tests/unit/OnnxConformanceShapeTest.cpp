// Runs the ONNX node tests of libonnx-testdata through the importer, for every test whose ops the
// frontend supports, and checks the result types (dtype and shape) against the expected outputs.
// Operands that hgpc needs at compile time are bound from the test's inputs, as the conformance
// harness does. Numeric results are the CPU backend's business; this checks the lowering's
// shapes, attributes defaults and folding. Tests the IR cannot express are listed with reasons.
#include "ir/Printer.h"
#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/OnnxTensor.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace hgp {
namespace {

namespace fs = std::filesystem;

const char* const kNodeTests = "/usr/share/libonnx-testdata/data/node";

bool readProto(const fs::path& p, google::protobuf::MessageLite& m) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return m.ParseFromString(ss.str());
}

/// Node tests the frontend rejects on purpose: a fragment of the test name, and why.
struct Rejection {
  const char* nameFragment;
  const char* reason;
};
const Rejection kExpectedRejections[] = {
    {"test_adagrad", "training ops of ai.onnx.preview.training; no default-domain opset"},
    {"test_adam", "training ops of ai.onnx.preview.training; no default-domain opset"},
    {"momentum", "training ops of ai.onnx.preview.training; no default-domain opset"},
    {"uint8", "IR compute ops are f32 only"},
    {"int8", "IR compute ops are f32 only"},
    {"test_edge_pad", "IR compute ops are f32 only (i32 input)"},
    {"test_reflect_pad", "IR compute ops are f32 only (i32 input)"},
    {"test_cast", "no run-time Cast between dtypes (the IR has no Cast op); no strings"},
    {"_shape_zero", "tensors with a zero dim are not supported"},
    {"test_slice_start_out_of_bounds", "tensors with a zero dim are not supported"},
    {"test_reshape_allowzero_reordered", "tensors with a zero dim are not supported"},
    {"test_split_zero_size_splits", "tensors with a zero dim are not supported"},
    {"dropout_default_mask", "the Dropout mask output is not supported"},
    {"dropout_mask", "the Dropout mask output is not supported"},
    {"dropout_zero_ratio_mask", "the Dropout mask output is not supported"},
    {"with_argmax", "the MaxPool Indices output is not supported"},
    {"test_bernoulli", "Bernoulli with per-element or run-time probabilities (hgpc's has one constant)"},
    {"test_equal", "int32 operands (comparisons compute in float dtypes)"},
    {"test_max_int", "integer operands (Max computes in float dtypes)"},
    {"test_min_int", "integer operands (Min computes in float dtypes)"},
    {"test_max_uint", "integer operands (Max computes in float dtypes)"},
    {"test_min_uint", "integer operands (Min computes in float dtypes)"},
    {"test_max_float64", "float64 operands (IR compute ops are f32, bf16 or f16)"},
    {"test_min_float64", "float64 operands (IR compute ops are f32, bf16 or f16)"},
    {"test_where_long_example", "int64 operands (Where selects in float dtypes)"},
    {"test_pow", "an exponent of differing elements (hgpc lowers Pow only with a constant exponent of one value), or uint32/uint64 data"},
    {"test_identity_opt", "optional and sequence types are not supported"},
    {"test_identity_sequence", "optional and sequence types are not supported"},
    // Tests written for opsets below 7.
    {"test_elu", "opset 6"},
    {"test_globalaveragepool", "opset 1"},
    {"test_globalmaxpool", "opset 1"},
    {"test_hardsigmoid", "opset 6"},
    {"test_instancenorm", "opset 6"},
    {"test_not_", "opset 1"},
    {"test_reduce_log_sum", "opset 6"},
    {"test_selu", "opset 6"},
    {"test_softplus", "opset 1"},
    {"test_softsign", "opset 1"},
};

bool rejectionExpected(const std::string& name) {
  for (const Rejection& r : kExpectedRejections)
    if (name.find(r.nameFragment) != std::string::npos) return true;
  return false;
}

TEST(OnnxConformanceShapeTest, SupportedNodeTestsImportWithExpectedTypes) {
  if (!fs::exists(kNodeTests)) GTEST_SKIP() << "libonnx-testdata is not installed";
  int imported = 0, rejected = 0;
  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(kNodeTests)) dirs.push_back(e.path().string());
  std::sort(dirs.begin(), dirs.end());
  for (const std::string& dir : dirs) {
    std::string name = fs::path(dir).filename().string();
    onnx::ModelProto model;
    if (!readProto(fs::path(dir) / "model.onnx", model)) continue;
    OnnxImportOptions opts;
    std::map<std::string, int> inputIndex;
    for (int i = 0; i < model.graph().input_size(); ++i)
      inputIndex[model.graph().input(i).name()] = i;
    for (const auto& node : model.graph().node())
      for (int k = 0; k < node.input_size(); ++k) {
        auto it = inputIndex.find(node.input(k));
        if (it == inputIndex.end() || !isStaticOperand(node.op_type(), k)) continue;
        onnx::TensorProto t;
        if (!readProto(fs::path(dir) / "test_data_set_0" /
                           ("input_" + std::to_string(it->second) + ".pb"),
                       t))
          continue;
        auto d = tensorFromProto(t, "", "input");
        if (d) opts.constantInputs[node.input(k)] = *d;
      }
    std::string bytes = model.SerializeAsString();
    auto res = importOnnxBytes(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "",
        opts);
    if (!res) {
      std::string msg = res.status().message();
      if (msg.rfind("unsupported ops:", 0) == 0) continue;
      ++rejected;
      EXPECT_TRUE(rejectionExpected(name)) << name << ": " << msg;
      EXPECT_EQ(res.status().code(), ErrorCode::InvalidModel) << name;
      continue;
    }
    ++imported;
    const Graph& g = *res->graph;
    Status v = verifyGraph(g);
    EXPECT_TRUE(v.isOk()) << name << ": " << v.toString();
    ASSERT_EQ(g.outputs().size(), size_t(model.graph().output_size())) << name;
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      onnx::TensorProto t;
      if (!readProto(fs::path(dir) / "test_data_set_0" / ("output_" + std::to_string(i) + ".pb"),
                     t))
        continue;
      Shape dims(t.dims().begin(), t.dims().end());
      EXPECT_EQ(shapeToString(g.outputs()[i]->shape()), shapeToString(dims))
          << name << " output " << i;
      auto dt = dtypeFromOnnx(t.data_type(), "output");
      if (dt) {
        EXPECT_EQ(dtypeName(g.outputs()[i]->dtype()), std::string(dtypeName(*dt)))
            << name << " output " << i;
      }
    }
  }
  std::cout << "imported " << imported << " node tests, rejected " << rejected << "\n";
  EXPECT_GT(imported, 100);
}

} // namespace
} // namespace hgp
