// Unit tests for the ONNX importers, family by family: small models built in C++, imported, and
// checked for the IR ops and the attributes ONNX leaves implicit.
#include "frontends/onnx/OnnxImporter.h"
#include "ir/Printer.h"
#include "tests/frontend/OnnxModelBuilder.h"

#include <gtest/gtest.h>

#include <climits>

namespace hgp {
namespace {

using test::countOps;
using test::findOp;
using test::importError;
using test::importOk;
using test::OnnxModelBuilder;
using test::setFloat;
using test::setInt;
using test::setInts;
using test::setString;

// ---- Convolution -------------------------------------------------------------------------------

TEST(OnnxImporterTest, ConvSameUpperAndLowerResolvePads) {
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER"}) {
    OnnxModelBuilder b;
    b.input("x", {1, 3, 8, 8});
    b.initializer("w", {4, 3, 3, 3});
    auto& c = b.node("Conv", {"x", "w"}, {"y"});
    setString(c, "auto_pad", mode);
    setInts(c, "strides", {2, 2});
    b.output("y");
    auto g = importOk(b);
    ASSERT_TRUE(g);
    const Node* conv = findOp(*g, OpKind::Conv);
    // out = ceil(8/2) = 4; total pad = 3*2 + 3 - 8 = 1, the odd one at the end for SAME_UPPER.
    std::vector<int64_t> pads = std::string(mode) == "SAME_UPPER"
                                    ? std::vector<int64_t>{0, 0, 1, 1}
                                    : std::vector<int64_t>{1, 1, 0, 0};
    EXPECT_EQ(conv->attrs().getInts("pads"), pads) << mode;
    EXPECT_EQ(conv->attrs().getInts("dilations"), (std::vector<int64_t>{1, 1}));
    EXPECT_EQ(conv->attrs().getInt("group"), 1);
    EXPECT_EQ(conv->output(0)->shape(), (Shape{1, 4, 4, 4}));
  }
}

TEST(OnnxImporterTest, Conv1dAnd3dWithGroupsAndDilations) {
  OnnxModelBuilder b;
  b.input("x", {2, 4, 10});
  b.initializer("w", {8, 2, 3});
  b.initializer("bias", {8});
  auto& c = b.node("Conv", {"x", "w", "bias"}, {"y"});
  setInt(c, "group", 2);
  setInts(c, "dilations", {2});
  setInts(c, "pads", {2, 2});
  b.input("v", {1, 2, 4, 4, 4});
  b.initializer("w3", {3, 2, 2, 2, 2});
  b.node("Conv", {"v", "w3"}, {"z"});
  b.output("y");
  b.output("z");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{2, 8, 10}));
  EXPECT_EQ(g->outputs()[1]->shape(), (Shape{1, 3, 3, 3, 3}));
  EXPECT_EQ(g->nodes()[0]->attrs().getInt("group"), 2);
}

TEST(OnnxImporterTest, ConvKernelShapeMustMatchWeight) {
  OnnxModelBuilder b;
  b.input("x", {1, 3, 8, 8});
  b.initializer("w", {4, 3, 3, 3});
  auto& c = b.node("Conv", {"x", "w"}, {"y"}, "conv1");
  setInts(c, "kernel_shape", {5, 5});
  b.output("y");
  std::string e = importError(b);
  EXPECT_NE(e.find("node 'conv1' (Conv)"), std::string::npos) << e;
  EXPECT_NE(e.find("kernel_shape"), std::string::npos) << e;
}

