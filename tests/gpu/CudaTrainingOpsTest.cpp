// The GPU op suite's training ops (CudaOpSuiteTest.cpp has the rest): the dropout mask, which
// must be the CPU's bit for bit, BatchNorm's statistics gradient, the all-reduce on one rank, and
// the losses, including labels out of range, against the CPU reference (OpCheck.h). Tolerances as
// in CudaOpSuiteTest.cpp: 1e-5 for f32 math with TF32 off, 0 where the executor computes exactly
// the CPU's operations in the CPU's order.
#include "tests/gpu/OpCheck.h"

namespace hgp::gputest {
namespace {

// ---- Randomness ----------------------------------------------------------------------------

TEST(CudaOpSuite, DropoutMaskIsTheCpuMask) {
  HGP_REQUIRE_CUDA();
  for (Shape s : {Shape{4, 16}, Shape{5, 7}, Shape{3, 1000}})
    for (int64_t iter : {int64_t(0), int64_t(3), int64_t(1) << 33}) {
      RunSpec spec;
      spec.tol = 0;
      checkOp(
          "dropout" + shapeToString(s) + " iter " + std::to_string(iter), {f32(s)},
          [&](Graph& g, auto& p) {
            Value* it = addValue(g, "iter", TensorRole::State, {DType::I64, {}}, scalarI64(iter));
            return std::vector<Value*>{
                op1(g, OpKind::Dropout, {p[0], it},
                    attrs({{"ratio", 0.3}, {"seed", int64_t(7)}, {"key", int64_t(11)}}))};
          },
          spec);
    }
}

/// The gradients of an inference-mode BatchNorm's statistics (--sync-bn), against the CPU.
TEST(CudaOpSuite, BnStatsGrad) {
  HGP_REQUIRE_CUDA();
  Graph g("bnstatsgrad");
  std::vector<Value*> ps;
  for (int i = 0; i < 4; ++i) ps.push_back(addValue(g, "p" + std::to_string(i), TensorRole::Param, f32({37})));
  // var must be positive: square it.
  Value* var = op1(g, OpKind::Mul, {ps[3], ps[3]});
  Node* n = addNode(g, OpKind::BnStatsGrad, {ps[0], ps[1], ps[2], var}, attrs({{"epsilon", 1e-5}}));
  ASSERT_NE(n, nullptr);
  auto e = emit(g, bindOutputs(g, n->outputs()));
  ASSERT_TRUE(e.has_value());
  runAndCompare(*e);
}

// ---- Collectives ---------------------------------------------------------------------------

/// On one rank (no communicator) an all-reduce bucket copies each operand to its result, in
/// eager and graph mode; the 2-GPU NCCL path is tests/gpu/dp_equivalence.sh.
TEST(CudaOpSuite, AllReduceOnOneRankIsTheIdentity) {
  HGP_REQUIRE_CUDA();
  Graph g("allreduce");
  std::vector<Value*> ins;
  for (Shape s : {Shape{3, 5}, Shape{}, Shape{1000}})
    ins.push_back(addValue(g, "p" + std::to_string(ins.size()), TensorRole::Param, f32(s)));
  // Operands that are results of other steps, as gradients are, so the bucket copies them.
  std::vector<Value*> local;
  for (Value* v : ins) local.push_back(op1(g, OpKind::Scale, {v}, attrs({{"alpha", 2.0}})));
  Node* n = addNode(g, OpKind::AllReduce, local,
                    attrs({{"reduce", std::string("avg")}, {"ranks", int64_t(2)}, {"bucket", int64_t(0)}}),
                    int(local.size()));
  ASSERT_NE(n, nullptr);
  auto e = emit(g, bindOutputs(g, n->outputs()));
  ASSERT_TRUE(e.has_value());
  RunSpec spec;
  spec.tol = 0;
  runAndCompare(*e, spec);
}

// ---- Losses --------------------------------------------------------------------------------

Feeder labelFeed(int64_t classes) {
  return [classes](const PlanTensor& t, int run) {
    if (t.name == "labels") return indexBytes(t.type, hashName(t.name, uint64_t(run)), classes);
    return uniformBytes(t.type, hashName(t.name, uint64_t(run) + 3), -3, 3);
  };
}

TEST(CudaOpSuite, Losses) {
  HGP_REQUIRE_CUDA();
  for (Shape s : {Shape{6, 5}, Shape{3, 1000}, Shape{1, 2}})
    for (double smoothing : {0.0, 0.1}) {
      RunSpec spec;
      spec.feed = labelFeed(s[1]);
      checkOp(
          "cross-entropy" + shapeToString(s), {f32(s)},
          [&](Graph& g, auto& p) {
            Value* labels = addValue(g, "labels", TensorRole::Input, {DType::I64, {s[0]}});
            Value* loss = op1(g, OpKind::SoftmaxCrossEntropy, {p[0], labels},
                              attrs({{"label_smoothing", smoothing}}));
            return std::vector<Value*>{loss, op1(g, OpKind::CountCorrect, {p[0], labels})};
          },
          spec);
    }
  RunSpec spec;
  spec.feed = labelFeed(5);
  checkOp(
      "mse-onehot", {f32({4, 5})},
      [](Graph& g, auto& p) {
        Value* labels = addValue(g, "labels", TensorRole::Input, {DType::I64, {4}});
        Value* hot = op1(g, OpKind::OneHot, {labels}, attrs({{"depth", int64_t(5)}}));
        return std::vector<Value*>{op1(g, OpKind::MseLoss, {p[0], hot}), hot};
      },
      spec);
}

TEST(CudaOpSuite, OutOfRangeLabelsPoisonTheLossWithoutReadingOutOfBounds) {
  HGP_REQUIRE_CUDA();
  if (cpuStandIn()) GTEST_SKIP() << "the CPU rejects such labels";
  Graph g("bad-labels");
  Value* logits = addValue(g, "logits", TensorRole::Input, f32({3, 4}));
  Value* labels = addValue(g, "labels", TensorRole::Input, {DType::I64, {3}});
  std::vector<Value*> outs = {op1(g, OpKind::SoftmaxCrossEntropy, {logits, labels}),
                              op1(g, OpKind::CountCorrect, {logits, labels}),
                              op1(g, OpKind::OneHot, {labels}, attrs({{"depth", int64_t(4)}}))};
  auto e = emit(g, bindOutputs(g, outs));
  ASSERT_TRUE(e.has_value());
  auto b = makeGpuBackend(BackendOptions{.eager = true});
  ASSERT_TRUE(b.hasValue());
  ASSERT_TRUE((*b)->load(e->plan, InitData{e->data, {}}).isOk());
  float x[12] = {5, 0, 0, 0, 0, 5, 0, 0, 0, 0, 5, 0};
  int64_t lab[3] = {0, 1 << 30, -7};
  ASSERT_TRUE((*b)->write(e->plan.findTensor("logits"), x).isOk());
  ASSERT_TRUE((*b)->write(e->plan.findTensor("labels"), lab).isOk());
  ASSERT_TRUE((*b)->run("step").isOk());
  float loss = 0, correct = 0, hot[12];
  ASSERT_TRUE((*b)->read(e->plan.binding("out.0"), &loss).isOk());
  ASSERT_TRUE((*b)->read(e->plan.binding("out.1"), &correct).isOk());
  ASSERT_TRUE((*b)->read(e->plan.binding("out.2"), hot).isOk());
  EXPECT_TRUE(std::isnan(loss));
  EXPECT_EQ(correct, 1.f);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(hot[i], i == 0 ? 1.f : 0.f) << i;
}

} // namespace
} // namespace hgp::gputest
