// The GPU op suite: every op family, forward and backward, on the CUDA backend against the CPU
// reference (GpuTestUtil.h). Each case builds a small graph over parameters, differentiates it
// (so the gradient ops run too), and compares every output and gradient after each of five runs,
// in eager mode and in graph mode (captured, then replayed), with fresh parameter values every
// run. Shapes pick the edge cases: sizes that are not multiples of 4, batch 1, 1-D and 3-D
// windows, asymmetric pads, broadcasting, negative-step slices, reductions that do not divide.
//
// Tolerances (relative to the largest reference magnitude): 1e-5 for f32 math with TF32 off; 0
// (bit-identical) where the CUDA executor computes exactly the CPU's operations in the CPU's
// order: data movement, pooling, dropout, integer results; 2e-3 for convolutions and matrix
// products with TF32 on (10-bit mantissas), 2e-2 for the scalar test loss built on them (a sum
// with cancellation).
#include "tests/gpu/OpCheck.h"

namespace hgp::gputest {
namespace {

// ---- Normalization -------------------------------------------------------------------------

/// BatchNormTrain feeding a BnRunningUpdate whose results are carried into running stats.
std::vector<Value*> bnTrain(Graph& g, const std::vector<Value*>& p, double momentum = 0.9) {
  int64_t c = p[0]->shape()[1];
  Node* bn = addNode(g, OpKind::BatchNormTrain, {p[0], p[1], p[2]}, attrs({{"epsilon", 1e-5}}));
  Value* rm = addValue(g, "running_mean", TensorRole::State, f32({c}));
  Value* rv = addValue(g, "running_var", TensorRole::State, f32({c}), filled(f32({c}), 1.f));
  int64_t count = p[0]->type().numElements() / c;
  Node* upd = addNode(g, OpKind::BnRunningUpdate, {rm, rv, bn->output(1), bn->output(2)},
                      attrs({{"momentum", momentum}, {"unbiased", int64_t(1)}, {"count", count}}));
  g.addCarry(rm, upd->output(0));
  g.addCarry(rv, upd->output(1));
  return {bn->output(0), bn->output(1), bn->output(2)};
}

TEST(CudaOpSuite, BatchNormTraining) {
  HGP_REQUIRE_CUDA();
  for (Shape x : {Shape{4, 3, 5, 7}, Shape{2, 8, 16, 16}, Shape{1, 4, 6}, Shape{2, 3, 4, 4, 3},
                  Shape{32, 4, 64, 64}, Shape{3, 64, 7, 7}})
    checkOp(
        "bn-train " + shapeToString(x), {f32(x), f32({x[1]}), f32({x[1]})},
        [](Graph& g, auto& p) { return bnTrain(g, p); }, RunSpec{}, "fp32", 1);
}

TEST(CudaOpSuite, BatchNormTrainingLargeMeanKeepsTheVariance) {
  HGP_REQUIRE_CUDA();
  RunSpec spec;
  spec.feed = rangeFeed({{"p0", {1000.0, 1000.5}}});
  checkOp(
      "bn-offset", {f32({8, 5, 9, 9}), f32({5}), f32({5})},
      [](Graph& g, auto& p) { return bnTrain(g, p); }, spec, "fp32", 1);
}

TEST(CudaOpSuite, BatchNormInference) {
  HGP_REQUIRE_CUDA();
  for (Shape x : {Shape{2, 3, 5, 5}, Shape{1, 6, 8}, Shape{2, 4, 4, 4, 4}})
    checkOp("bn-frozen " + shapeToString(x), {f32(x), f32({x[1]}), f32({x[1]})},
            [](Graph& g, auto& p) -> std::vector<Value*> {
              TensorType c = f32({p[0]->shape()[1]});
              Value* mean =
                  addValue(g, "mean", TensorRole::State, c, dataOf(c, uniformBytes(c, 5)));
              Value* var =
                  addValue(g, "var", TensorRole::State, c, dataOf(c, uniformBytes(c, 6, 0.5, 2)));
              return {op1(g, OpKind::BatchNorm, {p[0], p[1], p[2], mean, var},
                          attrs({{"epsilon", 1e-5}}))};
            });
}

TEST(CudaOpSuite, LRN) {
  HGP_REQUIRE_CUDA();
  for (int64_t size : {3, 4})
    checkOp("lrn" + std::to_string(size), {f32({2, 5, 3, 3})}, [&](Graph& g, auto& p) {
      return std::vector<Value*>{
          op1(g, OpKind::LRN, {p[0]},
              attrs({{"size", size}, {"alpha", 1e-2}, {"beta", 0.75}, {"bias", 1.0}}))};
    });
}

// ---- Activations ---------------------------------------------------------------------------

TEST(CudaOpSuite, Activations) {
  HGP_REQUIRE_CUDA();
  struct Case {
    OpKind op;
    AttrMap a;
  };
  std::vector<Case> cases = {{OpKind::Relu, {}},
                             {OpKind::LeakyRelu, attrs({{"alpha", 0.1}})},
                             {OpKind::Clip, attrs({{"min", -0.5}, {"max", 0.6}})},
                             {OpKind::Clip, attrs({{"max", 0.6}})},
                             {OpKind::Sigmoid, {}},
                             {OpKind::Tanh, {}},
                             {OpKind::HardSigmoid, attrs({{"alpha", 0.2}, {"beta", 0.5}})},
                             {OpKind::HardSwish, {}},
                             {OpKind::Neg, {}},
                             {OpKind::Scale, attrs({{"alpha", -1.5}})}};
  RunSpec spec;
  spec.feed = rangeFeed({{"p0", {-4.0, 4.0}}});
  for (const Case& c : cases)
    for (Shape s : {Shape{3, 4, 5}, Shape{7, 3}, Shape{1}})
      checkOp(
          std::string(opName(c.op)) + shapeToString(s), {f32(s)},
          [&](Graph& g, auto& p) { return std::vector<Value*>{op1(g, c.op, {p[0]}, c.a)}; }, spec);
}

// ---- Pooling -------------------------------------------------------------------------------

AttrMap poolAttrs(I k, I s, I pads, bool ceil, I dil = {}) {
  AttrMap a =
      attrs({{"kernel_shape", k}, {"strides", s}, {"pads", pads}, {"ceil_mode", int64_t(ceil)}});
  if (!dil.empty()) a.setInts("dilations", dil);
  return a;
}

TEST(CudaOpSuite, MaxPool) {
  HGP_REQUIRE_CUDA();
  struct Case {
    Shape x;
    AttrMap a;
  };
  std::vector<Case> cases = {
      {{2, 3, 7, 6}, poolAttrs({3, 2}, {2, 2}, {1, 0, 1, 1}, true)},
      {{2, 3, 9, 8}, poolAttrs({3, 3}, {2, 1}, {1, 1, 1, 1}, false, {2, 1})},
      {{2, 3, 11}, poolAttrs({3}, {2}, {1, 1}, true)},
      {{1, 2, 5, 6, 4}, poolAttrs({2, 3, 2}, {2, 2, 1}, {0, 1, 1, 1, 0, 0}, true)},
      {{4, 8, 16, 16}, poolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, false)},
      {{2, 5, 14, 13}, poolAttrs({3, 3}, {1, 1}, {1, 1, 1, 1}, true)}, // Inception branch pool
      {{2, 3, 9, 8}, poolAttrs({2, 2}, {2, 2}, {0, 1, 1, 0}, true)},
      {{1, 2, 21, 20}, poolAttrs({16, 16}, {3, 2}, {1, 0, 2, 1}, true)}}; // 256-element windows
  for (int ties = 0; ties < 2; ++ties) {
    RunSpec spec;
    spec.tol = 0; // the same comparisons and sums, in the same order, as the CPU
    if (ties)     // small integers: many equal values, so the first-maximum rule matters
      spec.feed = [](const PlanTensor& t, int run) {
        std::vector<uint8_t> b = defaultFeed(t, run);
        if (t.name != "p0") return b;
        for (size_t i = 0; i + 4 <= b.size(); i += 4) {
          float v;
          std::memcpy(&v, b.data() + i, 4);
          v = std::floor(v * 1.5f);
          std::memcpy(b.data() + i, &v, 4);
        }
        return b;
      };
    for (const Case& c : cases)
      checkOp(
          "maxpool" + shapeToString(c.x) + (ties ? " ties" : ""), {f32(c.x)},
          [&](Graph& g, auto& p) {
            return std::vector<Value*>{op1(g, OpKind::MaxPool, {p[0]}, c.a)};
          },
          spec);
  }
}

TEST(CudaOpSuite, AveragePool) {
  HGP_REQUIRE_CUDA();
  struct Case {
    Shape x;
    AttrMap a;
  };
  std::vector<Case> cases = {
      {{2, 3, 7, 6}, poolAttrs({3, 3}, {2, 2}, {1, 1, 1, 0}, true)},
      {{2, 3, 8, 8}, poolAttrs({2, 2}, {2, 2}, {0, 0, 0, 0}, false)},
      {{2, 3, 10}, poolAttrs({4}, {3}, {2, 1}, true)},
      {{1, 2, 5, 4, 6}, poolAttrs({3, 2, 3}, {2, 1, 2}, {1, 0, 1, 0, 1, 1}, true)}};
  RunSpec spec;
  spec.tol = 0;
  for (int include = 0; include < 2; ++include)
    for (const Case& c : cases) {
      AttrMap a = c.a;
      a.setInt("count_include_pad", include);
      checkOp(
          "avgpool" + shapeToString(c.x) + (include ? " include-pad" : ""), {f32(c.x)},
          [&](Graph& g, auto& p) {
            return std::vector<Value*>{op1(g, OpKind::AveragePool, {p[0]}, a)};
          },
          spec);
    }
}

TEST(CudaOpSuite, GlobalAveragePool) {
  HGP_REQUIRE_CUDA();
  for (Shape x : {Shape{2, 3, 4, 5}, Shape{2, 3, 7}, Shape{1, 2, 100, 100}, Shape{2, 2, 3, 3, 3}})
    checkOp("gap" + shapeToString(x), {f32(x)}, [](Graph& g, auto& p) {
      return std::vector<Value*>{op1(g, OpKind::GlobalAveragePool, {p[0]})};
    });
}

// ---- Convolutions and matrix products (TF32 on and off) ------------------------------------

AttrMap convAttrs(I strides, I pads, I dil, int64_t group) {
  return attrs({{"strides", strides}, {"pads", pads}, {"dilations", dil}, {"group", group}});
}

void checkBothPrecisions(const std::string& what, std::vector<TensorType> params,
                         const Builder& build) {
  RunSpec fp32;
  checkOp(what + " fp32", params, build, fp32, "fp32");
  RunSpec tf32;
  tf32.tol = 2e-3;
  // The scalar loss sums products of TF32-rounded values with cancellation: looser.
  tf32.tolByBinding["loss"] = 2e-2;
  checkOp(what + " tf32", params, build, tf32, "tf32");
}

TEST(CudaOpSuite, Convolutions) {
  HGP_REQUIRE_CUDA();
  checkBothPrecisions("conv2d", {f32({2, 4, 7, 6}), f32({6, 2, 3, 3}), f32({6})},
                      [](Graph& g, auto& p) {
                        return std::vector<Value*>{op1(g, OpKind::Conv, {p[0], p[1], p[2]},
                                                       convAttrs({2, 1}, {1, 1, 1, 1}, {1, 2}, 2))};
                      });
  checkBothPrecisions("conv1d", {f32({2, 3, 9}), f32({4, 3, 3})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{op1(g, OpKind::Conv, {p[0], p[1]}, convAttrs({2}, {1, 1}, {1}, 1))};
  });
  checkBothPrecisions(
      "conv3d", {f32({1, 2, 4, 5, 4}), f32({3, 2, 2, 3, 2})}, [](Graph& g, auto& p) {
        return std::vector<Value*>{op1(g, OpKind::Conv, {p[0], p[1]},
                                       convAttrs({1, 2, 1}, {0, 1, 0, 0, 1, 0}, {1, 1, 1}, 1))};
      });
  checkBothPrecisions("depthwise", {f32({2, 3, 6, 6}), f32({3, 1, 3, 3})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{
        op1(g, OpKind::Conv, {p[0], p[1]}, convAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 3))};
  });
  checkBothPrecisions(
      "convtranspose", {f32({2, 4, 4, 3}), f32({4, 3, 3, 3}), f32({6})}, [](Graph& g, auto& p) {
        AttrMap a = convAttrs({2, 2}, {1, 1, 1, 1}, {1, 1}, 2);
        a.setInts("output_padding", {1, 0});
        return std::vector<Value*>{op1(g, OpKind::ConvTranspose, {p[0], p[1], p[2]}, a)};
      });
}

