// Batch slicing on CUDA (compiler/schedule/BatchSlicing.h): a differentiated conv-ReLU-conv-ReLU
// graph, split into sub-batches and pipelined over micro-batches, runs on the CUDA backend (eager
// and graph mode, five runs with fresh values), on one stream and spread over four (the slices
// then run concurrently, joined by events), and matches the CPU backend running the same plan. The
// CPU backend's own agreement with the unsplit plan is tested without a GPU
// (tests/unit/BatchSlicingTest.cpp, tests/integration/test_slicing.py). This covers the CUDA
// executors on slices, above all ConvBwdFilter with accumulate=1 (cuDNN beta = 1, legacy and
// graph-API engines, algorithm timing on a scratch dW) inside a captured graph.
//
// Tolerance 1e-4: cuDNN's sums over the batch associate differently from the CPU's, and the
// filter gradient adds slices' sums.
#include "compiler/schedule/AssignStreams.h"
#include "compiler/schedule/BatchSlicing.h"
#include "tests/gpu/GpuTestUtil.h"

namespace hgp::gputest {
namespace {

AttrMap conv3x3() {
  AttrMap a;
  a.setInts("strides", {1, 1});
  a.setInts("pads", {1, 1, 1, 1});
  a.setInts("dilations", {1, 1});
  a.setInt("group", 1);
  return a;
}

std::optional<EmittedPlan> convNet() {
  Graph g("sliced");
  TensorType xt{DType::F32, {8, 4, 6, 6}};
  Value* x = addValue(g, "x", TensorRole::Input, xt);
  Value* w1 = addValue(g, "w1", TensorRole::Param, {DType::F32, {8, 4, 3, 3}});
  Value* w2 = addValue(g, "w2", TensorRole::Param, {DType::F32, {8, 8, 3, 3}});
  Value* b2 = addValue(g, "b2", TensorRole::Param, {DType::F32, {8}});
  Value* h = op1(g, OpKind::Relu, {op1(g, OpKind::Conv, {x, w1}, conv3x3())});
  h = op1(g, OpKind::Relu, {op1(g, OpKind::Conv, {h, w2, b2}, conv3x3())});
  auto e = emit(g, differentiate(g, {h}));
  if (e) e->plan.meta.setInt("batch", 8);
  return e;
}

TEST(CudaSlicing, SplitAndPipelinedStepsMatchTheCpu) {
  HGP_REQUIRE_CUDA();
  std::optional<EmittedPlan> whole = convNet();
  ASSERT_TRUE(whole.has_value());
  auto target = findTarget("h200");
  ASSERT_TRUE(target.hasValue());
  for (auto [width, depth] : {std::pair{2, 0}, {0, 2}, {2, 2}, {4, 2}})
    for (int streams : {1, 4}) {
      SCOPED_TRACE("width " + std::to_string(width) + " depth " + std::to_string(depth) + ", " +
                   std::to_string(streams) + " streams");
      EmittedPlan e = *whole;
      SliceOptions o;
      o.width = width;
      o.depth = depth;
      o.split = width > 1;
      o.pipeline = depth > 1;
      sliceBatches(e.plan, o);
      ASSERT_TRUE(e.plan.validate().isOk());
      int accumulating = 0;
      for (const PlanStep& s : e.plan.programs[0].steps)
        accumulating += s.op == OpKind::ConvBwdFilter && s.attrs.getInt("accumulate", 0) == 1;
      EXPECT_GT(accumulating, 0) << printPlan(e.plan);
      if (streams > 1) {
        StreamAssignment a = assignStreams(e.plan, *target, Precision::FP32, streams);
        EXPECT_GT(a.maxStreamsUsed, 1) << "the slices stayed on one stream";
        ASSERT_TRUE(e.plan.validate().isOk());
      }
      RunSpec spec;
      spec.tol = 1e-4;
      runAndCompare(e, spec);
    }
}

} // namespace
} // namespace hgp::gputest
