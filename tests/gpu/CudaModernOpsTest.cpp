// The ops of the modern CNN families (EfficientNet, ConvNeXt) on the CUDA backend against the
// CPU reference (GpuTestUtil.h), forward and backward, eager and captured: LayerNorm over the
// trailing dims (ConvNeXt's channels-last form and others), GELU in both forms, the elementary
// functions, and the Bernoulli mask of stochastic depth, which must be the CPU's bit for bit.
#include "tests/gpu/OpCheck.h"

namespace hgp::gputest {
namespace {

TEST(CudaModernOps, LayerNorm) {
  HGP_REQUIRE_CUDA();
  // (shape, axis): ConvNeXt's [N, H, W, C] over C, C not a multiple of 32, one row, two dims.
  std::vector<std::pair<Shape, int64_t>> cases = {
      {{2, 7, 7, 96}, 3}, {{3, 5, 37}, 2}, {{1, 200}, 0}, {{4, 3, 6, 5}, 2}, {{300, 8}, 1}};
  for (const auto& [s, axis] : cases) {
    Shape inner(s.begin() + axis, s.end());
    checkOp("layernorm" + shapeToString(s) + " axis " + std::to_string(axis),
            {f32(s), f32(inner), f32(inner)}, [&, axis = axis](Graph& g, auto& p) {
              AttrMap a;
              a.setInt("axis", axis);
              a.setFloat("epsilon", 1e-6);
              Node* n = addNode(g, OpKind::LayerNorm, {p[0], p[1], p[2]}, a);
              return std::vector<Value*>{n->output(0)};
            });
  }
}

TEST(CudaModernOps, GeluAndElementaryFunctions) {
  HGP_REQUIRE_CUDA();
  struct Case {
    OpKind op;
    std::string approximate;
    double lo, hi;
  };
  std::vector<Case> cases = {{OpKind::Gelu, "none", -5, 5},  {OpKind::Gelu, "tanh", -5, 5},
                             {OpKind::Erf, "", -3, 3},        {OpKind::Exp, "", -3, 3},
                             {OpKind::Log, "", 0.1, 4},       {OpKind::Sqrt, "", 0.1, 4},
                             {OpKind::Reciprocal, "", 0.5, 4}};
  for (const Case& c : cases)
    for (Shape s : {Shape{3, 4, 5}, Shape{7, 3}, Shape{1}}) {
      RunSpec spec;
      spec.feed = rangeFeed("p0", c.lo, c.hi);
      AttrMap a;
      if (!c.approximate.empty()) a.setString("approximate", c.approximate);
      checkOp(std::string(opName(c.op)) + c.approximate + shapeToString(s), {f32(s)},
              [&](Graph& g, auto& p) { return std::vector<Value*>{op1(g, c.op, {p[0]}, a)}; },
              spec);
    }
}

TEST(CudaModernOps, BernoulliMaskIsTheCpuMask) {
  HGP_REQUIRE_CUDA();
  // Stochastic depth's row mask [N, 1, 1, 1] times the block, and larger masks.
  for (Shape s : {Shape{8, 1, 1, 1}, Shape{5, 7}, Shape{3, 1000}})
    for (int64_t iter : {int64_t(0), int64_t(5), int64_t(1) << 33}) {
      RunSpec spec;
      spec.tol = 0;
      checkOp("bernoulli" + shapeToString(s) + " iter " + std::to_string(iter), {f32(s)},
              [&](Graph& g, auto& p) {
                Value* it =
                    addValue(g, "iter", TensorRole::State, {DType::I64, {}}, scalarI64(iter));
                AttrMap a;
                a.setFloat("p", 0.8);
                a.setInt("seed", 3);
                a.setInt("key", 9);
                Value* mask = op1(g, OpKind::Bernoulli, {p[0], it}, a);
                return std::vector<Value*>{op1(g, OpKind::Mul, {p[0], mask})};
              },
              spec);
    }
}

} // namespace
} // namespace hgp::gputest
