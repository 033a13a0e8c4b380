// Unit tests for the graph-level side of the ONNX importer: names, outputs, batch handling,
// constant inputs, node order, unsupported ops, cycles and versions.
#include "ir/Printer.h"
#include "frontends/onnx/OnnxImporter.h"
#include "tests/frontend/OnnxModelBuilder.h"

#include <gtest/gtest.h>

namespace hgp {
namespace {

using test::findOp;
using test::importError;
using test::importOk;
using test::OnnxModelBuilder;
using test::setInt;
using test::setInts;

// ---- Graph-level behaviour ---------------------------------------------------------------------

TEST(OnnxGraphImportTest, GoldenPrintedIrForASmallModel) {
  OnnxModelBuilder b(17, 8, "pytorch");
  b.input("input", {-1, 1, 4, 4});
  b.initializer("conv.weight", {2, 1, 3, 3});
  b.initializer("conv.bias", {2});
  setInts(b.node("Conv", {"input", "conv.weight", "conv.bias"}, {"c"}, "/conv/Conv"), "pads",
          {1, 1, 1, 1});
  b.node("Relu", {"c"}, {"r"});
  b.node("Flatten", {"r"}, {"logits"}, "/Flatten");
  b.output("logits");
  auto g = importOk(b, 2);
  ASSERT_TRUE(g);
  EXPECT_EQ(printGraph(*g), R"(graph "test" {
  input %input: f32[2,1,4,4]
  param %conv.weight: f32[2,1,3,3]
  param %conv.bias: f32[2]
  %t0: act f32[2,2,4,4] = Conv(%input, %conv.weight, %conv.bias) {dilations=[1,1], group=1, pads=[1,1,1,1], strides=[1,1]} loc("/conv/Conv")
  %t1: act f32[2,2,4,4] = Relu(%t0) loc("Relu_1")
  %logits: act f32[2,32] = Reshape(%t1) {shape=[2,32]} loc("/Flatten")
  output %logits
}
)");
}

TEST(OnnxGraphImportTest, BatchOptionRebatchesStaticInputs) {
  OnnxModelBuilder b;
  b.input("x", {8, 3});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  auto g = importOk(b, 5);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->findValue("x")->shape(), (Shape{5, 3}));
  OnnxImportOptions keep;
  auto r = b.import(keep);
  ASSERT_TRUE(r.hasValue());
  EXPECT_EQ(r->info.batch, 8);
}

TEST(OnnxGraphImportTest, SymbolicDimsNeedBatchAndOnlyDimZero) {
  OnnxModelBuilder b;
  b.input("x", {-1, 3});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  EXPECT_NE(importError(b).find("pass --batch"), std::string::npos);
  OnnxModelBuilder c;
  c.input("x", {2, -1});
  c.node("Relu", {"x"}, {"y"});
  c.output("y");
  std::string e = importError(c, 2);
  EXPECT_NE(e.find("graph input 'x' dim 1 is symbolic"), std::string::npos) << e;
}

TEST(OnnxGraphImportTest, ConstantInputsBindGraphInputsAtCompileTime) {
  OnnxModelBuilder b;
  b.input("x", {2, 6});
  b.input("shape", {2}, onnx::TensorProto::INT64);
  b.node("Reshape", {"x", "shape"}, {"y"});
  b.output("y");
  EXPECT_NE(importError(b).find("must be known at compile time"), std::string::npos);
  OnnxImportOptions o;
  auto shape = std::make_shared<TensorData>();
  shape->type = {DType::I64, {2}};
  std::vector<int64_t> v = {3, 4};
  shape->bytes.assign(reinterpret_cast<uint8_t*>(v.data()),
                      reinterpret_cast<uint8_t*>(v.data()) + 16);
  o.constantInputs["shape"] = shape;
  auto r = b.import(o);
  ASSERT_TRUE(r.hasValue()) << r.status().toString();
  EXPECT_EQ(r->graph->outputs()[0]->shape(), (Shape{3, 4}));
  EXPECT_EQ(r->graph->findValue("shape"), nullptr);
}

