// The gradients of Max, Min and ReduceMax at ties, where finite differences say nothing, against
// PyTorch 1.13's (torch.maximum and torch.minimum split dY evenly between equal operands; amax
// splits it evenly among the elements equal to the maximum). The expected values were printed by
// /usr/bin/python3 with torch 1.13:
//   a = [1, 2, 3], b = [1, 5, 0]: maximum -> a.grad [0.5, 0, 1], b.grad [0.5, 1, 0];
//                                  minimum -> a.grad [0.5, 1, 0], b.grad [0.5, 0, 1]
//   a = [[2]], b = [2, 1, 2]: maximum(a, b).sum() -> a.grad [[2]], b.grad [0.5, 0, 0.5]
//   x = [[1, 3, 3, 2], [5, 5, 5, 0]]: x.amax(1) -> [[0, .5, .5, 0], [1/3, 1/3, 1/3, 0]];
//                                      x.amax() -> [[0, 0, 0, 0], [1/3, 1/3, 1/3, 0]]
// The loss is the sum of the result, so dY is 1 everywhere.
#include "compiler/plan/PlanEmitter.h"
#include "passes/Pass.h"
#include "runtime/Backend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>

namespace hgp {
namespace {

struct Param {
  Shape shape;
  std::vector<float> values;
};

/// The gradients of sum(build(params)) for parameters of the given values.
std::vector<std::vector<float>> gradsOfSum(
    const std::vector<Param>& ps, const std::function<Value*(Graph&, std::vector<Value*>&)>& build) {
  Graph g("ties");
  std::vector<Value*> params;
  for (size_t i = 0; i < ps.size(); ++i) {
    auto d = std::make_shared<TensorData>();
    d->type = {DType::F32, ps[i].shape};
    d->bytes.resize(ps[i].values.size() * 4);
    std::memcpy(d->bytes.data(), ps[i].values.data(), d->bytes.size());
    params.push_back(*g.addGraphValue("p" + std::to_string(i), TensorRole::Param, d->type, d));
  }
  Value* y = build(g, params);
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < y->rank(); ++i) axes.push_back(i);
  AttrMap ra;
  ra.setInts("axes", axes);
  ra.setInt("keepdims", 0);
  Value* loss = (*g.addNode(OpKind::ReduceSum, {y}, ra))->output(0);
  g.addOutput(loss);
  PassContext ctx;
  Status st = runPipeline(g, {"autodiff"}, ctx);
  EXPECT_TRUE(st.isOk()) << st.toString();
  ProgramSource prog{"forward", &g, {{"loss", loss->name()}}};
  for (auto& [p, grad] : ctx.paramGrads) {
    g.addOutput(grad);
    prog.bindings["grad." + p->name()] = grad->name();
  }
  auto emitted = emitPlan({prog}, EmitOptions{});
  EXPECT_TRUE(emitted.hasValue()) << emitted.status().toString();
  auto backend = createCpuBackend();
  EXPECT_TRUE(backend->load(emitted->plan, InitData{emitted->data, {}}).isOk());
  EXPECT_TRUE(backend->run("forward").isOk());
  std::vector<std::vector<float>> grads;
  for (size_t i = 0; i < ps.size(); ++i) {
    std::vector<float> gr(ps[i].values.size());
    int gi = emitted->plan.binding("grad.p" + std::to_string(i));
    EXPECT_GE(gi, 0);
    if (gi >= 0) EXPECT_TRUE(backend->read(gi, gr.data()).isOk());
    grads.push_back(gr);
  }
  return grads;
}

Value* apply(Graph& g, OpKind op, std::vector<Value*> ins, AttrMap a = {}) {
  return (*g.addNode(op, std::move(ins), std::move(a)))->output(0);
}

void expectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "element " << i;
}

TEST(AutodiffTiesTest, MaximumAndMinimumSplitTiesEvenly) {
  std::vector<Param> ps = {{{3}, {1, 2, 3}}, {{3}, {1, 5, 0}}};
  auto mx = gradsOfSum(ps, [](Graph& g, std::vector<Value*>& p) {
    return apply(g, OpKind::Max, {p[0], p[1]});
  });
  expectNear(mx[0], {0.5f, 0.f, 1.f});
  expectNear(mx[1], {0.5f, 1.f, 0.f});
  auto mn = gradsOfSum(ps, [](Graph& g, std::vector<Value*>& p) {
    return apply(g, OpKind::Min, {p[0], p[1]});
  });
  expectNear(mn[0], {0.5f, 1.f, 0.f});
  expectNear(mn[1], {0.5f, 0.f, 1.f});
}

TEST(AutodiffTiesTest, MaximumTiesUnderBroadcastingSumOverTheBroadcastDims) {
  std::vector<Param> ps = {{{1, 1}, {2}}, {{3}, {2, 1, 2}}};
  auto gr = gradsOfSum(ps, [](Graph& g, std::vector<Value*>& p) {
    return apply(g, OpKind::Max, {p[0], p[1]});
  });
  expectNear(gr[0], {2.f});
  expectNear(gr[1], {0.5f, 0.f, 0.5f});
}

TEST(AutodiffTiesTest, ReduceMaxSplitsAmongTheTiedElements) {
  std::vector<Param> ps = {{{2, 4}, {1, 3, 3, 2, 5, 5, 5, 0}}};
  for (int keep = 0; keep < 2; ++keep) {
    auto rows = gradsOfSum(ps, [&](Graph& g, std::vector<Value*>& p) {
      AttrMap a;
      a.setInts("axes", {1});
      a.setInt("keepdims", keep);
      return apply(g, OpKind::ReduceMax, {p[0]}, a);
    });
    const float t = 1.f / 3.f;
    expectNear(rows[0], {0, 0.5f, 0.5f, 0, t, t, t, 0});
  }
  auto all = gradsOfSum(ps, [](Graph& g, std::vector<Value*>& p) {
    AttrMap a;
    a.setInts("axes", {0, 1});
    a.setInt("keepdims", 0);
    return apply(g, OpKind::ReduceMax, {p[0]}, a);
  });
  const float t = 1.f / 3.f;
  expectNear(all[0], {0, 0, 0, 0, t, t, t, 0});
}

} // namespace
} // namespace hgp
