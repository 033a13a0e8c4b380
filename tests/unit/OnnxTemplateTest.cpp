// Tests of external data and of buildOnnxTemplate: the recorded raw_data offsets must be exact
// (patching bytes there changes exactly that initializer), every initializer must end up inline,
// and the inference form must drop the training-only parts.
#include "ir/Printer.h"
#include "frontends/onnx/OnnxImporter.h"
#include "tests/frontend/OnnxModelBuilder.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace hgp {
namespace {

namespace fs = std::filesystem;
using test::OnnxModelBuilder;
using test::setInt;

/// Whether Debian's python3-onnx accepts the model at `path` (true when it is not installed).
bool onnxCheckerAccepts(const fs::path& path) {
  if (std::system("/usr/bin/python3 -c 'import onnx' >/dev/null 2>&1") != 0) return true;
  std::string cmd = "/usr/bin/python3 -c 'import onnx, sys; "
                    "onnx.checker.check_model(onnx.load(sys.argv[1]))' " +
                    path.string();
  return std::system(cmd.c_str()) == 0;
}

/// A fresh folder under the build tree's temp space for one test.
fs::path scratchDir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("hgp-onnx-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void writeFile(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

/// A training-mode model with typed-field, raw and external initializers, BN and Dropout.
fs::path writeTrainingModel(const fs::path& dir) {
  OnnxModelBuilder b(15, 8, "pytorch");
  b.input("x", {2, 3, 4, 4});
  b.initializer("conv.weight", {3, 3, 1, 1}); // float_data
  auto& raw = *b.graph().add_initializer();   // raw_data
  raw.set_name("conv.bias");
  raw.set_data_type(onnx::TensorProto::FLOAT);
  raw.add_dims(3);
  float bias[3] = {0.5f, -0.5f, 0.25f};
  raw.set_raw_data(bias, sizeof bias);
  // External data: scale in weights.bin at offset 4.
  float scale[3] = {1.0f, 2.0f, 3.0f};
  std::string blob(4, '\0');
  blob.append(reinterpret_cast<const char*>(scale), sizeof scale);
  writeFile(dir / "weights.bin", blob);
  auto& ext = *b.graph().add_initializer();
  ext.set_name("bn.weight");
  ext.set_data_type(onnx::TensorProto::FLOAT);
  ext.add_dims(3);
  ext.set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [k, v] : {std::pair{"location", "weights.bin"}, {"offset", "4"}, {"length", "12"}}) {
    auto* e = ext.add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  b.initializer("bn.bias", {3}, {0.0f, 0.0f, 0.0f});
  b.initializer("bn.running_mean", {3}, {0.0f, 0.0f, 0.0f});
  b.initializer("bn.running_var", {3}, {1.0f, 1.0f, 1.0f});
  b.node("Conv", {"x", "conv.weight", "conv.bias"}, {"c"}, "conv");
  auto& bn = b.node("BatchNormalization",
                    {"c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"},
                    {"n", "mean_out", "var_out"}, "bn");
  setInt(bn, "training_mode", 1);
  b.constantF32("ratio", {}, {0.5f});
  auto& t = b.node("Constant", {}, {"train"});
  auto* a = t.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::BOOL);
  a->mutable_t()->set_raw_data(std::string(1, '\1'));
  b.node("Dropout", {"n", "ratio", "train"}, {"y"}, "drop");
  b.initializerI64("shape", {2}, {2, -1}); // a non-float initializer
  b.node("Reshape", {"y", "shape"}, {"out"});
  b.output("out", onnx::TensorProto::FLOAT, std::vector<int64_t>{2, 48});
  fs::path path = dir / "model.onnx";
  writeFile(path, b.bytes());
  return path;
}

onnx::ModelProto parse(const std::vector<uint8_t>& bytes) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromArray(bytes.data(), int(bytes.size())));
  return m;
}