TEST(OnnxImporterTest, ConvTransposeOutputShapeBecomesPadsAndOutputPadding) {
  // As onnx's test_convtranspose_output_shape: the requested size exceeds the natural one.
  OnnxModelBuilder b;
  b.input("x", {1, 1, 3, 3});
  b.initializer("w", {1, 2, 3, 3});
  auto& c = b.node("ConvTranspose", {"x", "w"}, {"y"});
  setInts(c, "strides", {3, 2});
  setInts(c, "output_shape", {10, 8});
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  const Node* ct = findOp(*g, OpKind::ConvTranspose);
  EXPECT_EQ(ct->attrs().getInts("pads"), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(ct->attrs().getInts("output_padding"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(ct->output(0)->shape(), (Shape{1, 2, 10, 8}));
}

TEST(OnnxImporterTest, ConvTransposeSameUpperOutputIsInputTimesStride) {
  OnnxModelBuilder b;
  b.input("x", {1, 1, 3, 3});
  b.initializer("w", {1, 2, 3, 3});
  auto& c = b.node("ConvTranspose", {"x", "w"}, {"y"});
  setInts(c, "strides", {2, 2});
  setString(c, "auto_pad", "SAME_UPPER");
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{1, 2, 6, 6}));
  // full = 2*2 + 3 = 7, total 1: begin 0, end 1.
  EXPECT_EQ(findOp(*g, OpKind::ConvTranspose)->attrs().getInts("pads"),
            (std::vector<int64_t>{0, 0, 1, 1}));
}

// ---- Normalization -----------------------------------------------------------------------------

OnnxModelBuilder bnModel(int64_t opset, const std::string& producer, bool training) {
  OnnxModelBuilder b(opset, 8, producer);
  b.input("x", {-1, 2, 3, 3});
  for (const char* p : {"scale", "bias", "mean", "var"}) b.initializer(p, {2});
  std::vector<std::string> outs = {"y"};
  if (training) outs = {"y", "mean_out", "var_out"};
  auto& bn = b.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, outs, "bn");
  setFloat(bn, "epsilon", 1e-3f);
  if (training && opset >= 14) setInt(bn, "training_mode", 1);
  b.output("y");
  return b;
}

TEST(OnnxImporterTest, BatchNormInferenceMode) {
  auto g = importOk(bnModel(15, "pytorch", false), 4);
  ASSERT_TRUE(g);
  const Node* bn = findOp(*g, OpKind::BatchNorm);
  ASSERT_TRUE(bn);
  EXPECT_EQ(bn->name(), "bn");
  EXPECT_FLOAT_EQ(float(bn->attrs().getFloat("epsilon")), 1e-3f);
  EXPECT_EQ(g->findValue("mean")->role(), TensorRole::State);
  EXPECT_EQ(g->findValue("scale")->role(), TensorRole::Param);
  EXPECT_TRUE(g->carries().empty());
}

TEST(OnnxImporterTest, BatchNormTrainingModeUpdatesAndCarriesRunningStats) {
  for (const char* producer : {"pytorch", "other"}) {
    auto g = importOk(bnModel(15, producer, true), 4);
    ASSERT_TRUE(g);
    ASSERT_TRUE(findOp(*g, OpKind::BatchNormTrain));
    const Node* upd = findOp(*g, OpKind::BnRunningUpdate);
    ASSERT_TRUE(upd);
    EXPECT_EQ(upd->attrs().getInt("count"), 4 * 3 * 3);
    EXPECT_EQ(upd->attrs().getInt("unbiased"), std::string(producer) == "pytorch" ? 1 : 0);
    EXPECT_FLOAT_EQ(float(upd->attrs().getFloat("momentum")), 0.9f);
    EXPECT_EQ(upd->input(0)->name(), "mean");
    EXPECT_EQ(upd->input(1)->name(), "var");
    ASSERT_EQ(g->carries().size(), 2u);
    EXPECT_EQ(g->carries()[0].state->name(), "mean");
    EXPECT_EQ(g->carries()[0].next, upd->output(0));
    EXPECT_EQ(g->carries()[1].next, upd->output(1));
  }
}

TEST(OnnxImporterTest, BatchNormOldOpsetTrainsWhenItHasStatisticsOutputs) {
  auto g = importOk(bnModel(9, "pytorch", true), 2);
  ASSERT_TRUE(g);
  EXPECT_TRUE(findOp(*g, OpKind::BatchNormTrain));
  EXPECT_EQ(g->carries().size(), 2u);
  auto inf = importOk(bnModel(9, "pytorch", false), 2);
  ASSERT_TRUE(inf);
  EXPECT_TRUE(findOp(*inf, OpKind::BatchNorm));
}