TEST(CudaOpSuite, MatrixProducts) {
  HGP_REQUIRE_CUDA();
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      Shape a = ta ? Shape{5, 3} : Shape{3, 5}, b = tb ? Shape{4, 5} : Shape{5, 4};
      checkBothPrecisions("gemm" + std::to_string(ta) + std::to_string(tb),
                          {f32(a), f32(b), f32({4})}, [&](Graph& g, auto& p) {
                            return std::vector<Value*>{op1(g, OpKind::Gemm, {p[0], p[1], p[2]},
                                                           attrs({{"transA", int64_t(ta)},
                                                                  {"transB", int64_t(tb)},
                                                                  {"alpha", 0.7},
                                                                  {"beta", 1.3}}))};
                          });
    }
  checkBothPrecisions("matmul-batched", {f32({2, 1, 3, 4}), f32({3, 4, 2})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{op1(g, OpKind::MatMul, {p[0], p[1]})};
  });
  checkBothPrecisions("matmul-vec", {f32({4}), f32({2, 4, 3})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{op1(g, OpKind::MatMul, {p[0], p[1]})};
  });
}

// ---- Elementwise ---------------------------------------------------------------------------

TEST(CudaOpSuite, BroadcastingArithmetic) {
  HGP_REQUIRE_CUDA();
  std::vector<std::pair<Shape, Shape>> shapes = {{{2, 3, 4, 5}, {2, 3, 4, 5}}, // same shape
                                                 {{2, 3, 4, 5}, {3, 1, 1}},    // per channel
                                                 {{2, 3, 5}, {}},              // scalar
                                                 {{2, 3, 4}, {2, 1, 4}},       // general
                                                 {{3, 1}, {1, 4}},             // both broadcast
                                                 {{5}, {3, 5}},                // row vector
                                                 {{1, 7, 1}, {7, 1}},
                                                 // A pack at a time (packedBroadcastKernel): a
                                                 // channels-last gate, an NCHW gate, a
                                                 // per-channel vector over 4 x 4.
                                                 {{2, 4, 4, 8}, {2, 1, 1, 8}},
                                                 {{2, 8, 4, 4}, {2, 8, 1, 1}},
                                                 {{2, 3, 4, 4}, {3, 1, 1}}};
  RunSpec spec;
  spec.feed = rangeFeed({{"p1", {0.5, 2.0}}});
  for (OpKind op : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div})
    for (const auto& [a, b] : shapes)
      checkOp(
          std::string(opName(op)) + shapeToString(a) + shapeToString(b), {f32(a), f32(b)},
          [&](Graph& g, auto& p) {
            return std::vector<Value*>{op1(g, op, {p[0], p[1]})};
          },
          spec);
}