const onnx::TensorProto* findInit(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

TEST(OnnxTemplateTest, ExternalDataInsideTheModelFolderLoads) {
  fs::path dir = scratchDir("ext");
  auto r = importOnnxFile(writeTrainingModel(dir).string());
  ASSERT_TRUE(r.hasValue()) << r.status().toString();
  const Value* scale = r->graph->findValue("bn.weight");
  ASSERT_TRUE(scale && scale->data());
  EXPECT_EQ(scale->data()->elementAsDouble(0), 1.0);
  EXPECT_EQ(scale->data()->elementAsDouble(2), 3.0);
  EXPECT_EQ(scale->data()->onnxName, "bn.weight");
  EXPECT_TRUE(verifyGraph(*r->graph).isOk());
  fs::remove_all(dir);
}

TEST(OnnxTemplateTest, OffsetsPointAtEachInitializersRawData) {
  fs::path dir = scratchDir("offsets");
  fs::path path = writeTrainingModel(dir);
  auto t = buildOnnxTemplate(path.string(), /*inferenceForm=*/false);
  ASSERT_TRUE(t.hasValue()) << t.status().toString();
  onnx::ModelProto original = parse(t->bytes);
  ASSERT_EQ(t->initializerOffsets.size(), size_t(original.graph().initializer_size()));
  for (const auto& init : original.graph().initializer()) {
    EXPECT_EQ(init.data_location(), onnx::TensorProto::DEFAULT) << init.name();
    EXPECT_EQ(init.float_data_size() + init.int64_data_size() + init.external_data_size(), 0)
        << init.name() << " still has typed or external data";
    ASSERT_TRUE(init.has_raw_data()) << init.name();
  }
  EXPECT_EQ(findInit(original, "bn.weight")->raw_data().size(), 12u);

  // Patch every byte of one initializer's raw_data; only that initializer may change.
  for (const auto& [name, offset] : t->initializerOffsets) {
    const onnx::TensorProto* before = findInit(original, name);
    ASSERT_TRUE(before) << name;
    size_t len = before->raw_data().size();
    ASSERT_LE(size_t(offset) + len, t->bytes.size());
    EXPECT_EQ(std::memcmp(t->bytes.data() + offset, before->raw_data().data(), len), 0) << name;
    std::vector<uint8_t> patched = t->bytes;
    for (size_t i = 0; i < len; ++i) patched[size_t(offset) + i] = uint8_t(0xA5 ^ i);
    onnx::ModelProto m = parse(patched);
    for (const auto& init : m.graph().initializer()) {
      const onnx::TensorProto* o = findInit(original, init.name());
      if (init.name() == name) {
        EXPECT_NE(init.raw_data(), o->raw_data()) << name;
        EXPECT_EQ(init.raw_data().size(), len);
        EXPECT_EQ(uint8_t(init.raw_data()[0]), 0xA5);
      } else {
        EXPECT_EQ(init.raw_data(), o->raw_data())
            << "patching " << name << " changed " << init.name();
      }
    }
    onnx::ModelProto a = m, b = original;
    a.mutable_graph()->clear_initializer();
    b.mutable_graph()->clear_initializer();
    EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString()) << "patching changed the graph";
  }
  fs::remove_all(dir);
}

TEST(OnnxTemplateTest, InferenceFormDropsTrainingParts) {
  fs::path dir = scratchDir("inference");
  fs::path path = writeTrainingModel(dir);
  auto t = buildOnnxTemplate(path.string(), /*inferenceForm=*/true);
  ASSERT_TRUE(t.hasValue()) << t.status().toString();
  onnx::ModelProto m = parse(t->bytes);
  for (const auto& n : m.graph().node()) {
    if (n.op_type() == "BatchNormalization") {
      EXPECT_EQ(n.output_size(), 1);
      for (const auto& a : n.attribute()) EXPECT_NE(a.name(), "training_mode");
    }
    if (n.op_type() == "Dropout") {
      EXPECT_EQ(n.input_size(), 2);
    }
  }
  // The inference form imports as inference: BatchNorm over the running statistics, no dropout.
  fs::path inf = dir / "inference.onnx";
  writeFile(inf, std::string(t->bytes.begin(), t->bytes.end()));
  auto r = importOnnxFile(inf.string());
  ASSERT_TRUE(r.hasValue()) << r.status().toString();
  bool bn = false;
  for (const Node* n : r->graph->nodes()) {
    EXPECT_NE(n->op(), OpKind::Dropout);
    EXPECT_NE(n->op(), OpKind::BatchNormTrain);
    bn = bn || n->op() == OpKind::BatchNorm;
  }
  EXPECT_TRUE(bn);
  EXPECT_TRUE(r->graph->carries().empty());
  EXPECT_TRUE(onnxCheckerAccepts(inf)) << "onnx.checker rejected the inference template";
  fs::remove_all(dir);
}

TEST(OnnxTemplateTest, TorchvisionExportTemplateRoundTrips) {
  fs::path model = fs::path(HGP_ONNX_TEST_DIR) / "resnet18.onnx";
  if (!fs::exists(model)) GTEST_SKIP() << "run OnnxTorchvisionTest first to export resnet18";
  auto t = buildOnnxTemplate(model.string(), /*inferenceForm=*/true);
  ASSERT_TRUE(t.hasValue()) << t.status().toString();
  EXPECT_EQ(t->initializerOffsets.size(), 102u);
  EXPECT_TRUE(t->initializerOffsets.count("layer4.1.bn2.running_var"));
  fs::path dir = scratchDir("resnet18");
  writeFile(dir / "inference.onnx", std::string(t->bytes.begin(), t->bytes.end()));
  EXPECT_TRUE(onnxCheckerAccepts(dir / "inference.onnx"));
  fs::remove_all(dir);
}

TEST(OnnxTemplateTest, TemplateErrorsAreInvalidModel) {
  auto r = buildOnnxTemplate(std::string(HGP_SOURCE_DIR) + "/tests/malformed/external_dotdot.onnx",
                             true);
  ASSERT_FALSE(r.hasValue());
  EXPECT_EQ(r.status().code(), ErrorCode::InvalidModel);
  EXPECT_NE(r.status().message().find("escapes the model folder"), std::string::npos);
}

} // namespace
} // namespace hgp
