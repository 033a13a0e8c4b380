// ONNX conformance: the node tests of libonnx-testdata (data/node), the PyTorch-converted and
// PyTorch-operator tests (data/pytorch-converted, data/pytorch-operator) and the small models of
// data/simple, executed by a backend and compared with ONNX's expected outputs
// (|got - want| <= 1e-5 + 1e-4 |want|).
//
// A test runs when every op of its model is one the frontend supports. Operands that hgpc needs at
// compile time (Reshape's shape, Slice's starts, ...) are bound from the test's inputs, as a
// deployment would bind constants. Tests that use supported ops but cannot run are skipped with a
// reason from kSkips below; anything else that fails is a failure. The totals are printed.
//
// The same suite runs on the CUDA backend (hgp_conformance --backend cuda, label gpu).
#include "ir/Printer.h"
#include "compiler/plan/PlanEmitter.h"
#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/OnnxTensor.h"
#include "passes/Pass.h"
#include "passes/Pipeline.h"
#include "runtime/Backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace hgp {
namespace {

namespace fs = std::filesystem;

std::string gBackend = "cpu";

/// Tests whose ops hgpc supports but which cannot run, with the reason. A fragment of the name,
/// or the whole name followed by '$'.
struct Skip {
  const char* fragment;
  const char* reason;
};
const Skip kSkips[] = {
    {"uint8", "integer arithmetic: hgpc computes in float32"},
    {"int8", "integer arithmetic: hgpc computes in float32"},
    {"test_edge_pad", "int32 data: hgpc's Pad computes in float32"},
    {"test_reflect_pad", "int32 data: hgpc's Pad computes in float32"},
    {"_shape_zero", "tensors with a zero dim are not supported"},
    {"test_slice_start_out_of_bounds", "tensors with a zero dim are not supported"},
    {"test_reshape_allowzero_reordered", "tensors with a zero dim are not supported"},
    {"test_split_zero_size_splits", "tensors with a zero dim are not supported"},
    {"dropout_default_mask", "the Dropout mask output is not supported"},
    {"dropout_mask", "the Dropout mask output is not supported"},
    {"dropout_zero_ratio_mask", "the Dropout mask output is not supported"},
    // test_training_dropout_zero_ratio (ratio 0: the identity) runs; the others draw masks.
    {"test_training_dropout_default", "random masks: hgpc draws from Philox, the expected outputs from numpy's RNG"},
    {"test_training_dropout_mask", "random masks: hgpc draws from Philox, the expected outputs from numpy's RNG"},
    {"test_training_dropout$", "random masks: hgpc draws from Philox, the expected outputs from numpy's RNG"},
    {"test_bernoulli", "random masks: hgpc draws from Philox, the expected outputs from numpy's RNG"},
    {"test_pow_types_float32_uint", "uint32 and uint64 tensors are not supported"},
    {"test_pow_types", "an exponent of differing elements: hgpc lowers Pow only with a constant exponent of one value (1, 2, 3, 0.5, -0.5, -1, -2)"},
    {"test_pow$", "an exponent of differing elements: hgpc lowers Pow only with a constant exponent of one value (1, 2, 3, 0.5, -0.5, -1, -2)"},
    {"test_pow_example", "an exponent of differing elements: hgpc lowers Pow only with a constant exponent of one value (1, 2, 3, 0.5, -0.5, -1, -2)"},
    {"test_operator_pow$", "an exponent of differing elements: hgpc lowers Pow only with a constant exponent of one value (1, 2, 3, 0.5, -0.5, -1, -2)"},
    {"test_pow_bcast_array", "an exponent of differing elements: hgpc lowers Pow only with a constant exponent of one value (1, 2, 3, 0.5, -0.5, -1, -2)"},
    {"test_equal", "int32 operands: hgpc compares in float dtypes"},
    {"test_max_int", "integer operands: hgpc computes in float dtypes"},
    {"test_min_int", "integer operands: hgpc computes in float dtypes"},
    {"test_max_uint", "integer operands: hgpc computes in float dtypes"},
    {"test_min_uint", "integer operands: hgpc computes in float dtypes"},
    {"test_max_float64", "float64 tensors: hgpc computes in float32 and 16-bit floats"},
    {"test_min_float64", "float64 tensors: hgpc computes in float32 and 16-bit floats"},
    {"test_where_long_example", "int64 operands: hgpc selects in float dtypes"},
    {"with_argmax", "the MaxPool Indices output is not supported"},
    {"test_identity_opt", "optional and sequence types are not supported"},
    {"test_identity_sequence", "optional and sequence types are not supported"},
    {"test_adagrad", "ai.onnx.preview.training ops"},
    {"test_adam", "ai.onnx.preview.training ops"},
    {"momentum", "ai.onnx.preview.training ops"},
    // FLOAT to FLOAT16 and to BFLOAT16 (what mixed precision relies on) and back run.
    {"test_cast_FLOAT_to_BFLOAT16", "the expected values truncate to bfloat16 (the data's "
                                    "generator shifts the bits); hgpc rounds to nearest even, as "
                                    "PyTorch does"},
    {"castlike_FLOAT_to_BFLOAT16_expanded", "the data's 'like' input has shape [1] where the model "
                                            "declares [3, 4]"},
    {"castlike_BFLOAT16_to_FLOAT_expanded", "the data's 'like' input has shape [1] where the model "
                                            "declares [3, 4]"},
    {"DOUBLE", "float64 tensors: hgpc computes in float32 and 16-bit floats"},
    {"STRING", "string tensors are not supported"},
    {"test_operator_add_", "float64 data: hgpc computes in float32 and 16-bit floats"},
    {"test_operator_addconstant", "float64 data: hgpc computes in float32 and 16-bit floats"},
    {"test_operator_non_float_params", "integer arithmetic: hgpc computes in float32"},
    {"test_Embedding", "an embedding: a Gather of a trainable parameter by indices that are "
                       "not a view of it (hgpc never folds a parameter)"},
    {"test_globalaveragepool", "written for opset 1"},
    {"test_globalmaxpool", "written for opset 1"},
    {"test_not_", "written for opset 1"},
    {"test_softplus", "written for opset 1"},
    {"test_softsign", "written for opset 1"},
};

/// The reason a test is skipped: the first entry whose fragment the name contains (a fragment
/// ending in '$' must be the whole name).
const char* skipReason(const std::string& name) {
  for (const Skip& s : kSkips) {
    std::string f = s.fragment;
    if (!f.empty() && f.back() == '$' ? name == f.substr(0, f.size() - 1)
                                      : name.find(f) != std::string::npos)
      return s.reason;
  }
  return nullptr;
}

bool readProto(const fs::path& p, google::protobuf::MessageLite& m) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  return m.ParseFromString(ss.str());
}

