// Unit tests for the importers of the modern CNN families' ops: LayerNormalization, Gelu, the
// elementary functions, and stochastic depth's random mask (RandomUniformLike + Less + Cast, as
// torch exports bernoulli_) becoming one Bernoulli; comparisons, Not and Where as 0/1 masks;
// RandomNormalLike; Pow with a constant exponent and ReduceL2,
// lowered to the ops that define them; and Gather of computed data by constant indices (torch's
// dynamo as_strided) as the view it is.
#include "frontends/onnx/OnnxImporter.h"
#include "tests/frontend/OnnxModelBuilder.h"

#include <gtest/gtest.h>

namespace hgp {
namespace {

using test::countOps;
using test::findOp;
using test::importError;
using test::importOk;
using test::OnnxModelBuilder;
using test::setFloat;
using test::setInt;
using test::setString;

TEST(OnnxModernOpsTest, LayerNormalizationResolvesTheAxisAndKeepsItsStatistics) {
  OnnxModelBuilder b;
  b.input("x", {2, 3, 3, 8});
  b.initializer("w", {8});
  b.initializer("bias", {8});
  auto& ln = b.node("LayerNormalization", {"x", "w", "bias"}, {"y", "mean", "invstd"}, "ln");
  setFloat(ln, "epsilon", 1e-6f);
  b.output("y");
  b.output("mean");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  const Node* n = findOp(*g, OpKind::LayerNorm);
  ASSERT_TRUE(n);
  EXPECT_EQ(n->attrs().getInt("axis"), 3);
  EXPECT_FLOAT_EQ(float(n->attrs().getFloat("epsilon")), 1e-6f);
  EXPECT_EQ(g->outputs()[1]->shape(), (Shape{2, 3, 3, 1}));
}

TEST(OnnxModernOpsTest, LayerNormalizationScaleMustFitTheNormalizedDims) {
  OnnxModelBuilder b;
  b.input("x", {2, 8});
  b.initializer("w", {3});
  b.node("LayerNormalization", {"x", "w"}, {"y"}, "ln");
  b.output("y");
  std::string e = importError(b);
  EXPECT_NE(e.find("node 'ln' (LayerNormalization)"), std::string::npos) << e;
  EXPECT_NE(e.find("normalized dims"), std::string::npos) << e;
}

TEST(OnnxModernOpsTest, GeluKeepsItsForm) {
  OnnxModelBuilder b(20, 9);
  b.input("x", {4, 5});
  setString(b.node("Gelu", {"x"}, {"y"}), "approximate", "tanh");
  b.node("Erf", {"y"}, {"z"});
  b.output("z");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  EXPECT_EQ(findOp(*g, OpKind::Gelu)->attrs().getString("approximate"), "tanh");
  EXPECT_EQ(countOps(*g, OpKind::Erf), 1);
}

/// y = x + Conv(x) * (Cast(Less(RandomUniformLike(noise), 0.8)) / 0.8): torchvision's
/// StochasticDepth(0.2, "row") as torch 2.x exports it in training mode.
OnnxModelBuilder stochasticDepth(bool greater = false) {
  OnnxModelBuilder b(17, 8, "pytorch");
  b.input("x", {4, 3, 2, 2});
  b.initializer("w", {3, 3, 1, 1});
  b.node("Conv", {"x", "w"}, {"c"});
  b.constantF32("noise", {4, 1, 1, 1}, {0, 0, 0, 0});
  auto& r = b.node("RandomUniformLike", {"noise"}, {"r"});
  setFloat(r, "high", 1.f);
  setFloat(r, "low", 0.f);
  setInt(r, "dtype", 1);
  b.constantF32("p", {}, {0.8f});
  if (greater)
    b.node("Greater", {"p", "r"}, {"keep"});
  else
    b.node("Less", {"r", "p"}, {"keep"});
  setInt(b.node("Cast", {"keep"}, {"mask"}), "to", 1);
  b.node("Div", {"mask", "p"}, {"scaled"});
  b.node("Mul", {"c", "scaled"}, {"block"});
  b.node("Add", {"x", "block"}, {"y"});
  b.output("y");
  return b;
}

TEST(OnnxModernOpsTest, StochasticDepthBecomesOneBernoulliRowMask) {
  for (bool greater : {false, true}) {
    auto g = importOk(stochasticDepth(greater));
    ASSERT_TRUE(g);
    const Node* m = findOp(*g, OpKind::Bernoulli);
    ASSERT_TRUE(m) << greater;
    EXPECT_FLOAT_EQ(float(m->attrs().getFloat("p")), 0.8f);
    EXPECT_EQ(m->output(0)->shape(), (Shape{4, 1, 1, 1}));
    EXPECT_EQ(m->output(0)->dtype(), DType::F32);
    // The Cast is the identity on the 0/1 mask; the 1 / (1 - drop) scale stays a Div.
    ASSERT_EQ(m->output(0)->users().size(), 1u);
    EXPECT_EQ(m->output(0)->users()[0]->op(), OpKind::Div);
  }
}

TEST(OnnxModernOpsTest, RandomMaskCastToAnIntegerIsRefusedClearly) {
  OnnxModelBuilder b = stochasticDepth();
  // Cast the mask to int64 instead of float.
  for (auto& n : *b.graph().mutable_node())
    if (n.op_type() == "Cast") n.mutable_attribute(0)->set_i(7);
  std::string e = importError(b);
  EXPECT_NE(e.find("a bool tensor can be cast to a float dtype or bool"), std::string::npos) << e;
}

/// Comparisons of tensors, Not and Where are 0/1 masks of the operands' dtype inside the IR; a
/// bool graph input is Cast to a mask where it is read, and a bool graph output is Cast back.
TEST(OnnxModernOpsTest, ComparisonsNotAndWhereAreMaskOps) {
  OnnxModelBuilder b(16, 8);
  b.input("a", {2, 3});
  b.input("b", {3});
  b.input("c", {2, 3}, 9);
  b.node("Less", {"a", "b"}, {"lt"}, "cmp");
  b.node("Not", {"lt"}, {"ge"});
  b.node("Where", {"c", "a", "b"}, {"w"});
  b.node("Where", {"ge", "w", "a"}, {"y"});
  b.output("ge", 9);
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  const Node* lt = findOp(*g, OpKind::Less);
  ASSERT_TRUE(lt);
  EXPECT_EQ(lt->output(0)->dtype(), DType::F32);
  EXPECT_EQ(lt->output(0)->shape(), (Shape{2, 3}));
  EXPECT_EQ(countOps(*g, OpKind::Where), 2);
  EXPECT_EQ(countOps(*g, OpKind::Sub), 1); // Not(M) = 1 - M
  // Cast c (bool) to a mask, and the output ge back to bool.
  EXPECT_EQ(countOps(*g, OpKind::Cast), 2);
  EXPECT_EQ(g->outputs()[0]->dtype(), DType::Bool);
  EXPECT_EQ(g->outputs()[0]->name(), "ge");
  EXPECT_EQ(g->outputs()[1]->dtype(), DType::F32);
}

/// torch 1.13 writes torch.where(x < 1, 1.0, x) with an int64-typed threshold here and a float64
/// branch constant: constants are converted to the dtype the node computes in.
TEST(OnnxModernOpsTest, ConstantsOfOtherDTypesFollowTheRunTimeOperand) {
  OnnxModelBuilder b(17, 8, "pytorch");
  b.input("x", {2, 3});
  b.constantI64("one", {}, {1});
  b.node("Less", {"x", "one"}, {"c"});
  auto& k = b.node("Constant", {}, {"v"});
  auto* t = k.add_attribute();
  t->set_name("value");
  t->set_type(onnx::AttributeProto::TENSOR);
  t->mutable_t()->set_data_type(onnx::TensorProto::DOUBLE);
  t->mutable_t()->add_double_data(1.0);
  b.node("Where", {"c", "v", "x"}, {"w"});
  b.node("Max", {"w", "one"}, {"y"});
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  const Node* w = findOp(*g, OpKind::Where);
  ASSERT_TRUE(w);
  for (const Value* v : w->inputs()) EXPECT_EQ(v->dtype(), DType::F32);
  EXPECT_EQ(findOp(*g, OpKind::Max)->output(0)->dtype(), DType::F32);
  EXPECT_EQ(countOps(*g, OpKind::Cast), 0);
}

TEST(OnnxModernOpsTest, IntegerComparisonsAreRefusedClearly) {
  OnnxModelBuilder b;
  b.input("a", {3}, 6);
  b.input("b", {3}, 6);
  b.node("Equal", {"a", "b"}, {"y"}, "eq");
  b.output("y", 9);
  std::string e = importError(b);
  EXPECT_NE(e.find("node 'eq' (Equal)"), std::string::npos) << e;
  EXPECT_NE(e.find("integer tensors at run time are not supported"), std::string::npos) << e;
}

TEST(OnnxModernOpsTest, RandomNormalLikeIsKeyedLikeADropoutSite) {
  OnnxModelBuilder b(17, 8, "pytorch");
  b.input("x", {4, 3});
  auto& r = b.node("RandomNormalLike", {"x"}, {"z"});
  setFloat(r, "mean", 0.5f);
  setFloat(r, "scale", 2.f);
  auto& r2 = b.node("RandomNormalLike", {"x"}, {"z2"});
  setInt(r2, "dtype", 1);
  b.node("Add", {"z", "z2"}, {"s"});
  b.node("Mul", {"x", "s"}, {"y"});
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  std::vector<const Node*> draws;
  for (const Node* n : g->nodes())
    if (n->op() == OpKind::RandomNormal) draws.push_back(n);
  ASSERT_EQ(draws.size(), 2u);
  EXPECT_FLOAT_EQ(float(draws[0]->attrs().getFloat("mean")), 0.5f);
  EXPECT_FLOAT_EQ(float(draws[0]->attrs().getFloat("scale")), 2.f);
  EXPECT_FLOAT_EQ(float(draws[1]->attrs().getFloat("scale")), 1.f);
  EXPECT_NE(draws[0]->attrs().getInt("key"), draws[1]->attrs().getInt("key"));
  EXPECT_EQ(draws[0]->output(0)->shape(), (Shape{4, 3}));
}

/// Pow(x, e) for a constant e becomes the ops PyTorch's pow kernel uses for it.
TEST(OnnxModernOpsTest, PowWithAConstantExponentIsLowered) {
  struct Case {
    float e;
    int mul, sqrt, reciprocal;
  };
  for (Case c : {Case{2, 1, 0, 0}, Case{3, 2, 0, 0}, Case{0.5f, 0, 1, 0}, Case{-1, 0, 0, 1},
                 Case{-0.5f, 0, 1, 1}, Case{-2, 1, 0, 1}}) {
    SCOPED_TRACE(c.e);
    OnnxModelBuilder b;
    b.input("x", {2, 3});
    b.constantF32("e", {}, {c.e});
    b.node("Pow", {"x", "e"}, {"y"}, "pow");
    b.output("y");
    auto g = importOk(b);
    ASSERT_TRUE(g);
    EXPECT_EQ(countOps(*g, OpKind::Mul), c.mul);
    EXPECT_EQ(countOps(*g, OpKind::Sqrt), c.sqrt);
    EXPECT_EQ(countOps(*g, OpKind::Reciprocal), c.reciprocal);
    EXPECT_EQ(g->outputs()[0]->shape(), (Shape{2, 3}));
  }
}

TEST(OnnxModernOpsTest, PowRefusesExponentsItCannotLower) {
  for (float e : {1.5f, 4.f}) {
    OnnxModelBuilder b;
    b.input("x", {2, 3});
    b.constantF32("e", {}, {e});
    b.node("Pow", {"x", "e"}, {"y"}, "pow");
    b.output("y");
    std::string err = importError(b);
    EXPECT_NE(err.find("node 'pow' (Pow)"), std::string::npos) << err;
    EXPECT_NE(err.find("constant exponent of 1, 2, 3, 0.5"), std::string::npos) << err;
  }
  OnnxModelBuilder b;
  b.input("x", {2, 3});
  b.input("e", {2, 3});
  b.node("Pow", {"x", "e"}, {"y"}, "pow");
  b.output("y");
  std::string err = importError(b);
  EXPECT_NE(err.find("pow"), std::string::npos) << err;
}

TEST(OnnxModernOpsTest, ReduceL2IsTheRootOfTheSumOfSquares) {
  OnnxModelBuilder b;
  b.input("x", {2, 3, 4});
  auto& r = b.node("ReduceL2", {"x"}, {"y"}, "l2");
  test::setInts(r, "axes", {-1});
  setInt(r, "keepdims", 0);
  b.output("y");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  const Node* sum = findOp(*g, OpKind::ReduceSum);
  ASSERT_TRUE(sum);
  EXPECT_EQ(sum->attrs().getInts("axes"), (std::vector<int64_t>{2}));
  EXPECT_EQ(sum->input(0)->producer()->op(), OpKind::Mul);
  EXPECT_EQ(countOps(*g, OpKind::Sqrt), 1);
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{2, 3}));
}