// The squeeze-excitation gate in 16 bits: eight values a pack, against the CPU in both layouts
// shapes (the scalar case above also takes the packed path, with a tail of 30 % 4 elements).
TEST(CudaOpSuite, BroadcastGatesSixteenBit) {
  HGP_REQUIRE_CUDA();
  checkBothPrecisions("gate-nhwc", {f32({2, 4, 4, 16}), f32({2, 1, 1, 16})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{op1(g, OpKind::Mul, {p[0], p[1]})};
  });
  checkBothPrecisions("gate-nchw", {f32({2, 16, 4, 4}), f32({2, 16, 1, 1})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{op1(g, OpKind::Mul, {p[0], p[1]})};
  });
}

TEST(CudaOpSuite, Sum) {
  HGP_REQUIRE_CUDA();
  checkOp("sum3", {f32({2, 3}), f32({3}), f32({2, 1})}, [](Graph& g, auto& p) {
    return std::vector<Value*>{op1(g, OpKind::Sum, {p[0], p[1], p[2]})};
  });
  // More operands than one launch takes.
  std::vector<TensorType> many;
  for (int i = 0; i < 11; ++i) many.push_back(f32(i % 3 ? Shape{4, 5} : Shape{5}));
  checkOp("sum11", many, [](Graph& g, auto& p) {
    return std::vector<Value*>{op1(g, OpKind::Sum, std::vector<Value*>(p.begin(), p.end()))};
  });
  checkOp("sum1", {f32({3, 1})},
          [](Graph& g, auto& p) { return std::vector<Value*>{op1(g, OpKind::Sum, {p[0]})}; });
}