TEST(OnnxImporterTest, LrnDefaultsAreExplicit) {
  OnnxModelBuilder b;
  b.input("x", {1, 4, 5, 5});
  setInt(b.node("LRN", {"x"}, {"y"}), "size", 3);
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  const Node* n = findOp(*g, OpKind::LRN);
  EXPECT_EQ(n->attrs().getInt("size"), 3);
  EXPECT_FLOAT_EQ(float(n->attrs().getFloat("alpha")), 1e-4f);
  EXPECT_FLOAT_EQ(float(n->attrs().getFloat("beta")), 0.75f);
  EXPECT_FLOAT_EQ(float(n->attrs().getFloat("bias")), 1.0f);
}

// ---- Activations -------------------------------------------------------------------------------

TEST(OnnxImporterTest, ClipBoundsFromAttributesOrStaticInputs) {
  OnnxModelBuilder old(10);
  old.input("x", {2, 3});
  setFloat(old.node("Clip", {"x"}, {"y"}), "max", 6.0f);
  old.output("y");
  auto g = importOk(old);
  ASSERT_TRUE(g);
  const Node* c = findOp(*g, OpKind::Clip);
  EXPECT_FALSE(c->attrs().has("min"));
  EXPECT_EQ(c->attrs().getFloat("max"), 6.0);

  OnnxModelBuilder b(13);
  b.input("x", {2, 3});
  b.constantF32("lo", {}, {0.0f});
  b.initializer("hi", {}, {6.0f}); // a float initializer: read as a bound, not a parameter
  b.node("Clip", {"x", "lo", "hi"}, {"y"});
  b.output("y");
  g = importOk(b);
  ASSERT_TRUE(g);
  c = findOp(*g, OpKind::Clip);
  EXPECT_EQ(c->attrs().getFloat("min"), 0.0);
  EXPECT_EQ(c->attrs().getFloat("max"), 6.0);
  EXPECT_EQ(g->findValue("hi"), nullptr) << "an initializer only read at compile time is dropped";
}

TEST(OnnxImporterTest, ActivationDefaultsAreExplicit) {
  OnnxModelBuilder b;
  b.input("x", {2, 3});
  b.node("LeakyRelu", {"x"}, {"a"});
  b.node("HardSigmoid", {"a"}, {"h"});
  b.node("HardSwish", {"h"}, {"s"});
  b.node("Sigmoid", {"s"}, {"t"});
  b.node("Tanh", {"t"}, {"y"});
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  EXPECT_FLOAT_EQ(float(findOp(*g, OpKind::LeakyRelu)->attrs().getFloat("alpha")), 0.01f);
  EXPECT_FLOAT_EQ(float(findOp(*g, OpKind::HardSigmoid)->attrs().getFloat("alpha")), 0.2f);
  EXPECT_FLOAT_EQ(float(findOp(*g, OpKind::HardSigmoid)->attrs().getFloat("beta")), 0.5f);
  EXPECT_EQ(g->nodes().size(), 5u);
}

// ---- Pooling and matrix products ---------------------------------------------------------------