// ---- Gather of computed data (torch's dynamo exporter writes as_strided so) -----------------

/// x [batch, 6, 1, 1] through Relu, flattened by Reshape(-1), then Gather(axis 0) by `idx`.
OnnxModelBuilder flatGather(int64_t exportBatch, const std::vector<int64_t>& idxDims,
                            const std::vector<int64_t>& idx) {
  OnnxModelBuilder b;
  b.input("x", {exportBatch, 6, 1, 1});
  b.node("Relu", {"x"}, {"r"});
  b.initializerI64("flat", {1}, {-1});
  b.node("Reshape", {"r", "flat"}, {"f"});
  b.initializerI64("idx", idxDims, idx);
  b.node("Gather", {"f", "idx"}, {"y"}, "as_strided");
  b.output("y");
  return b;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = i;
  return v;
}

TEST(OnnxModernOpsTest, GatherOfComputedDataByIdentityIndicesIsAReshape) {
  auto g = importOk(flatGather(2, {2, 6, 1, 1}, iota(12)));
  ASSERT_TRUE(g);
  EXPECT_EQ(countOps(*g, OpKind::Transpose) + countOps(*g, OpKind::Slice), 0);
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{2, 6, 1, 1}));
  // Compiled at --batch 5, the export's batch-2 indices follow the batch, as shape constants do.
  auto r = flatGather(2, {2, 6, 1, 1}, iota(12)).import({.batch = 5});
  ASSERT_TRUE(r.hasValue()) << r.status().toString();
  EXPECT_EQ(r->graph->outputs()[0]->shape(), (Shape{5, 6, 1, 1}));
}