TEST(OnnxGraphImportTest, UnsortedNodesAreSortedAndUnnamedNodesNamed) {
  OnnxModelBuilder b;
  b.input("x", {2});
  b.node("Relu", {"a"}, {"y"});
  b.node("Sigmoid", {"x"}, {"a"});
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->nodes()[0]->op(), OpKind::Sigmoid);
  EXPECT_EQ(g->nodes()[0]->name(), "Sigmoid_1");
  EXPECT_EQ(g->nodes()[1]->name(), "Relu_0");
}

TEST(OnnxGraphImportTest, AllUnsupportedOpsAreListedAtOnce) {
  OnnxModelBuilder b;
  b.input("x", {2});
  b.node("NonMaxSuppression", {"x"}, {"a"}, "nms_1");
  auto& custom = b.node("Foo", {"a"}, {"y"}, "x");
  custom.set_domain("com.example");
  b.output("y");
  EXPECT_EQ(importError(b),
            "unsupported ops: NonMaxSuppression (node 'nms_1'), com.example.Foo (node 'x')");
}

TEST(OnnxGraphImportTest, CycleIsReportedWithANodeOnIt) {
  OnnxModelBuilder b;
  b.input("x", {2});
  b.node("Add", {"x", "c"}, {"a"}, "first");
  b.node("Relu", {"a"}, {"c"}, "second");
  b.node("Relu", {"c"}, {"y"}, "after");
  b.output("y");
  std::string e = importError(b);
  EXPECT_NE(e.find("cycle through node '"), std::string::npos) << e;
  EXPECT_EQ(e.find("'after'"), std::string::npos) << "'after' is not on the cycle: " << e;
}

TEST(OnnxGraphImportTest, OutputsKeepOnnxNamesWhenFree) {
  OnnxModelBuilder b;
  b.input("x", {2});
  b.node("Identity", {"x"}, {"same"}); // an alias of an input keeps the input's name
  b.node("Relu", {"x"}, {"r"});
  b.output("same");
  b.output("r");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->outputs()[0]->name(), "x");
  EXPECT_EQ(g->outputs()[1]->name(), "r");
}

TEST(OnnxGraphImportTest, StaticOperandTable) {
  EXPECT_TRUE(isStaticOperand("Reshape", 1));
  EXPECT_FALSE(isStaticOperand("Reshape", 0));
  for (int i = 1; i <= 4; ++i) EXPECT_TRUE(isStaticOperand("Slice", i));
  EXPECT_TRUE(isStaticOperand("Pad", 1));
  EXPECT_TRUE(isStaticOperand("Pad", 2));
  EXPECT_TRUE(isStaticOperand("Pad", 3));
  EXPECT_TRUE(isStaticOperand("Split", 1));
  EXPECT_TRUE(isStaticOperand("Squeeze", 1));
  EXPECT_TRUE(isStaticOperand("Unsqueeze", 1));
  EXPECT_TRUE(isStaticOperand("ReduceMean", 1));
  EXPECT_TRUE(isStaticOperand("Clip", 1));
  EXPECT_TRUE(isStaticOperand("Clip", 2));
  EXPECT_TRUE(isStaticOperand("Dropout", 1));
  EXPECT_TRUE(isStaticOperand("Dropout", 2));
  EXPECT_FALSE(isStaticOperand("Conv", 1));
  EXPECT_FALSE(isStaticOperand("Shape", 0));
  EXPECT_FALSE(isStaticOperand("NoSuchOp", 0));
  EXPECT_FALSE(isStaticOperand("Reshape", -1));
}

TEST(OnnxGraphImportTest, NewerIrVersionsLoadIgnoringUnknownFields) {
  // What torch 2.x writes: IR 10, opset 18 and up, with fields libonnx 1.12 does not know
  // (ModelProto.configuration = 26, NodeProto.metadata_props = 9, GraphProto.metadata_props = 16).
  OnnxModelBuilder b(20, 10);
  b.input("x", {-1, 3});
  auto& n = b.node("Relu", {"x"}, {"y"});
  n.GetReflection()->MutableUnknownFields(&n)->AddLengthDelimited(9, "\x0a\x01k\x12\x01v");
  b.graph().GetReflection()->MutableUnknownFields(&b.graph())->AddLengthDelimited(16, "");
  b.model.GetReflection()->MutableUnknownFields(&b.model)->AddLengthDelimited(26, "\x0a\x01c");
  b.output("y");
  OnnxImportOptions o;
  o.batch = 4;
  auto r = b.import(o);
  ASSERT_TRUE(r.hasValue()) << r.status().toString();
  EXPECT_EQ(r->info.irVersion, 10);
  EXPECT_EQ(r->info.opsetVersion, 20);
  EXPECT_EQ(r->info.batch, 4);
  EXPECT_EQ(r->graph->outputs()[0]->shape(), (Shape{4, 3}));
}