TEST(OnnxImporterTest, PoolingAttributesAreExplicit) {
  OnnxModelBuilder b;
  b.input("x", {1, 2, 7, 7});
  auto& mp = b.node("MaxPool", {"x"}, {"m"});
  setInts(mp, "kernel_shape", {3, 3});
  setInts(mp, "strides", {2, 2});
  setInt(mp, "ceil_mode", 1);
  auto& ap = b.node("AveragePool", {"m"}, {"a"});
  setInts(ap, "kernel_shape", {2, 2});
  setString(ap, "auto_pad", "SAME_UPPER");
  setInt(ap, "count_include_pad", 1);
  b.node("GlobalAveragePool", {"a"}, {"y"});
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  const Node* m = findOp(*g, OpKind::MaxPool);
  EXPECT_EQ(m->attrs().getInts("pads"), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(m->attrs().getInts("dilations"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(m->output(0)->shape(), (Shape{1, 2, 3, 3}));
  const Node* a = findOp(*g, OpKind::AveragePool);
  EXPECT_EQ(a->attrs().getInts("pads"), (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(a->attrs().getInts("strides"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(a->attrs().getInt("count_include_pad"), 1);
  EXPECT_EQ(a->output(0)->shape(), (Shape{1, 2, 3, 3}));
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{1, 2, 1, 1}));
}

TEST(OnnxImporterTest, GemmDefaultsAndMatMul) {
  OnnxModelBuilder b;
  b.input("x", {4, 8});
  b.initializer("w", {3, 8});
  b.initializer("c", {3});
  setInt(b.node("Gemm", {"x", "w", "c"}, {"g"}), "transB", 1);
  b.initializer("m", {3, 5});
  b.node("MatMul", {"g", "m"}, {"y"});
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  const Node* gemm = findOp(*g, OpKind::Gemm);
  EXPECT_EQ(gemm->attrs().getFloat("alpha"), 1.0);
  EXPECT_EQ(gemm->attrs().getFloat("beta"), 1.0);
  EXPECT_EQ(gemm->attrs().getInt("transA", -1), 0);
  EXPECT_EQ(gemm->attrs().getInt("transB"), 1);
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{4, 5}));
}

// ---- Elementwise -------------------------------------------------------------------------------

TEST(OnnxImporterTest, FloatConstantsBecomeConstValuesWithData) {
  OnnxModelBuilder b;
  b.input("x", {2, 3});
  b.constantF32("k", {3}, {1.0f, 2.0f, 3.0f});
  b.node("Mul", {"x", "k"}, {"y"});
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  const Value* k = g->findValue("k");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->role(), TensorRole::Const);
  ASSERT_TRUE(k->data());
  EXPECT_EQ(k->data()->elementAsDouble(2), 3.0);
}

TEST(OnnxImporterTest, LegacyBroadcastAxisReshapesB) {
  OnnxModelBuilder b(7);
  b.input("x", {2, 3, 4, 5});
  b.initializer("bias", {3});
  auto& add = b.node("Add", {"x", "bias"}, {"y"});
  setInt(add, "broadcast", 1);
  setInt(add, "axis", 1);
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  const Node* r = findOp(*g, OpKind::Reshape);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->attrs().getInts("shape"), (std::vector<int64_t>{3, 1, 1}));
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{2, 3, 4, 5}));
}

// ---- Shape ops and folding ---------------------------------------------------------------------

TEST(OnnxImporterTest, TorchFlattenShapeChainFoldsIntoOneReshape) {
  // x.view(x.size(0), -1) with a symbolic batch, as torch exports it.
  OnnxModelBuilder b;
  b.input("x", {-1, 4, 2, 2});
  b.node("Shape", {"x"}, {"s"});
  b.constantI64("zero", {}, {0});
  setInt(b.node("Gather", {"s", "zero"}, {"n"}), "axis", 0);
  b.constantI64("axes", {1}, {0});
  b.node("Unsqueeze", {"n", "axes"}, {"n1"});
  b.constantI64("minus1", {1}, {-1});
  setInt(b.node("Concat", {"n1", "minus1"}, {"shape"}), "axis", 0);
  b.node("Reshape", {"x", "shape"}, {"y"});
  b.output("y");
  auto g = importOk(b, 3);
  ASSERT_TRUE(g);
  ASSERT_EQ(g->nodes().size(), 1u) << printGraph(*g);
  EXPECT_EQ(g->nodes()[0]->op(), OpKind::Reshape);
  EXPECT_EQ(g->nodes()[0]->attrs().getInts("shape"), (std::vector<int64_t>{3, 16}));
  EXPECT_EQ(g->outputs()[0]->name(), "y");
  EXPECT_EQ(g->graphValues().size(), 1u) << "only the input; the shape constants never appear";
}

