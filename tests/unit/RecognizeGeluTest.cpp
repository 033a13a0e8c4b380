// Tests of the recognize-gelu pass: the TorchScript exporter's erf formula of GELU becomes one
// Gelu, in both operand orders it writes; a chain with other constants, or whose intermediate is
// read elsewhere, stays as it is.
#include "passes/Pass.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace hgp {
namespace {

Value* scalar(Graph& g, float v) {
  auto d = std::make_shared<TensorData>();
  d->type = {DType::F32, {}};
  d->bytes.resize(4);
  std::memcpy(d->bytes.data(), &v, 4);
  return *g.addGraphValue(g.uniqueName("c"), TensorRole::Const, d->type, d);
}

Value* op(Graph& g, OpKind k, std::vector<Value*> ins) {
  return (*g.addNode(k, std::move(ins), {}))->output(0);
}

int count(const Graph& g, OpKind k) {
  int n = 0;
  for (const Node* x : g.nodes()) n += x->op() == k;
  return n;
}

/// x -> erf form of GELU -> output; `halfFirst` multiplies x by 0.5 first; `divisor` is the
/// constant x is divided by; `leak` also returns the Erf's result.
void buildGelu(Graph& g, bool halfFirst, float divisor, bool leak = false) {
  Value* x = *g.addGraphValue("x", TensorRole::Input, {DType::F32, {2, 3}});
  Value* e = op(g, OpKind::Erf, {op(g, OpKind::Div, {x, scalar(g, divisor)})});
  Value* a = op(g, OpKind::Add, {e, scalar(g, 1.f)});
  Value* y = halfFirst ? op(g, OpKind::Mul, {op(g, OpKind::Mul, {x, scalar(g, 0.5f)}), a})
                       : op(g, OpKind::Mul, {op(g, OpKind::Mul, {x, a}), scalar(g, 0.5f)});
  g.addOutput(y);
  if (leak) g.addOutput(e);
}

TEST(RecognizeGeluTest, TheExportersErfFormBecomesOneGelu) {
  for (bool halfFirst : {false, true}) {
    Graph g;
    buildGelu(g, halfFirst, float(std::sqrt(2.0)));
    PassContext ctx;
    ASSERT_TRUE(runPipeline(g, {"recognize-gelu"}, ctx).isOk());
    EXPECT_EQ(count(g, OpKind::Gelu), 1) << halfFirst;
    EXPECT_EQ(int(g.nodes().size()), 1) << halfFirst;
    EXPECT_EQ(g.outputs()[0]->producer()->op(), OpKind::Gelu);
    EXPECT_EQ(g.outputs()[0]->producer()->attrs().getString("approximate"), "none");
  }
}

TEST(RecognizeGeluTest, OtherChainsStay) {
  Graph other;
  buildGelu(other, false, 2.f);
  Graph shared;
  buildGelu(shared, false, float(std::sqrt(2.0)), /*leak=*/true);
  for (Graph* g : {&other, &shared}) {
    PassContext ctx;
    ASSERT_TRUE(runPipeline(*g, {"recognize-gelu"}, ctx).isOk());
    EXPECT_EQ(count(*g, OpKind::Gelu), 0);
    EXPECT_EQ(count(*g, OpKind::Erf), 1);
  }
}

} // namespace
} // namespace hgp