// ---- Data movement -------------------------------------------------------------------------

TEST(CudaOpSuite, DataMovement) {
  HGP_REQUIRE_CUDA();
  RunSpec exact;
  exact.tol = 0;
  checkOp(
      "concat", {f32({2, 3, 2}), f32({2, 1, 2}), f32({2, 4, 2})},
      [](Graph& g, auto& p) {
        return std::vector<Value*>{
            op1(g, OpKind::Concat, {p[0], p[1], p[2]}, attrs({{"axis", int64_t(1)}}))};
      },
      exact);
  checkOp(
      "split", {f32({2, 7, 3})},
      [](Graph& g, auto& p) -> std::vector<Value*> {
        Node* n = addNode(g, OpKind::Split, {p[0]},
                          attrs({{"axis", int64_t(1)}, {"split", I{2, 4, 1}}}), 3);
        return {n->output(0), n->output(2)}; // one part unused: its gradient is zero
      },
      exact);
  // Concat and Split are one vectorized launch per 32 parts (runtime/cuda/StackCopy.h): rows
  // of 32 and 64 bytes (16-byte accesses, a channels-last concatenation), and 40 parts of 1 to
  // 3 floats per row (two launches, 4-byte accesses), with their Split gradients.
  checkOp(
      "concat-channels-last", {f32({4, 5, 6, 8}), f32({4, 5, 6, 16})},
      [](Graph& g, auto& p) {
        return std::vector<Value*>{op1(g, OpKind::Concat, {p[0], p[1]}, attrs({{"axis", int64_t(3)}}))};
      },
      exact);
  std::vector<TensorType> narrow;
  for (int k = 0; k < 40; ++k) narrow.push_back(f32({3, 2, 1 + k % 3}));
  checkOp(
      "concat-40-parts", narrow,
      [](Graph& g, auto& p) {
        return std::vector<Value*>{op1(g, OpKind::Concat, std::vector<Value*>(p.begin(), p.end()),
                                       attrs({{"axis", int64_t(2)}}))};
      },
      exact);
  checkOp(
      "slice-negative-step", {f32({4, 6})},
      [](Graph& g, auto& p) {
        return std::vector<Value*>{
            op1(g, OpKind::Slice, {p[0]},
                attrs({{"starts", I{1, 5}}, {"ends", I{4, 0}}, {"steps", I{2, -2}}}))};
      },
      exact);
  checkOp(
      "slice-reverse", {f32({3, 5, 7})},
      [](Graph& g, auto& p) {
        return std::vector<Value*>{
            op1(g, OpKind::Slice, {p[0]},
                attrs({{"starts", I{0, 4, 1}}, {"ends", I{3, -1, 6}}, {"steps", I{1, -1, 3}}}))};
      },
      exact);
  checkOp(
      "reshape-transpose", {f32({2, 3, 4})},
      [](Graph& g, auto& p) {
        Value* t = op1(g, OpKind::Transpose, {p[0]}, attrs({{"perm", I{2, 0, 1}}}));
        return std::vector<Value*>{op1(g, OpKind::Reshape, {t}, attrs({{"shape", I{4, 6}}}))};
      },
      exact);
  checkOp(
      "transpose4d", {f32({2, 3, 5, 7})},
      [](Graph& g, auto& p) {
        return std::vector<Value*>{
            op1(g, OpKind::Transpose, {p[0]}, attrs({{"perm", I{0, 2, 3, 1}}}))};
      },
      exact);
  for (const char* mode : {"constant", "reflect", "edge"})
    checkOp(
        std::string("pad-") + mode, {f32({2, 3, 4})},
        [&](Graph& g, auto& p) {
          return std::vector<Value*>{op1(
              g, OpKind::Pad, {p[0]},
              attrs({{"pads", I{0, 1, 2, 0, 2, 1}}, {"mode", std::string(mode)}, {"value", 0.5}}))};
        },
        exact);
  checkOp(
      "pad-edge-wide", {f32({1, 3})},
      [](Graph& g, auto& p) {
        return std::vector<Value*>{
            op1(g, OpKind::Pad, {p[0]},
                attrs({{"pads", I{2, 4, 1, 5}}, {"mode", std::string("edge")}}))};
      },
      exact);
  checkOp(
      "pad-negative", {f32({4, 5, 3})},
      [](Graph& g, auto& p) {
        return std::vector<Value*>{
            op1(g, OpKind::Pad, {p[0]},
                attrs({{"pads", I{-1, 2, 0, 1, -2, 1}}, {"mode", std::string("constant")}}))};
      },
      exact);
  checkOp(
      "expand", {f32({3, 1})},
      [](Graph& g, auto& p) {
        return std::vector<Value*>{op1(g, OpKind::Expand, {p[0]}, attrs({{"shape", I{2, 3, 4}}}))};
      },
      exact);
}