TEST(OnnxGraphImportTest, InitializerRolesAndData) {
  OnnxModelBuilder b;
  b.input("x", {2, 3});
  b.initializer("w", {3, 3});
  auto& d = *b.graph().add_initializer(); // double_data, used as data
  d.set_name("unused64");
  d.set_data_type(onnx::TensorProto::DOUBLE);
  d.add_dims(1);
  d.add_double_data(2.5);
  auto& h = *b.graph().add_initializer(); // float16 bits in int32_data
  h.set_name("half");
  h.set_data_type(onnx::TensorProto::FLOAT16);
  h.add_dims(2);
  h.add_int32_data(0x3c00); // 1.0
  h.add_int32_data(0xc000); // -2.0
  b.initializerI64("labels", {2}, {7, 9});
  // An initializer that is also listed as a graph input is an initializer.
  b.input("w", {3, 3});
  b.node("MatMul", {"x", "w"}, {"y"});
  b.node("Identity", {"labels"}, {"lab"});
  b.node("Identity", {"half"}, {"h"});
  b.output("y");
  b.output("lab", onnx::TensorProto::INT64);
  b.output("h", onnx::TensorProto::FLOAT16);
  auto g = importOk(b);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->findValue("w")->role(), TensorRole::Param);
  EXPECT_EQ(g->findValue("w")->data()->onnxName, "w");
  EXPECT_EQ(g->findValue("unused64"), nullptr) << "unused initializers are dropped";
  const Value* lab = g->outputs()[1];
  EXPECT_EQ(lab->name(), "lab");
  EXPECT_EQ(lab->role(), TensorRole::Const) << "a non-float initializer read as data";
  EXPECT_EQ(lab->data()->elementAsInt(1), 9);
  const Value* half = g->outputs()[2];
  EXPECT_EQ(half->dtype(), DType::F16);
  EXPECT_EQ(half->data()->elementAsDouble(0), 1.0);
  EXPECT_EQ(half->data()->elementAsDouble(1), -2.0);
}

TEST(OnnxGraphImportTest, DeclaredOutputTypeMustMatch) {
  OnnxModelBuilder b;
  b.input("x", {2});
  b.node("Relu", {"x"}, {"y"});
  b.output("y", onnx::TensorProto::INT64);
  EXPECT_NE(importError(b).find("graph output 'y' is declared i64 but computes f32"),
            std::string::npos);
}

TEST(OnnxGraphImportTest, ShapeChainResultAsGraphOutputBecomesAConst) {
  OnnxModelBuilder b;
  b.input("x", {2, 5});
  b.node("Shape", {"x"}, {"s"});
  b.output("s", onnx::TensorProto::INT64);
  auto g = importOk(b);
  ASSERT_TRUE(g);
  const Value* s = g->outputs()[0];
  EXPECT_EQ(s->name(), "s");
  EXPECT_EQ(s->role(), TensorRole::Const);
  EXPECT_EQ(s->shape(), (Shape{2}));
  EXPECT_EQ(s->data()->elementAsInt(1), 5);
}

TEST(OnnxGraphImportTest, ErrorsStayOneLineWhateverTheNames) {
  OnnxModelBuilder b;
  b.input("x", {2});
  b.node("Bogus", {"x"}, {"y"}, "evil\nname\x1b[31m");
  b.output("y");
  std::string e = importError(b);
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_NE(e.find("evil\\x0aname\\x1b[31m"), std::string::npos) << e;
}

} // namespace
} // namespace hgp