TEST(OnnxImporterTest, ChannelShuffleArithmeticFolds) {
  // channels_per_group = channels // groups, computed on shape values with Div and Cast.
  OnnxModelBuilder b;
  b.input("x", {2, 6, 2, 2});
  b.node("Shape", {"x"}, {"s"});
  b.constantI64("one", {}, {1});
  b.node("Gather", {"s", "one"}, {"c"});
  b.constantI64("groups", {}, {2});
  b.node("Div", {"c", "groups"}, {"cpg"});
  setInt(b.node("Cast", {"cpg"}, {"cpg64"}), "to", onnx::TensorProto::INT64);
  b.constantI64("ax", {1}, {0});
  b.node("Unsqueeze", {"cpg64", "ax"}, {"cpg1"});
  b.initializerI64("head", {2}, {2, 2});
  b.initializerI64("tail", {2}, {2, 2});
  setInt(b.node("Concat", {"head", "cpg1", "tail"}, {"shape"}), "axis", 0);
  b.node("Reshape", {"x", "shape"}, {"r"});
  setInts(b.node("Transpose", {"r"}, {"t"}), "perm", {0, 2, 1, 3, 4});
  b.output("t");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  EXPECT_EQ(findOp(*g, OpKind::Reshape)->attrs().getInts("shape"),
            (std::vector<int64_t>{2, 2, 3, 2, 2}));
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{2, 3, 2, 2, 2}));
}

TEST(OnnxImporterTest, ReshapeZeroCopiesAndMinusOneInfers) {
  OnnxModelBuilder b;
  b.input("x", {2, 3, 4});
  b.initializerI64("shape", {3}, {0, -1, 2});
  b.node("Reshape", {"x", "shape"}, {"y"});
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{2, 6, 2}));
  EXPECT_EQ(g->findValue("shape"), nullptr);
}

TEST(OnnxImporterTest, FlattenSqueezeUnsqueezeAreReshapes) {
  OnnxModelBuilder b(11);
  b.input("x", {2, 1, 3, 1});
  setInts(b.node("Squeeze", {"x"}, {"s"}), "axes", {-1});
  setInts(b.node("Unsqueeze", {"s"}, {"u"}), "axes", {0, -1});
  setInt(b.node("Flatten", {"u"}, {"f"}), "axis", -2);
  b.node("Squeeze", {"f"}, {"y"});
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  EXPECT_EQ(countOps(*g, OpKind::Reshape), int(g->nodes().size()));
  EXPECT_EQ(g->nodes()[0]->output(0)->shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(g->nodes()[1]->output(0)->shape(), (Shape{1, 2, 1, 3, 1}));
  EXPECT_EQ(g->nodes()[2]->output(0)->shape(), (Shape{2, 3}));
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{2, 3}));
}

TEST(OnnxImporterTest, TransposeDefaultPermReverses) {
  OnnxModelBuilder b;
  b.input("x", {2, 3, 4});
  b.node("Transpose", {"x"}, {"y"});
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->nodes()[0]->attrs().getInts("perm"), (std::vector<int64_t>{2, 1, 0}));
}

TEST(OnnxImporterTest, SliceNormalizesPerDim) {
  OnnxModelBuilder b;
  b.input("x", {4, 10, 6});
  b.initializerI64("starts", {2}, {-3, INT64_MAX});
  b.initializerI64("ends", {2}, {INT64_MAX, INT64_MIN});
  b.initializerI64("axes", {2}, {1, -1});
  b.initializerI64("steps", {2}, {2, -2});
  b.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  const Node* s = findOp(*g, OpKind::Slice);
  EXPECT_EQ(s->attrs().getInts("starts"), (std::vector<int64_t>{0, 7, 5}));
  EXPECT_EQ(s->attrs().getInts("ends"), (std::vector<int64_t>{4, 10, -1}));
  EXPECT_EQ(s->attrs().getInts("steps"), (std::vector<int64_t>{1, 2, -2}));
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{4, 2, 3}));
}

