// CudaCastGroupTest.cpp - the CastGroup executor (runtime/cuda/ShapeOps.cu), which fuse-casts
// (passes/FuseCasts.cpp) makes from the mixed-precision parameter casts, against the CPU's
// Cast, bit for bit, eager and captured in a CUDA graph.
//
// 70 float32 parameters of sizes from 1 element to several kernel chunks (so one tensor spans
// several blocks and the group needs two launches of at most 64 tensors) are cast down to bf16
// or f16 in one CastGroup and back up to float32 in another. Casting is exact per element
// (round to nearest even down, exact up), so the tolerance is zero.
#include "tests/gpu/GpuTestUtil.h"

namespace hgp::gputest {
namespace {

std::optional<EmittedPlan> roundTripPlan(DType low) {
  Graph g("cast_group");
  std::vector<Value*> params;
  for (int k = 0; k < 70; ++k) {
    int64_t n = k % 7 == 0 ? 2048 * 3 + 5 * k : 1 + 37 * k;
    params.push_back(addValue(g, "p" + std::to_string(k), TensorRole::Param, {DType::F32, {n}}));
  }
  AttrMap down, up;
  down.setString("to", dtypeName(low));
  up.setString("to", "f32");
  Node* d = addNode(g, OpKind::CastGroup, params, down, int(params.size()));
  if (!d) return std::nullopt;
  Node* u = addNode(g, OpKind::CastGroup, d->outputs(), up, int(params.size()));
  if (!u) return std::nullopt;
  std::vector<Value*> outs = d->outputs();
  outs.insert(outs.end(), u->outputs().begin(), u->outputs().end());
  return emit(g, bindOutputs(g, outs));
}

TEST(CudaCastGroup, MatchesTheCpuCastsBitForBit) {
  HGP_REQUIRE_CUDA();
  for (DType low : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtypeName(low));
    auto e = roundTripPlan(low);
    ASSERT_TRUE(e);
    RunSpec spec;
    spec.tol = 0;
    spec.runs = 3;
    runAndCompare(*e, spec);
  }
}

} // namespace
} // namespace hgp::gputest