TEST(CudaOpSuite, DataMovementOfIntegers) {
  HGP_REQUIRE_CUDA();
  // Non-differentiable: i64 inputs through every dtype-generic op, compared bit for bit.
  Graph g("ints");
  Value* a = addValue(g, "a", TensorRole::Input, {DType::I64, {2, 3, 5}});
  Value* b = addValue(g, "b", TensorRole::Input, {DType::I64, {2, 1, 5}});
  std::vector<Value*> outs = {
      op1(g, OpKind::Concat, {a, b}, attrs({{"axis", int64_t(1)}})),
      op1(g, OpKind::Transpose, {a}, attrs({{"perm", I{2, 0, 1}}})),
      op1(g, OpKind::Slice, {a},
          attrs({{"starts", I{1, 2, 4}}, {"ends", I{-1, 3, 0}}, {"steps", I{-1, 1, -2}}})),
      op1(g, OpKind::Reshape, {a}, attrs({{"shape", I{6, 5}}})),
      op1(g, OpKind::Expand, {b}, attrs({{"shape", I{4, 2, 3, 5}}}))};
  Node* split =
      addNode(g, OpKind::Split, {a}, attrs({{"axis", int64_t(2)}, {"split", I{2, 3}}}), 2);
  outs.push_back(split->output(0));
  outs.push_back(split->output(1));
  auto e = emit(g, bindOutputs(g, outs));
  ASSERT_TRUE(e.has_value());
  RunSpec spec;
  spec.tol = 0;
  runAndCompare(*e, spec);
}