TEST(OnnxModernOpsTest, GatherOfComputedDataByPermutedIndicesIsATranspose) {
  // idx[i][j][k] = i*6 + k*3 + j: [2, 3, 2] viewed as [2, 2, 3] transposed.
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 2; ++k) idx.push_back(i * 6 + k * 3 + j);
  auto g = importOk(flatGather(2, {2, 3, 2}, idx));
  ASSERT_TRUE(g);
  const Node* t = findOp(*g, OpKind::Transpose);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->attrs().getInts("perm"), (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(t->input(0)->shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{2, 3, 2}));
}

TEST(OnnxModernOpsTest, GatherOfComputedDataByEvenlySpacedIndicesIsASlice) {
  OnnxModelBuilder b;
  b.input("x", {2, 8, 3});
  b.node("Relu", {"x"}, {"r"});
  b.initializerI64("odd", {4}, {1, 3, 5, 7});
  setInt(b.node("Gather", {"r", "odd"}, {"y"}), "axis", 1);
  b.initializerI64("last", {}, {-1});
  setInt(b.node("Gather", {"r", "last"}, {"z"}), "axis", 1);
  b.output("y");
  b.output("z");
  auto g = importOk(b);
  ASSERT_TRUE(g);
  EXPECT_EQ(countOps(*g, OpKind::Slice), 2);
  const Node* s = findOp(*g, OpKind::Slice);
  EXPECT_EQ(s->attrs().getInts("starts"), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(s->attrs().getInts("steps"), (std::vector<int64_t>{1, 2, 1}));
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{2, 4, 3}));
  EXPECT_EQ(g->outputs()[1]->shape(), (Shape{2, 3}));
}