TEST(OnnxImporterTest, SliceAttributesBeforeOpset10AndFoldingKnownData) {
  OnnxModelBuilder b(9);
  b.input("x", {4, 10});
  auto& s = b.node("Slice", {"x"}, {"y"});
  setInts(s, "starts", {1});
  setInts(s, "ends", {-1});
  setInts(s, "axes", {1});
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{4, 8}));

  OnnxModelBuilder f;
  f.input("x", {2, 3, 8, 8});
  f.node("Shape", {"x"}, {"s"});
  f.initializerI64("st", {1}, {2});
  f.initializerI64("en", {1}, {INT64_MAX});
  f.node("Slice", {"s", "st", "en"}, {"hw"});
  f.initializerI64("nc", {2}, {6, 1});
  setInt(f.node("Concat", {"nc", "hw"}, {"shape"}), "axis", 0);
  f.node("Reshape", {"x", "shape"}, {"y"});
  f.output("y");
  g = importOk(f);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{6, 1, 8, 8}));
}

TEST(OnnxImporterTest, SplitFormsAcrossOpsets) {
  {
    OnnxModelBuilder b(11); // equal split, attribute form
    b.input("x", {2, 6});
    setInt(b.node("Split", {"x"}, {"a", "b", "c"}), "axis", 1);
    for (const char* o : {"a", "b", "c"}) b.output(o);
    auto g = importOk(b);
    ASSERT_TRUE(g);
    EXPECT_EQ(findOp(*g, OpKind::Split)->attrs().getInts("split"), (std::vector<int64_t>{2, 2, 2}));
  }
  {
    OnnxModelBuilder b(13); // sizes as an input
    b.input("x", {5, 2});
    b.initializerI64("sizes", {2}, {2, 3});
    b.node("Split", {"x", "sizes"}, {"a", "b"});
    b.output("a");
    b.output("b");
    auto g = importOk(b);
    ASSERT_TRUE(g);
    EXPECT_EQ(g->outputs()[1]->shape(), (Shape{3, 2}));
  }
  {
    OnnxModelBuilder b(18); // num_outputs, uneven: ceil(7/3) = 3, 3, then 1
    b.input("x", {7});
    setInt(b.node("Split", {"x"}, {"a", "b", "c"}), "num_outputs", 3);
    for (const char* o : {"a", "b", "c"}) b.output(o);
    auto g = importOk(b);
    ASSERT_TRUE(g);
    EXPECT_EQ(findOp(*g, OpKind::Split)->attrs().getInts("split"), (std::vector<int64_t>{3, 3, 1}));
  }
}

TEST(OnnxImporterTest, PadFormsAcrossOpsets) {
  OnnxModelBuilder old(10);
  old.input("x", {1, 2, 3});
  auto& p = old.node("Pad", {"x"}, {"y"});
  setInts(p, "pads", {0, 0, 1, 0, 0, 2});
  setFloat(p, "value", 1.5f);
  old.output("y");
  auto g = importOk(old);
  ASSERT_TRUE(g);
  EXPECT_EQ(findOp(*g, OpKind::Pad)->attrs().getFloat("value"), 1.5);
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{1, 2, 6}));

  OnnxModelBuilder b(18);
  b.input("x", {1, 2, 3});
  b.initializerI64("pads", {2}, {1, 1});
  b.constantF32("v", {}, {0.0f});
  b.initializerI64("axes", {1}, {-2});
  setString(b.node("Pad", {"x", "pads", "v", "axes"}, {"y"}), "mode", "reflect");
  b.output("y");
  g = importOk(b);
  ASSERT_TRUE(g);
  const Node* pad = findOp(*g, OpKind::Pad);
  EXPECT_EQ(pad->attrs().getInts("pads"), (std::vector<int64_t>{0, 1, 0, 0, 1, 0}));
  EXPECT_EQ(pad->attrs().getString("mode"), "reflect");
}

// ---- Reductions, softmax, dropout --------------------------------------------------------------