/// The 32-bit strided walk (StridedWalk.h) at the sizes it is for, bit for bit against the CPU:
/// bf16 in channels-last, 16 bytes a thread where the count allows ([16,28,28,116]: 1.4M elements)
/// and one element a thread where it does not ([3,27,27,57]): ShuffleNet-v2's channel shuffle (Reshape,
/// Transpose, Reshape), a channel slice and its gradient (the scatter), a negative-step slice
/// and an Expand, and an odd channel count.
TEST(CudaOpSuite, StridedWalkAtScale) {
  HGP_REQUIRE_CUDA();
  for (Shape x : {Shape{16, 28, 28, 116}, Shape{3, 27, 27, 57}}) {
    SCOPED_TRACE(shapeToString(x));
    Graph g("walk");
    int64_t n = x[0], h = x[1], w = x[2], c = x[3];
    Value* a = addValue(g, "a", TensorRole::Input, {DType::BF16, x});
    Value* gate = addValue(g, "gate", TensorRole::Input, {DType::BF16, {n, 1, 1, c}});
    std::vector<Value*> outs;
    if (c % 2 == 0) {
      Value* r = op1(g, OpKind::Reshape, {a}, attrs({{"shape", I{n, h, w, 2, c / 2}}}));
      Value* t = op1(g, OpKind::Transpose, {r}, attrs({{"perm", I{0, 1, 2, 4, 3}}}));
      outs.push_back(op1(g, OpKind::Reshape, {t}, attrs({{"shape", I{n, h, w, c}}})));
    }
    AttrMap half =
        attrs({{"starts", I{0, 0, 0, c / 2}}, {"ends", I{n, h, w, c}}, {"steps", I{1, 1, 1, 1}}});
    Value* sl = op1(g, OpKind::Slice, {a}, half);
    outs.push_back(sl);
    AttrMap back = half;
    back.setInts("x_shape", x);
    outs.push_back(op1(g, OpKind::SliceBwd, {sl}, back));
    outs.push_back(op1(g, OpKind::Slice, {a},
                       attrs({{"starts", I{0, h - 1, 0, c - 1}}, {"ends", I{n, 0, w, 0}},
                              {"steps", I{1, -3, 1, -2}}})));
    outs.push_back(op1(g, OpKind::Expand, {gate}, attrs({{"shape", I{n, h, w, c}}})));
    outs.push_back(op1(g, OpKind::Transpose, {a}, attrs({{"perm", I{0, 3, 1, 2}}})));
    auto e = emit(g, bindOutputs(g, outs));
    ASSERT_TRUE(e.has_value());
    RunSpec spec;
    spec.tol = 0;
    spec.runs = 2;
    runAndCompare(*e, spec);
  }
}