/// ONNX's test data of this vintage stores bfloat16 tensors as UINT16 (the same bits): read such
/// a tensor as the BFLOAT16 that the graph value `vi` declares.
void bf16FromUint16(onnx::TensorProto& t, const onnx::ValueInfoProto& vi) {
  if (t.data_type() == onnx::TensorProto::UINT16 && vi.type().has_tensor_type() &&
      vi.type().tensor_type().elem_type() == onnx::TensorProto::BFLOAT16)
    t.set_data_type(onnx::TensorProto::BFLOAT16);
}

enum class Outcome { Passed, Failed, Skipped, Unsupported };

struct Result {
  Outcome outcome;
  std::string detail;
};

/// Compares one output; returns "" when it matches.
std::string compare(const TensorData& want, const std::vector<uint8_t>& got, const TensorType& t) {
  if (want.type.shape != t.shape) return "shape " + shapeToString(t.shape) + " != " + shapeToString(want.type.shape);
  int64_t n = t.numElements();
  for (int64_t i = 0; i < n; ++i) {
    if (isFloatDType(t.dtype)) {
      double w = want.elementAsDouble(i);
      TensorData g;
      g.type = t;
      g.bytes = got;
      double h = g.elementAsDouble(i);
      if (std::isnan(w) && std::isnan(h)) continue;
      if (std::isinf(w) && w == h) continue;
      if (!(std::fabs(h - w) <= 1e-5 + 1e-4 * std::fabs(w))) {
        std::ostringstream m;
        m << "element " << i << ": got " << h << ", want " << w;
        return m.str();
      }
    } else {
      TensorData g;
      g.type = t;
      g.bytes = got;
      if (g.elementAsInt(i) != want.elementAsInt(i))
        return "element " + std::to_string(i) + " differs";
    }
  }
  return "";
}

