// Unit tests for the IR: building graphs, shape rules, the verifier and the text round trip.
#include "ir/OpInfo.h"
#include "ir/Printer.h"

#include <gtest/gtest.h>

namespace hgp {
namespace {

AttrMap convAttrs() {
  AttrMap a;
  a.setInts("strides", {1, 1});
  a.setInts("pads", {2, 2, 2, 2});
  a.setInts("dilations", {1, 1});
  a.setInt("group", 1);
  return a;
}

std::unique_ptr<Graph> smallGraph() {
  auto g = std::make_unique<Graph>("small");
  Value* x = *g->addGraphValue("input", TensorRole::Input, {DType::F32, {4, 1, 28, 28}});
  Value* w = *g->addGraphValue("conv1.weight", TensorRole::Param, {DType::F32, {6, 1, 5, 5}});
  Value* b = *g->addGraphValue("conv1.bias", TensorRole::Param, {DType::F32, {6}});
  Node* conv = *g->addNode(OpKind::Conv, {x, w, b}, convAttrs(), "/conv1/Conv");
  Node* relu = *g->addNode(OpKind::Relu, {conv->output(0)}, {}, "/relu/Relu");
  g->addOutput(relu->output(0));
  return g;
}

TEST(IrTest, ShapeRuleComputesConvOutput) {
  auto g = smallGraph();
  EXPECT_EQ(g->nodes()[0]->output(0)->shape(), (Shape{4, 6, 28, 28}));
  EXPECT_TRUE(verifyGraph(*g).isOk());
}

TEST(IrTest, ShapeRuleRejectsChannelMismatch) {
  Graph g;
  Value* x = *g.addGraphValue("x", TensorRole::Input, {DType::F32, {1, 3, 8, 8}});
  Value* w = *g.addGraphValue("w", TensorRole::Param, {DType::F32, {4, 2, 3, 3}});
  auto n = g.addNode(OpKind::Conv, {x, w}, convAttrs(), "bad_conv");
  ASSERT_FALSE(n.hasValue());
  EXPECT_EQ(n.status().code(), ErrorCode::InvalidModel);
  EXPECT_NE(n.status().message().find("bad_conv"), std::string::npos);
  EXPECT_NE(n.status().message().find("input channels 3"), std::string::npos);
}

TEST(IrTest, PrintParseRoundTripIsExact) {
  auto g = smallGraph();
  g->addCarry(g->findValue("conv1.bias"), g->findValue("conv1.bias"));
  std::string text = printGraph(*g);
  auto parsed = parseGraph(text);
  ASSERT_TRUE(parsed.hasValue()) << parsed.status().toString();
  EXPECT_EQ(printGraph(**parsed), text);
  EXPECT_TRUE(verifyGraph(**parsed).isOk()) << verifyGraph(**parsed).toString();
}

TEST(IrTest, RoundTripKeepsFloatsAndOddNamesExact) {
  Graph g("odd \"name\"");
  Value* x = *g.addGraphValue("x with space", TensorRole::Input, {DType::F32, {2, 3}});
  AttrMap a;
  a.setFloat("alpha", 0.1f); // a float32 value, which is not 0.1 as a double
  a.setFloats("list", {1e-5, -2.5, 3.0});
  a.setFloats("empty", {});
  a.setInts("ints", {-1, 9223372036854775807LL});
  a.setString("s", "a\"b\\c\n");
  Node* n = *g.addNode(OpKind::Scale, {x}, a, "node\tname");
  g.addOutput(n->output(0));
  std::string text = printGraph(g);
  auto parsed = parseGraph(text);
  ASSERT_TRUE(parsed.hasValue()) << parsed.status().toString();
  EXPECT_EQ(printGraph(**parsed), text);
  const AttrMap& pa = (*parsed)->nodes()[0]->attrs();
  EXPECT_EQ(pa.getFloat("alpha"), double(0.1f));
  EXPECT_EQ(pa.getInts("ints")[1], 9223372036854775807LL);
  EXPECT_TRUE(std::holds_alternative<std::vector<double>>(*pa.find("empty")));
  EXPECT_EQ(pa.getString("s"), "a\"b\\c\n");
}

TEST(IrTest, VerifierRejectsWrongDeclaredType) {
  std::string text = R"(graph "g" {
  input %x: f32[2,3]
  %y: act f32[2,4] = Relu(%x)
  output %y
}
)";
  auto g = parseGraph(text);
  ASSERT_TRUE(g.hasValue()) << g.status().toString();
  Status st = verifyGraph(**g);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("f32[2,4]"), std::string::npos) << st.message();
}

TEST(IrTest, ParserRejectsUseBeforeDefinition) {
  std::string text = R"(graph "g" {
  input %x: f32[2,3]
  %y: act f32[2,3] = Relu(%z)
}
)";
  auto g = parseGraph(text);
  ASSERT_FALSE(g.hasValue());
  EXPECT_NE(g.status().message().find("undefined value %z"), std::string::npos);
  EXPECT_NE(g.status().message().find(":3:"), std::string::npos) << g.status().message();
}

TEST(IrTest, VerifierRejectsCarryOfActivation) {
  auto g = smallGraph();
  Value* relu = g->nodes()[1]->output(0);
  g->addCarry(relu, relu);
  EXPECT_FALSE(verifyGraph(*g).isOk());
}

TEST(IrTest, ResultLargerThan2To40ElementsIsRejected) {
  Graph g;
  Value* x = *g.addGraphValue("x", TensorRole::Input, {DType::F32, {1}});
  AttrMap a;
  a.setInts("shape", {1 << 20, 1 << 21});
  auto n = g.addNode(OpKind::Expand, {x}, a);
  ASSERT_FALSE(n.hasValue());
  EXPECT_NE(n.status().message().find("2^40"), std::string::npos);
}

TEST(IrTest, ReplaceAllUsesAndErase) {
  auto g = smallGraph();
  Node* conv = g->nodes()[0];
  Node* relu = g->nodes()[1];
  Node* relu2 = *g->addNode(OpKind::Relu, {conv->output(0)}, {});
  g->replaceAllUsesWith(relu->output(0), relu2->output(0));
  EXPECT_TRUE(g->eraseNode(relu).isOk());
  EXPECT_EQ(g->outputs()[0], relu2->output(0));
  EXPECT_EQ(conv->output(0)->users().size(), 1u);
  EXPECT_TRUE(verifyGraph(*g).isOk());
}

} // namespace
} // namespace hgp