// ---- Reductions and softmax ----------------------------------------------------------------

TEST(CudaOpSuite, Reductions) {
  HGP_REQUIRE_CUDA();
  struct Case {
    Shape x;
    I axes;
  };
  std::vector<Case> cases = {{{2, 3, 4}, {0, 2}},          // general
                             {{8, 16, 20, 20}, {0, 2, 3}}, // conv-bias pattern, split
                             {{4, 6, 33}, {0, 2}},         // conv-bias pattern, small
                             {{1, 5, 61, 67}, {0, 2, 3}},  // batch 1, odd plane
                             {{16, 32, 33}, {0, 1, 2}},    // everything
                             {{4, 5, 3000}, {2}},          // inner rows
                             {{3000, 7}, {0}},             // outer columns (Gemm bias)
                             {{128, 100}, {0}},            // columns over several blocks
                             {{2, 3, 70}, {0, 1}},         // columns under two leading dims
                             {{3, 4, 5, 6}, {1, 3}},       // interleaved
                             {{8, 56, 56, 40}, {1, 2}},    // middle run (NHWC gate), in parts
                             {{4, 7, 7, 1152}, {1, 2}},    // middle run, few rows
                             {{3, 300, 5}, {1}}};          // middle run, narrow columns
  for (OpKind op : {OpKind::ReduceSum, OpKind::ReduceMean})
    for (const Case& c : cases)
      for (int64_t keep = 0; keep < 2; ++keep)
        checkOp(std::string(opName(op)) + shapeToString(c.x) + (keep ? " keep" : ""), {f32(c.x)},
                [&](Graph& g, auto& p) {
                  return std::vector<Value*>{
                      op1(g, op, {p[0]}, attrs({{"axes", c.axes}, {"keepdims", keep}}))};
                });
}

TEST(CudaOpSuite, Softmax) {
  HGP_REQUIRE_CUDA();
  struct Case {
    Shape x;
    int64_t axis;
  };
  std::vector<Case> cases = {
      {{3, 5, 2}, 1}, {{4, 10}, 1}, {{2, 37}, 1}, {{6, 3}, 0}, {{2, 1000}, 1}};
  for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax})
    for (const Case& c : cases)
      checkOp(std::string(opName(op)) + shapeToString(c.x), {f32(c.x)}, [&](Graph& g, auto& p) {
        return std::vector<Value*>{op1(g, op, {p[0]}, attrs({{"axis", c.axis}}))};
      });
}

} // namespace
} // namespace hgp::gputest
