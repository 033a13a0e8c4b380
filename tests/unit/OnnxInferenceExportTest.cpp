// Unit tests for how the frontend reads inference-mode exports (docs/training.md, "Inference
// exports"): BatchNormalization in inference mode trains in training mode unless frozen, and a
// PyTorch model without any normalization gets the folded-BatchNorm warning.
#include "frontends/onnx/OnnxImporter.h"
#include "tests/frontend/OnnxModelBuilder.h"

#include <gtest/gtest.h>

namespace hgp {
namespace {

using test::countOps;
using test::findOp;
using test::OnnxModelBuilder;
using test::setInt;

/// Conv -> BatchNormalization (training_mode as given, opset 15) -> y.
OnnxModelBuilder convBn(const std::string& producer, int trainingMode, bool withBn = true) {
  OnnxModelBuilder b(15, 8, producer);
  b.input("x", {2, 3, 4, 4});
  b.initializer("w", {2, 3, 1, 1});
  b.node("Conv", {"x", "w"}, {withBn ? "c" : "y"});
  if (withBn) {
    for (const char* p : {"scale", "bias", "mean", "var"}) b.initializer(p, {2});
    auto& bn = b.node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"y"}, "bn");
    if (trainingMode >= 0) setInt(bn, "training_mode", trainingMode);
  }
  b.output("y");
  return b;
}

Expected<OnnxImportResult> importWith(const OnnxModelBuilder& b, bool retrain) {
  OnnxImportOptions o;
  o.trainInferenceBatchNorm = retrain;
  return b.import(o);
}

bool mentions(const std::vector<std::string>& warnings, const std::string& what) {
  for (const auto& w : warnings)
    if (w.find(what) != std::string::npos) return true;
  return false;
}

TEST(OnnxInferenceExportTest, InferenceBatchNormTrainsInTrainingModeAndSaysSo) {
  auto r = importWith(convBn("pytorch", 0), /*retrain=*/true);
  ASSERT_TRUE(r.hasValue()) << r.status().toString();
  const Graph& g = *r->graph;
  EXPECT_EQ(countOps(g, OpKind::BatchNorm), 0);
  ASSERT_TRUE(findOp(g, OpKind::BatchNormTrain));
  const Node* upd = findOp(g, OpKind::BnRunningUpdate);
  ASSERT_TRUE(upd);
  // The node's own momentum (ONNX's default 0.9 here), PyTorch's unbiased running variance.
  EXPECT_FLOAT_EQ(float(upd->attrs().getFloat("momentum")), 0.9f);
  EXPECT_EQ(upd->attrs().getInt("unbiased"), 1);
  ASSERT_EQ(g.carries().size(), 2u);
  EXPECT_EQ(g.carries()[0].state->name(), "mean");
  EXPECT_EQ(r->info.retrainedBatchNorms, 1);
  EXPECT_EQ(r->info.frozenBatchNorms, 0);
  EXPECT_TRUE(mentions(r->info.warnings, "1 BatchNormalization nodes are in inference mode"));
  EXPECT_TRUE(mentions(r->info.warnings, "--freeze-bn"));
  EXPECT_FALSE(mentions(r->info.warnings, "folded"));
}

TEST(OnnxInferenceExportTest, FrozenInferenceBatchNormStaysInInferenceMode) {
  auto r = importWith(convBn("pytorch", 0), /*retrain=*/false);
  ASSERT_TRUE(r.hasValue()) << r.status().toString();
  EXPECT_TRUE(findOp(*r->graph, OpKind::BatchNorm));
  EXPECT_FALSE(findOp(*r->graph, OpKind::BatchNormTrain));
  EXPECT_TRUE(r->graph->carries().empty());
  EXPECT_EQ(r->info.frozenBatchNorms, 1);
  EXPECT_TRUE(r->info.warnings.empty());
}

TEST(OnnxInferenceExportTest, TrainingModeBatchNormNeedsNoWarning) {
  auto r = importWith(convBn("pytorch", 1), /*retrain=*/true);
  ASSERT_TRUE(r.hasValue()) << r.status().toString();
  EXPECT_EQ(r->info.trainingBatchNorms, 1);
  EXPECT_EQ(r->info.retrainedBatchNorms, 0);
  EXPECT_TRUE(r->info.warnings.empty());
}

TEST(OnnxInferenceExportTest, PytorchModelWithoutNormalizationWarnsOfFoldedBatchNorm) {
  auto r = importWith(convBn("pytorch", -1, /*withBn=*/false), /*retrain=*/true);
  ASSERT_TRUE(r.hasValue()) << r.status().toString();
  ASSERT_EQ(r->info.warnings.size(), 1u);
  EXPECT_TRUE(mentions(r->info.warnings, "eval-mode export folded them"));
  EXPECT_TRUE(mentions(r->info.warnings, "training=torch.onnx.TrainingMode.TRAINING"));
  // Other producers do not fold BatchNorm behind the user's back.
  auto other = importWith(convBn("other", -1, /*withBn=*/false), /*retrain=*/true);
  ASSERT_TRUE(other.hasValue());
  EXPECT_TRUE(other->info.warnings.empty());
}

} // namespace
} // namespace hgp