TEST(OnnxImporterTest, ReduceMeanAxesAttributeAndInput) {
  OnnxModelBuilder old(13);
  old.input("x", {2, 3, 4, 4});
  auto& r = old.node("ReduceMean", {"x"}, {"y"});
  setInts(r, "axes", {-1, 2});
  setInt(r, "keepdims", 0);
  old.output("y");
  auto g = importOk(old);
  ASSERT_TRUE(g);
  EXPECT_EQ(findOp(*g, OpKind::ReduceMean)->attrs().getInts("axes"), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{2, 3}));

  OnnxModelBuilder b(18);
  b.input("x", {2, 3});
  b.initializerI64("axes", {1}, {1});
  b.node("ReduceMean", {"x", "axes"}, {"y"});
  b.node("ReduceMean", {"y"}, {"z"}); // no axes: all of them
  b.output("z");
  g = importOk(b);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->nodes()[1]->attrs().getInts("axes"), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{1, 1}));
}

TEST(OnnxImporterTest, SoftmaxBeforeOpset13CoercesTo2d) {
  OnnxModelBuilder b(11);
  b.input("x", {2, 3, 4});
  b.node("Softmax", {"x"}, {"y"});                    // axis 1 of 3 dims: rows of 12
  b.node("LogSoftmax", {"y"}, {"z"});                 // same shape
  setInt(b.node("Softmax", {"z"}, {"w"}), "axis", 2); // last axis: a plain softmax
  b.output("w");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  ASSERT_EQ(g->nodes().size(), 7u) << printGraph(*g);
  EXPECT_EQ(g->nodes()[0]->attrs().getInts("shape"), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(g->nodes()[1]->op(), OpKind::Softmax);
  EXPECT_EQ(g->nodes()[1]->attrs().getInt("axis"), 1);
  EXPECT_EQ(g->nodes()[4]->op(), OpKind::LogSoftmax);
  EXPECT_EQ(g->nodes()[6]->attrs().getInt("axis"), 2);

  OnnxModelBuilder n(13);
  n.input("x", {2, 3, 4});
  n.node("Softmax", {"x"}, {"y"});
  n.output("y");
  g = importOk(n);
  ASSERT_TRUE(g);
  ASSERT_EQ(g->nodes().size(), 1u);
  EXPECT_EQ(g->nodes()[0]->attrs().getInt("axis"), 2);
}

TEST(OnnxImporterTest, DropoutTrainingModeGetsUniqueKeysAndInferenceIsRemoved) {
  OnnxModelBuilder b(13);
  b.input("x", {2, 3});
  b.constantF32("ratio", {}, {0.25f});
  auto& t = b.node("Constant", {}, {"train"});
  auto* a = t.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::BOOL);
  a->mutable_t()->set_raw_data(std::string(1, '\1'));
  b.node("Dropout", {"x", "ratio", "train"}, {"d1"});
  b.node("Dropout", {"d1", "ratio", "train"}, {"d2"});
  b.node("Dropout", {"d2", "ratio"}, {"d3"}); // training_mode absent: inference
  b.node("Identity", {"d3"}, {"y"});
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  ASSERT_EQ(countOps(*g, OpKind::Dropout), 2) << printGraph(*g);
  EXPECT_EQ(g->nodes()[0]->attrs().getInt("key"), 0);
  EXPECT_EQ(g->nodes()[1]->attrs().getInt("key"), 1);
  EXPECT_FLOAT_EQ(float(g->nodes()[0]->attrs().getFloat("ratio")), 0.25f);
  EXPECT_EQ(g->nodes()[0]->attrs().getInt("seed", -1), 0);
  EXPECT_EQ(g->outputs()[0], g->nodes()[1]->output(0));
  EXPECT_EQ(g->outputs()[0]->name(), "y");
}

TEST(OnnxImporterTest, DropoutMaskOutputIsUnsupported) {
  OnnxModelBuilder b(13);
  b.input("x", {2, 3});
  b.node("Dropout", {"x"}, {"y", "mask"}, "drop");
  b.output("y");
  b.output("mask", onnx::TensorProto::BOOL);
  std::string e = importError(b);
  EXPECT_NE(e.find("node 'drop' (Dropout)"), std::string::npos) << e;
  EXPECT_NE(e.find("mask"), std::string::npos) << e;
}

} // namespace
} // namespace hgp