Result runTest(const fs::path& dir) {
  std::string name = dir.filename().string();
  onnx::ModelProto model;
  if (!readProto(dir / "model.onnx", model)) return {Outcome::Skipped, "model.onnx does not parse"};
  const auto& graph = model.graph();
  std::map<std::string, int> inputIndex;
  for (int i = 0; i < graph.input_size(); ++i) inputIndex[graph.input(i).name()] = i;

  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return {Outcome::Skipped, "no test data"};

  for (const fs::path& set : sets) {
    // Bind compile-time operands from this data set.
    OnnxImportOptions opts;
    std::set<std::string> bound;
    for (const auto& node : graph.node())
      for (int k = 0; k < node.input_size(); ++k) {
        auto it = inputIndex.find(node.input(k));
        if (it == inputIndex.end() || !isStaticOperand(node.op_type(), k)) continue;
        onnx::TensorProto t;
        if (!readProto(set / ("input_" + std::to_string(it->second) + ".pb"), t)) continue;
        auto d = tensorFromProto(t, "", "input");
        if (!d) continue;
        opts.constantInputs[node.input(k)] = *d;
        bound.insert(node.input(k));
      }
    std::string bytes = model.SerializeAsString();
    auto imported = importOnnxBytes(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "",
        opts);
    if (!imported) {
      std::string msg = imported.status().message();
      if (msg.rfind("unsupported ops:", 0) == 0) return {Outcome::Unsupported, msg};
      if (const char* why = skipReason(name)) return {Outcome::Skipped, why};
      return {Outcome::Failed, "import: " + msg};
    }
    if (const char* why = skipReason(name)) return {Outcome::Skipped, why};
    Graph& g = *imported->graph;
    PassContext ctx;
    if (Status st = runPipeline(g, forwardPipeline(), ctx); !st) return {Outcome::Failed, st.toString()};
    ProgramSource prog{"forward", &g, {}};
    for (size_t i = 0; i < g.outputs().size(); ++i)
      prog.bindings["output." + std::to_string(i)] = g.outputs()[i]->name();
    // Runtime inputs: graph inputs not bound as constants, by their ONNX position.
    std::vector<std::pair<int, std::string>> runtimeInputs;
    for (const Value* v : g.graphValues())
      if (v->role() == TensorRole::Input) {
        auto it = inputIndex.find(v->name());
        if (it == inputIndex.end()) return {Outcome::Failed, "input " + v->name() + " not in the model"};
        runtimeInputs.push_back({it->second, v->name()});
        prog.bindings["in." + v->name()] = v->name();
      }
    EmitOptions eo;
    eo.meta.setString("precision", "fp32");
    auto emitted = emitPlan({prog}, eo);
    if (!emitted) return {Outcome::Failed, "emit: " + emitted.status().toString()};
    const Plan& plan = emitted->plan;
    std::unique_ptr<Backend> backend;
    if (gBackend == "cpu") {
      backend = createCpuBackend();
    } else {
      BackendOptions bo;
      auto b = createCudaBackend(bo);
      if (!b) return {Outcome::Skipped, "no GPU: " + b.status().message()};
      backend = std::move(*b);
    }
    if (Status st = backend->load(plan, InitData{emitted->data, {}}); !st)
      return {Outcome::Failed, "load: " + st.toString()};
    for (const auto& [index, valueName] : runtimeInputs) {
      onnx::TensorProto t;
      if (!readProto(set / ("input_" + std::to_string(index) + ".pb"), t))
        return {Outcome::Failed, "missing input " + std::to_string(index)};
      bf16FromUint16(t, graph.input(index));
      auto d = tensorFromProto(t, "", "input");
      if (!d) return {Outcome::Failed, d.status().toString()};
      int ti = plan.binding("in." + valueName);
      if ((*d)->bytes.size() != size_t(plan.tensors[size_t(ti)].bytes()))
        return {Outcome::Failed, "input " + valueName + " has an unexpected size"};
      if (Status st = backend->write(ti, (*d)->bytes.data()); !st) return {Outcome::Failed, st.toString()};
    }
    if (Status st = backend->run("forward"); !st) return {Outcome::Failed, "run: " + st.toString()};
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      onnx::TensorProto t;
      if (!readProto(set / ("output_" + std::to_string(i) + ".pb"), t)) continue;
      if (int(i) < graph.output_size()) bf16FromUint16(t, graph.output(int(i)));
      auto want = tensorFromProto(t, "", "output");
      if (!want) return {Outcome::Failed, want.status().toString()};
      int ti = plan.binding("output." + std::to_string(i));
      const PlanTensor& pt = plan.tensors[size_t(ti)];
      std::vector<uint8_t> got(size_t(pt.bytes()));
      if (Status st = backend->read(ti, got.data()); !st) return {Outcome::Failed, st.toString()};
      std::string diff = compare(**want, got, pt.type);
      if (!diff.empty())
        return {Outcome::Failed, set.filename().string() + " output " + std::to_string(i) + ": " + diff};
    }
  }
  return {Outcome::Passed, ""};
}

