// Issue 23's selection ops on the CUDA backend against the CPU reference (OpCheck.h), forward and
// backward, eager and captured: Max and Min (their gradients route through Equal, Greater, Less
// and Where), the comparisons, Where, ReduceMax over several axis sets, in f32 and through bf16
// Casts (16-bit storage, CudaHalf); RandomNormal against the CPU's draws; the Casts of a graph
// boundary's bool, byte for byte.
#include "tests/gpu/OpCheck.h"

namespace hgp::gputest {
namespace {

/// Operand shapes that take each of the elementwise kernels' operand maps: same shape (the
/// 16-byte path), a per-channel vector and a scalar (Block), and a strided broadcast (General).
const std::vector<std::pair<Shape, Shape>> kShapes = {
    {{2, 3, 8}, {2, 3, 8}}, {{2, 3, 4, 5}, {3, 1, 1}}, {{4, 6}, {1}}, {{3, 1, 5}, {4, 1}}};

Value* castTo(Graph& g, Value* v, const char* dtype) {
  return op1(g, OpKind::Cast, {v}, attrs({{"to", std::string(dtype)}}));
}

TEST(CudaSelectionOps, MaxMinAndComparisons) {
  HGP_REQUIRE_CUDA();
  for (const char* dtype : {"f32", "bf16"})
    for (const auto& [sa, sb] : kShapes) {
      bool half = std::string(dtype) != "f32";
      checkOp(std::string("max-min ") + dtype + shapeToString(sa) + shapeToString(sb),
              {f32(sa), f32(sb)}, [&](Graph& g, auto& p) {
                Value *a = p[0], *b = p[1];
                if (half) a = castTo(g, a, dtype), b = castTo(g, b, dtype);
                std::vector<Value*> outs;
                for (OpKind op : {OpKind::Max, OpKind::Min, OpKind::Less, OpKind::Greater,
                                  OpKind::Equal}) {
                  Value* y = op1(g, op, {a, b});
                  outs.push_back(half ? castTo(g, y, "f32") : y);
                }
                // Ties: Max(a, a) splits the gradient between its operands.
                outs.push_back(op1(g, OpKind::Max, {p[0], p[0]}));
                return outs;
              });
    }
}

TEST(CudaSelectionOps, Where) {
  HGP_REQUIRE_CUDA();
  for (const char* dtype : {"f32", "bf16"})
    for (const auto& [sa, sb] : kShapes) {
      bool half = std::string(dtype) != "f32";
      checkOp(std::string("where ") + dtype + shapeToString(sa) + shapeToString(sb),
              {f32(sa), f32(sb)}, [&](Graph& g, auto& p) {
                Value *a = p[0], *b = p[1];
                if (half) a = castTo(g, a, dtype), b = castTo(g, b, dtype);
                Value* c = op1(g, OpKind::Greater, {b, a}); // broadcast to the result's shape
                Value* y = op1(g, OpKind::Where, {c, a, b});
                Value* z = op1(g, OpKind::Where, {op1(g, OpKind::Less, {b, b}), b, a});
                return std::vector<Value*>{half ? castTo(g, y, "f32") : y,
                                           half ? castTo(g, z, "f32") : z};
              });
    }
}

TEST(CudaSelectionOps, ReduceMax) {
  HGP_REQUIRE_CUDA();
  std::vector<std::pair<Shape, I>> cases = {{{3, 4, 5}, {1}},       {{3, 4, 5}, {0, 2}},
                                            {{2, 3, 7, 7}, {2, 3}},  {{6, 33}, {0}},
                                            {{4, 1, 9}, {0, 1, 2}}, {{5, 8}, {1}}};
  for (const char* dtype : {"f32", "bf16"})
    for (const auto& [s, axes] : cases)
      for (int64_t keep : {int64_t(0), int64_t(1)}) {
        bool half = std::string(dtype) != "f32";
        checkOp(std::string("reducemax ") + dtype + shapeToString(s) + " keep " +
                    std::to_string(keep),
                {f32(s)}, [&](Graph& g, auto& p) {
                  Value* x = half ? castTo(g, p[0], dtype) : p[0];
                  Value* y = op1(g, OpKind::ReduceMax, {x},
                                 attrs({{"axes", axes}, {"keepdims", keep}}));
                  return std::vector<Value*>{half ? castTo(g, y, "f32") : y};
                });
      }
}

TEST(CudaSelectionOps, RandomNormalIsTheCpuDraw) {
  HGP_REQUIRE_CUDA();
  for (Shape s : {Shape{8, 1, 1, 1}, Shape{5, 7}, Shape{3, 1000}})
    for (int64_t iter : {int64_t(0), int64_t(5), int64_t(1) << 33}) {
      RunSpec spec;
      spec.tol = 1e-6; // double log and cos: libm's and CUDA's may differ in the last bit
      checkOp("randomnormal" + shapeToString(s) + " iter " + std::to_string(iter), {f32(s)},
              [&](Graph& g, auto& p) {
                Value* it =
                    addValue(g, "iter", TensorRole::State, {DType::I64, {}}, scalarI64(iter));
                Value* z = op1(g, OpKind::RandomNormal, {p[0], it},
                               attrs({{"mean", 0.25}, {"scale", 1.5}, {"seed", int64_t(3)},
                                      {"key", int64_t(9)}}));
                return std::vector<Value*>{op1(g, OpKind::Mul, {p[0], z})};
              },
              spec);
    }
}

TEST(CudaSelectionOps, BoolCastsAreByteExact) {
  HGP_REQUIRE_CUDA();
  RunSpec spec;
  spec.tol = 0;
  checkOp("bool casts", {f32({4, 9})}, [&](Graph& g, auto& p) {
    Value* zeroish = op1(g, OpKind::Sub, {p[0], p[0]}); // zeros: bool 0
    Value* b = castTo(g, p[0], "bool");
    Value* back = castTo(g, b, "f32");
    Value* half = castTo(g, castTo(g, castTo(g, p[0], "bf16"), "bool"), "bf16");
    return std::vector<Value*>{op1(g, OpKind::Mul, {p[0], back}), castTo(g, zeroish, "bool"),
                               castTo(g, half, "f32")};
  }, spec, "fp32", /*lossTerms=*/1);
}

} // namespace
} // namespace hgp::gputest