TEST(OnnxModernOpsTest, GatherOfComputedDataByOtherIndicesSaysHowToExport) {
  std::string err = importError(flatGather(2, {3}, {0, 0, 1}));
  EXPECT_NE(err.find("as_strided"), std::string::npos) << err;
  EXPECT_NE(err.find("dynamo=False"), std::string::npos) << err;
  EXPECT_NE(importError(flatGather(2, {2}, {0, 12})).find("out of range"), std::string::npos);
}

TEST(OnnxModernOpsTest, GatherOfAParameterIsAViewThatTrainsOrAnError) {
  // Rows 1 and 3 of a [4, 3] table: an evenly spaced slice of a parameter, which keeps training.
  auto table = [](std::vector<int64_t> rows) {
    OnnxModelBuilder b;
    b.initializer("w", {4, 3}, {});
    b.initializerI64("rows", {int64_t(rows.size())}, rows);
    b.node("Gather", {"w", "rows"}, {"y"});
    b.output("y");
    return b;
  };
  auto g = importOk(table({1, 3}));
  ASSERT_TRUE(g);
  const Node* s = findOp(*g, OpKind::Slice);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->input(0)->role(), TensorRole::Param);
  EXPECT_EQ(g->outputs()[0]->shape(), (Shape{2, 3}));
  // An embedding lookup is refused: folding it would freeze the table.
  std::string err = importError(table({2, 0, 2}));
  EXPECT_NE(err.find("never folded"), std::string::npos) << err;
  EXPECT_EQ(err.find("dynamo=False"), std::string::npos) << err;
}

} // namespace
} // namespace hgp