void runSuite(const char* root) {
  if (!fs::exists(root)) GTEST_SKIP() << root << " is missing (Debian package libonnx-testdata)";
  if (gBackend == "cuda") {
    auto probe = createCudaBackend(BackendOptions{});
    if (!probe) GTEST_SKIP() << "no usable GPU: " << probe.status().message();
  }
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  int counts[4] = {0, 0, 0, 0};
  std::map<std::string, int> skipReasons;
  for (const fs::path& d : dirs) {
    Result r = runTest(d);
    ++counts[int(r.outcome)];
    if (r.outcome == Outcome::Failed) ADD_FAILURE() << d.filename().string() << ": " << r.detail;
    if (r.outcome == Outcome::Skipped) ++skipReasons[r.detail];
  }
  std::printf("%s on %s: %d passed, %d failed, %d skipped, %d not applicable (ops hgpc does not "
              "support)\n",
              root, gBackend.c_str(), counts[0], counts[1], counts[2], counts[3]);
  for (const auto& [why, n] : skipReasons) std::printf("  skipped %3d: %s\n", n, why.c_str());
  EXPECT_GT(counts[0], 0);
}

/// The test data root: $HGP_ONNX_TESTDATA (a copy taken to a GPU machine), or Debian's.
std::string dataRoot() {
  const char* env = std::getenv("HGP_ONNX_TESTDATA");
  return env ? env : "/usr/share/libonnx-testdata/data";
}

TEST(ConformanceTest, NodeTests) { runSuite((dataRoot() + "/node").c_str()); }
TEST(ConformanceTest, PytorchConvertedTests) {
  runSuite((dataRoot() + "/pytorch-converted").c_str());
}
TEST(ConformanceTest, PytorchOperatorTests) { runSuite((dataRoot() + "/pytorch-operator").c_str()); }
TEST(ConformanceTest, SimpleTests) { runSuite((dataRoot() + "/simple").c_str()); }

} // namespace
} // namespace hgp

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--backend") hgp::gBackend = argv[i + 1];
  return RUN_ALL_TESTS();
}
