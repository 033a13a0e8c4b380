// Imports real PyTorch exports: torchvision classification models exported in training mode at
// opset 17 with a symbolic batch (tests/frontend/export_torchvision.py, run with Debian's
// /usr/bin/python3 at test time into the build folder). Skips when python3-torch is missing.
#include "ir/Printer.h"
#include "frontends/onnx/OnnxImporter.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace hgp {
namespace {

namespace fs = std::filesystem;

/// Exports `model` once per build folder; returns its path, or "" when the export cannot run.
std::string exportModel(const std::string& model) {
  fs::path dir = HGP_ONNX_TEST_DIR;
  fs::create_directories(dir);
  fs::path out = dir / (model + ".onnx");
  if (fs::exists(out)) return out.string();
  if (std::system("/usr/bin/python3 -c 'import torch, torchvision' >/dev/null 2>&1") != 0)
    return "";
  fs::path tmp = dir / (model + ".onnx.tmp");
  std::string cmd = "/usr/bin/python3 " HGP_SOURCE_DIR "/tests/frontend/export_torchvision.py " +
                    model + " " + tmp.string() + " 64 >" + (dir / (model + ".log")).string() +
                    " 2>&1";
  if (std::system(cmd.c_str()) != 0) return "!" + (dir / (model + ".log")).string();
  fs::rename(tmp, out);
  return out.string();
}

class OnnxTorchvisionTest : public ::testing::TestWithParam<const char*> {};

TEST_P(OnnxTorchvisionTest, TrainingModeExportImportsAndVerifies) {
  std::string path = exportModel(GetParam());
  if (path.empty()) GTEST_SKIP() << "python3-torch/torchvision are not installed";
  ASSERT_NE(path[0], '!') << "export failed; see " << path.substr(1);
  OnnxImportOptions opts;
  opts.batch = 2;
  auto r = importOnnxFile(path, opts);
  ASSERT_TRUE(r.hasValue()) << r.status().toString();
  const Graph& g = *r->graph;
  Status v = verifyGraph(g);
  EXPECT_TRUE(v.isOk()) << v.toString();
  EXPECT_EQ(r->info.batch, 2);
  EXPECT_EQ(r->info.opsetVersion, 17);
  EXPECT_EQ(r->info.producerName, "pytorch");
  ASSERT_GE(g.outputs().size(), 1u);
  EXPECT_EQ(g.outputs()[0]->name(), "logits");
  EXPECT_EQ(g.outputs()[0]->shape(), (Shape{2, 10}));
  // Every BatchNormalization trains: its running statistics are states carried to their update.
  int bnTrain = 0, states = 0;
  for (const Node* n : g.nodes()) bnTrain += n->op() == OpKind::BatchNormTrain;
  for (const Value* v : g.graphValues()) {
    states += v->role() == TensorRole::State;
    if (v->role() == TensorRole::Param || v->role() == TensorRole::State) {
      EXPECT_EQ(v->data()->onnxName, v->name());
    }
  }
  if (std::string(GetParam()) != "squeezenet1_1") {
    EXPECT_GT(bnTrain, 0);
  }
  EXPECT_EQ(states, 2 * bnTrain);
  EXPECT_EQ(int(g.carries().size()), 2 * bnTrain);
}

INSTANTIATE_TEST_SUITE_P(Models, OnnxTorchvisionTest,
                         ::testing::Values("resnet18", "mobilenet_v2", "squeezenet1_1",
                                           "shufflenet_v2_x0_5", "googlenet", "densenet121"));

} // namespace
} // namespace hgp
