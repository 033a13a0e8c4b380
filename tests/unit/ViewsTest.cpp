// Views in the memory plan (compiler/analysis/Views.h): which Reshapes, Slices, Splits and Concats
// become views, that their steps are gone from the plan, that the tensors say whose bytes they
// share, and that the CPU backend computes with them what a plain loop over the inputs computes.
#include "FusedTestGraphs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

namespace hgp {
namespace {

using fusiontest::node;
using fusiontest::runStep;

AttrMap ints(const std::string& name, std::vector<int64_t> v, AttrMap a = {}) {
  a.setInts(name, std::move(v));
  return a;
}

AttrMap axisAttr(int64_t axis, AttrMap a = {}) {
  a.setInt("axis", axis);
  return a;
}

std::optional<EmittedPlan> emit(const Graph& g, std::map<std::string, std::string> bindings,
                                bool views, bool strided = false) {
  EmitOptions eo;
  eo.modelName = g.name();
  eo.meta.setString("precision", "fp32");
  eo.views = views;
  eo.stridedViews = strided;
  auto e = emitPlan({ProgramSource{"step", &g, std::move(bindings)}}, eo);
  EXPECT_TRUE(e.hasValue()) << e.status().toString();
  if (!e.hasValue()) return std::nullopt;
  return std::move(*e);
}

int countSteps(const Plan& p, OpKind op) {
  int n = 0;
  for (const PlanStep& s : p.programs[0].steps) n += s.op == op;
  return n;
}

const PlanTensor& tensorOf(const Plan& p, const Value* v) {
  return p.tensors[size_t(p.findTensor(v->name()))];
}

std::vector<float> floats(const std::vector<uint8_t>& bytes) {
  std::vector<float> f(bytes.size() / sizeof(float));
  std::memcpy(f.data(), bytes.data(), bytes.size());
  return f;
}

float relu(float x) { return x > 0 ? x : 0; }

/// Emits `g` with and without views, runs both on the CPU backend with the same inputs, and
/// checks that every output is bit-identical and equal to `expect` of the inputs a and b.
void checkRuns(const Graph& g, const std::map<std::string, std::string>& bindings,
               const std::function<std::vector<float>(const std::vector<float>&,
                                                      const std::vector<float>&)>& expect,
               bool strided = false) {
  auto withViews = emit(g, bindings, true, strided), without = emit(g, bindings, false);
  ASSERT_TRUE(withViews && without);
  auto be1 = createCpuBackend(), be2 = createCpuBackend();
  auto got = runStep(*be1, *withViews, 7), plain = runStep(*be2, *without, 7);
  ASSERT_EQ(got.size(), plain.size());
  for (const auto& [name, bytes] : plain) EXPECT_EQ(got.at(name), bytes) << name;
  const Plan& p = withViews->plan;
  auto input = [&](const char* n) {
    int t = p.findTensor(n);
    return t < 0 ? std::vector<float>{} : fusiontest::feed(n, p.tensors[size_t(t)].type.numElements(), 7);
  };
  std::vector<float> want = expect(input("a"), input("b")), out = floats(got.at("out.0"));
  ASSERT_EQ(out.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(out[i], want[i]) << "element " << i;
}

TEST(Views, ReshapeAliasesItsInputAndRunsNoStep) {
  Graph g("reshape");
  Value* a = *g.addGraphValue("a", TensorRole::Input, {DType::F32, {2, 4, 2, 2}});
  Value* r = node(g, OpKind::Relu, {a});
  Value* y = node(g, OpKind::Reshape, {r}, ints("shape", {2, 16}));
  Value* z = node(g, OpKind::Relu, {y});
  g.addOutput(z);
  std::map<std::string, std::string> b{{"out.0", z->name()}};
  auto e = emit(g, b, true);
  ASSERT_TRUE(e);
  EXPECT_EQ(countSteps(e->plan, OpKind::Reshape), 0);
  EXPECT_EQ(e->plan.programs[0].steps.size(), 2u);
  const PlanTensor &ty = tensorOf(e->plan, y), &tr = tensorOf(e->plan, r);
  EXPECT_EQ(ty.alias, AliasKind::View);
  EXPECT_EQ(ty.aliasOf, e->plan.findTensor(r->name()));
  EXPECT_EQ(ty.offset, tr.offset);
  auto plain = emit(g, b, false);
  EXPECT_EQ(countSteps(plain->plan, OpKind::Reshape), 1);
  EXPECT_EQ(tensorOf(plain->plan, y).alias, AliasKind::None);
  checkRuns(g, b, [](const std::vector<float>& x, const std::vector<float>&) {
    std::vector<float> out;
    for (float v : x) out.push_back(relu(relu(v)));
    return out;
  });
}

TEST(Views, ReshapeOfAGraphInputStaysACopy) {
  Graph g("reshape-input");
  Value* a = *g.addGraphValue("a", TensorRole::Input, {DType::F32, {2, 16}});
  Value* y = node(g, OpKind::Reshape, {a}, ints("shape", {32}));
  g.addOutput(y);
  auto e = emit(g, {{"out.0", y->name()}}, true);
  ASSERT_TRUE(e);
  EXPECT_EQ(countSteps(e->plan, OpKind::Reshape), 1);
  EXPECT_EQ(tensorOf(e->plan, y).alias, AliasKind::None);
}

/// Concat along the batch axis: each part is one contiguous range of the result.
TEST(Views, ConcatAlongTheBatchIsWrittenInPlace) {
  Graph g("concat0");
  Value* a = *g.addGraphValue("a", TensorRole::Input, {DType::F32, {2, 8}});
  Value* b = *g.addGraphValue("b", TensorRole::Input, {DType::F32, {3, 8}});
  Value* ra = node(g, OpKind::Relu, {a});
  Value* nb = node(g, OpKind::Neg, {b});
  Value* c = node(g, OpKind::Concat, {ra, nb}, axisAttr(0));
  Value* z = node(g, OpKind::Relu, {c});
  g.addOutput(z);
  std::map<std::string, std::string> bind{{"out.0", z->name()}};
  auto e = emit(g, bind, true);
  ASSERT_TRUE(e);
  EXPECT_EQ(countSteps(e->plan, OpKind::Concat), 0);
  const PlanTensor &tc = tensorOf(e->plan, c), &ta = tensorOf(e->plan, ra),
                   &tb = tensorOf(e->plan, nb);
  EXPECT_EQ(ta.alias, AliasKind::Part);
  EXPECT_EQ(tb.alias, AliasKind::Part);
  EXPECT_EQ(ta.aliasOf, e->plan.findTensor(c->name()));
  EXPECT_EQ(ta.offset, tc.offset);
  EXPECT_EQ(tb.offset, tc.offset + 2 * 8 * 4);
  checkRuns(g, bind, [](const std::vector<float>& x, const std::vector<float>& y) {
    std::vector<float> out;
    for (float v : x) out.push_back(relu(relu(v)));
    for (float v : y) out.push_back(relu(-v));
    return out;
  });
}

/// A channel concat of a batch of two is two runs of bytes per part: it stays a copy.
TEST(Views, ChannelConcatOfABatchStaysACopy) {
  Graph g("concat1");
  Value* a = *g.addGraphValue("a", TensorRole::Input, {DType::F32, {2, 16}});
  Value* b = *g.addGraphValue("b", TensorRole::Input, {DType::F32, {2, 16}});
  Value* c = node(g, OpKind::Concat, {node(g, OpKind::Relu, {a}), node(g, OpKind::Neg, {b})},
                  axisAttr(1));
  g.addOutput(c);
  auto e = emit(g, {{"out.0", c->name()}}, true);
  ASSERT_TRUE(e);
  EXPECT_EQ(countSteps(e->plan, OpKind::Concat), 1);
  for (const PlanTensor& t : e->plan.tensors) EXPECT_EQ(t.alias, AliasKind::None) << t.name;
}

/// Split and Slice along the batch axis are views; a slice whose offset is not 64-byte
/// aligned, or with a step, stays a copy.
TEST(Views, SplitAndSliceAreViewsWhereContiguousAndAligned) {
  Graph g("split");
  Value* a = *g.addGraphValue("a", TensorRole::Input, {DType::F32, {4, 16}});
  Value* r = node(g, OpKind::Relu, {a});
  AttrMap sa = axisAttr(0, ints("split", {1, 3}));
  auto split = g.addNode(OpKind::Split, {r}, sa);
  ASSERT_TRUE(split.hasValue()) << split.status().toString();
  Value *s0 = (*split)->output(0), *s1 = (*split)->output(1);
  AttrMap sl = ints("starts", {1, 0}, ints("ends", {3, 16}, ints("steps", {1, 1})));
  Value* mid = node(g, OpKind::Slice, {r}, sl);
  AttrMap odd = ints("starts", {0, 1}, ints("ends", {1, 9}, ints("steps", {1, 1})));
  Value* unaligned = node(g, OpKind::Slice, {r}, odd);
  AttrMap stepped = ints("starts", {0, 0}, ints("ends", {4, 16}, ints("steps", {2, 1})));
  Value* strided = node(g, OpKind::Slice, {r}, stepped);
  Value* z = node(g, OpKind::Concat,
                  {node(g, OpKind::Neg, {s1}), node(g, OpKind::Neg, {s0}), node(g, OpKind::Neg, {mid})},
                  axisAttr(0));
  g.addOutput(z);
  g.addOutput(unaligned);
  g.addOutput(strided);
  std::map<std::string, std::string> bind{
      {"out.0", z->name()}, {"out.1", unaligned->name()}, {"out.2", strided->name()}};
  auto e = emit(g, bind, true);
  ASSERT_TRUE(e);
  const Plan& p = e->plan;
  EXPECT_EQ(countSteps(p, OpKind::Split), 0);
  EXPECT_EQ(countSteps(p, OpKind::Slice), 2);
  EXPECT_EQ(countSteps(p, OpKind::Concat), 0);
  EXPECT_EQ(tensorOf(p, s1).alias, AliasKind::View);
  EXPECT_EQ(tensorOf(p, s1).offset, tensorOf(p, r).offset + 16 * 4);
  EXPECT_EQ(tensorOf(p, mid).offset, tensorOf(p, r).offset + 16 * 4);
  EXPECT_EQ(tensorOf(p, unaligned).alias, AliasKind::None);
  EXPECT_EQ(tensorOf(p, strided).alias, AliasKind::None);
  checkRuns(g, bind, [](const std::vector<float>& x, const std::vector<float>&) {
    std::vector<float> out;
    for (int row : {1, 2, 3, 0, 1, 2})
      for (int c = 0; c < 16; ++c) out.push_back(-relu(x[size_t(row * 16 + c)]));
    return out;
  });
}

/// A Concat operand that another Concat already holds, and a Concat of one value twice, copy.
TEST(Views, AValueIsAPartOfOneConcatOnly) {
  Graph g("twice");
  Value* a = *g.addGraphValue("a", TensorRole::Input, {DType::F32, {1, 16}});
  Value* r = node(g, OpKind::Relu, {a});
  Value* n = node(g, OpKind::Neg, {a});
  Value* c1 = node(g, OpKind::Concat, {r, n}, axisAttr(0));
  Value* c2 = node(g, OpKind::Concat, {n, r}, axisAttr(0));
  Value* c3 = node(g, OpKind::Concat, {c1, c1}, axisAttr(0));
  g.addOutput(c2);
  g.addOutput(c3);
  std::map<std::string, std::string> bind{{"out.0", c2->name()}, {"out.1", c3->name()}};
  auto e = emit(g, bind, true);
  ASSERT_TRUE(e);
  EXPECT_EQ(countSteps(e->plan, OpKind::Concat), 2);
  EXPECT_EQ(tensorOf(e->plan, r).alias, AliasKind::Part);
  checkRuns(g, bind, [](const std::vector<float>& x, const std::vector<float>&) {
    std::vector<float> out;
    for (float v : x) out.push_back(-v);
    for (float v : x) out.push_back(relu(v));
    return out;
  });
}

TEST(Views, PlanTextRoundTripsAndValidateChecksTheBytes) {
  Graph g("text");
  Value* a = *g.addGraphValue("a", TensorRole::Input, {DType::F32, {2, 16}});
  Value* r = node(g, OpKind::Relu, {a});
  Value* n = node(g, OpKind::Neg, {a});
  Value* c = node(g, OpKind::Concat, {r, n}, axisAttr(0));
  Value* y = node(g, OpKind::Reshape, {c}, ints("shape", {64}));
  g.addOutput(node(g, OpKind::Relu, {y}));
  auto e = emit(g, {{"out.0", g.outputs()[0]->name()}}, true);
  ASSERT_TRUE(e);
  std::string text = printPlan(e->plan);
  EXPECT_NE(text.find(" part=%" + c->name()), std::string::npos) << text;
  EXPECT_NE(text.find(" view=%" + c->name()), std::string::npos) << text;
  auto back = parsePlan(text);
  ASSERT_TRUE(back.hasValue()) << back.status().toString();
  EXPECT_EQ(printPlan(*back), text);
  Plan bad = *back;
  PlanTensor& t = bad.tensors[size_t(bad.findTensor(y->name()))];
  t.offset += 64;
  EXPECT_FALSE(bad.validate().isOk());
}

/// --strided-views: a channel Split of a batch of two is two pitched views (rows of 8 floats, 16
/// apart) when every reader takes them (Sum does, OpList.def's HGP_PITCHED); the text says so and
/// round-trips; the CPU computes with them what a loop computes; a reader that does not take
/// them (Relu) keeps the copy, which says why; validate refuses a pitched tensor such a step reads.
TEST(Views, StridedSplitIsPitchedWhereEveryReaderTakesIt) {
  Graph g("pitched");
  Value* a = *g.addGraphValue("a", TensorRole::Input, {DType::F32, {2, 16}});
  Node* sp = *g.addNode(OpKind::Split, {node(g, OpKind::Relu, {a})},
                        axisAttr(1, ints("split", {8, 8})), "split", 2);
  Value* s = node(g, OpKind::Sum, {sp->output(0), sp->output(1)});
  g.addOutput(s);
  std::map<std::string, std::string> bind{{"out.0", s->name()}};
  auto plain = emit(g, bind, true);
  ASSERT_TRUE(plain);
  EXPECT_EQ(countSteps(plain->plan, OpKind::Split), 1);
  auto e = emit(g, bind, true, /*strided=*/true);
  ASSERT_TRUE(e);
  EXPECT_EQ(countSteps(e->plan, OpKind::Split), 0);
  const PlanTensor &t0 = tensorOf(e->plan, sp->output(0)), &t1 = tensorOf(e->plan, sp->output(1)),
                   &whole = tensorOf(e->plan, sp->input(0));
  EXPECT_EQ(t0.row, 8);
  EXPECT_EQ(t0.pitch, 16);
  EXPECT_EQ(t1.offset, whole.offset + 8 * 4);
  EXPECT_EQ(t1.spanBytes(), (16 + 8) * 4);
  std::string text = printPlan(e->plan);
  EXPECT_NE(text.find(" row=8 pitch=16"), std::string::npos) << text;
  auto back = parsePlan(text);
  ASSERT_TRUE(back.hasValue()) << back.status().toString();
  EXPECT_EQ(printPlan(*back), text);
  checkRuns(g, bind, [](const std::vector<float>& x, const std::vector<float>&) {
    std::vector<float> out;
    for (int n = 0; n < 2; ++n)
      for (int c = 0; c < 8; ++c)
        out.push_back(relu(x[size_t(n * 16 + c)]) + relu(x[size_t(n * 16 + 8 + c)]));
    return out;
  }, /*strided=*/true);
  Plan bad = *back;
  for (PlanStep& st : bad.programs[0].steps)
    if (st.op == OpKind::Sum) st.op = OpKind::Add;
  Status v = bad.validate();
  EXPECT_FALSE(v.isOk());
  EXPECT_NE(v.message().find("does not accept"), std::string::npos) << v.message();

  Graph h("blocked");
  Value* b = *h.addGraphValue("a", TensorRole::Input, {DType::F32, {2, 16}});
  Node* sp2 = *h.addNode(OpKind::Split, {node(h, OpKind::Relu, {b})},
                         axisAttr(1, ints("split", {8, 8})), "split", 2);
  Value* u = node(h, OpKind::Add, {node(h, OpKind::Relu, {sp2->output(0)}), sp2->output(1)});
  h.addOutput(u);
  auto kept = emit(h, {{"out.0", u->name()}}, true, true);
  ASSERT_TRUE(kept);
  EXPECT_EQ(countSteps(kept->plan, OpKind::Split), 1);
  EXPECT_NE(printPlan(kept->plan).find("copy=\"Relu"), std::string::npos) << printPlan(kept->plan);
}

} // namespace
} // namespace hgp
