// CudaFuseBatchNormTest.cpp - the fused BatchNorm ops of fuse-batch-norm (docs/fusion.md) on the CUDA
// backend: BatchNormTrain + Relu, BatchNormTrain + Add + Relu (residual), inference-mode
// BatchNorm + Relu, BatchNormBwd + ReluBwd, and a gradient Sum folded into BatchNormBwd, each
//
//  1. against the CPU reference running the same fused plan (runAndCompare, eager and captured),
//     with the op suite's tolerances: 1e-5 in f32, and in bf16/f16 the mixed-precision suite's
//     2e-2 / 4e-3 (a unit in the last place of a 16-bit value); the CPU's fused ops are
//     bit-identical to its unfused ones (tests/unit/FuseBatchNormTest.cpp);
//  2. against the CUDA backend running the unfused plan, bit for bit: the fused kernels make the
//     same partial sums in the same order and the same float operations per element as
//     BatchNormTrain/BatchNormBwd followed by Relu, Add and ReluBwd, so a difference is a bug;
//  3. run to run with --deterministic: bit-identical.
//
// Shapes cover the vector paths (16-byte accesses: a plane size that is a multiple of 4 for f32
// and of 8 for 16-bit data) and the scalar ones (5x7, 7x7 planes), batch 1, and a 3-D input.
#include "tests/gpu/GpuTestUtil.h"

namespace hgp::gputest {
namespace {

using Builder = std::function<std::vector<Value*>(Graph&, const std::vector<Value*>&)>;

AttrMap eps() {
  AttrMap a;
  a.setFloat("epsilon", 1e-5);
  return a;
}

TensorType f32(Shape s) {
  return {DType::F32, std::move(s)};
}

Value* bnTrain(Graph& g, Value* x, Value* scale, Value* bias) {
  return op1(g, OpKind::BatchNormTrain, {x, scale, bias}, eps());
}

// Params: p0 = x, p1 = scale, p2 = bias, p3 = s (x's shape).
const Builder kBnRelu = [](Graph& g, const std::vector<Value*>& p) {
  return std::vector<Value*>{op1(g, OpKind::Relu, {bnTrain(g, p[0], p[1], p[2])})};
};
const Builder kBnAddRelu = [](Graph& g, const std::vector<Value*>& p) {
  Value* s = op1(g, OpKind::Relu, {p[3]});
  return std::vector<Value*>{
      op1(g, OpKind::Relu, {op1(g, OpKind::Add, {bnTrain(g, p[0], p[1], p[2]), s})})};
};
const Builder kTwoBnAddRelu = [](Graph& g, const std::vector<Value*>& p) {
  Value* y1 = bnTrain(g, p[0], p[1], p[2]);
  Value* y2 = bnTrain(g, p[3], p[1], p[2]);
  return std::vector<Value*>{op1(g, OpKind::Relu, {op1(g, OpKind::Add, {y1, y2})})};
};
const Builder kFrozenBnRelu = [](Graph& g, const std::vector<Value*>& p) {
  TensorType c = f32({p[0]->shape()[1]});
  Value* mean = addValue(g, "mean", TensorRole::State, c, dataOf(c, uniformBytes(c, 5)));
  Value* var = addValue(g, "var", TensorRole::State, c, dataOf(c, uniformBytes(c, 6, 0.5, 2)));
  return std::vector<Value*>{
      op1(g, OpKind::Relu, {op1(g, OpKind::BatchNorm, {p[0], p[1], p[2], mean, var}, eps())})};
};

/// Folded gradient Sums (dy_parts=2). A block on a stem, Z0 = relu(BN(x)) and
/// Z = relu(BN(Z0) + Z0): the gradient of Z0 is Sum(the block BatchNormBwd's dX, its G), read
/// only by the stem's fused BatchNormBwd, which writes no G; with a convolution as the branch,
/// Z = relu(BN(conv(Z0)) + Z0), the Sum's parts are ConvBwdData and G (ResNet's block input).
const Builder kBnBlock = [](Graph& g, const std::vector<Value*>& p) {
  Value* z0 = op1(g, OpKind::Relu, {bnTrain(g, p[0], p[1], p[2])});
  Value* y = bnTrain(g, z0, p[1], p[2]);
  return std::vector<Value*>{op1(g, OpKind::Relu, {op1(g, OpKind::Add, {y, z0})})};
};
const Builder kConvBlock = [](Graph& g, const std::vector<Value*>& p) {
  int64_t c = p[0]->shape()[1];
  TensorType wt = f32({c, c, 3, 3});
  Value* w = addValue(g, "w", TensorRole::Param, wt);
  AttrMap conv;
  conv.setInts("strides", {1, 1});
  conv.setInts("pads", {1, 1, 1, 1});
  conv.setInts("dilations", {1, 1});
  conv.setInt("group", 1);
  Value* z0 = op1(g, OpKind::Relu, {bnTrain(g, p[0], p[1], p[2])});
  Value* y = bnTrain(g, op1(g, OpKind::Conv, {z0, w}, conv), p[1], p[2]);
  return std::vector<Value*>{op1(g, OpKind::Relu, {op1(g, OpKind::Add, {y, z0})})};
};
/// A BatchNorm (plain, or + Relu) whose result has two readers: its gradient is a Sum of two,
/// folded into the plain BatchNormBwd (or the fused one, without G).
const Builder kBnTwoReaders = [](Graph& g, const std::vector<Value*>& p) {
  Value* y = bnTrain(g, p[0], p[1], p[2]);
  AttrMap a;
  a.setFloat("alpha", 3.0);
  return std::vector<Value*>{op1(g, OpKind::Neg, {y}), op1(g, OpKind::Scale, {y}, a)};
};
const Builder kBnReluTwoReaders = [](Graph& g, const std::vector<Value*>& p) {
  Value* z = op1(g, OpKind::Relu, {bnTrain(g, p[0], p[1], p[2])});
  AttrMap a;
  a.setFloat("alpha", 3.0);
  return std::vector<Value*>{op1(g, OpKind::Neg, {z}), op1(g, OpKind::Scale, {z}, a)};
};

/// The case's plan in `low` precision (F32, BF16 or F16), fused or not.
std::optional<EmittedPlan> planOf(const std::string& what, const Shape& x, const Builder& build,
                                  DType low, bool fuse, int64_t* foldedSums = nullptr) {
  Graph g(what);
  int64_t c = x[1];
  std::vector<Value*> ps = {addValue(g, "p0", TensorRole::Param, f32(x)),
                            addValue(g, "p1", TensorRole::Param, f32({c})),
                            addValue(g, "p2", TensorRole::Param, f32({c})),
                            addValue(g, "p3", TensorRole::Param, f32(x))};
  std::vector<Value*> outs = build(g, ps);
  if (low != DType::F32) {
    for (Value* v : outs) g.addOutput(v);
    PassContext ctx;
    ctx.precision = precisionStoring(low);
    Status st = runPipeline(g, {"mixed-precision"}, ctx);
    EXPECT_TRUE(st.isOk()) << st.toString();
    outs.clear();
    AttrMap toF32;
    toF32.setString("to", "f32");
    for (Value* v : g.outputs())
      outs.push_back(v->dtype() == DType::F32 ? v : op1(g, OpKind::Cast, {v}, toF32));
    g.mutableOutputs().clear();
  }
  std::map<std::string, std::string> bindings = differentiate(g, outs);
  if (fuse) {
    // The pass keeps the names of the values it replaces, so the bindings stay valid.
    PassContext ctx;
    Status st = runPipeline(g, {"fuse-batch-norm", "fuse-gradient-sums"}, ctx);
    EXPECT_TRUE(st.isOk()) << st.toString();
    int64_t fused = 0;
    for (const auto& [k, v] : ctx.stats) fused += k.rfind("fuse-", 0) == 0 ? v : 0;
    EXPECT_GT(fused, 0) << "nothing was fused:\n" << printGraph(g);
    if (foldedSums) *foldedSums = ctx.stats["fuse-gradient-sums.bwd-sum"];
  }
  return emit(g, bindings, precisionName(precisionStoring(low)));
}

RunSpec specFor(DType low) {
  RunSpec s;
  if (low != DType::F32) {
    s.tol = low == DType::BF16 ? 2e-2 : 4e-3;
    s.lossTolOfTerms = s.tol;
  }
  return s;
}

/// Runs the fused and the unfused plan on the CUDA backend (deterministic, graph mode), fed the
/// same parameters, and expects every binding to be bit-identical (within `tol` where the graph
/// holds a convolution: each backend times cuDNN's algorithms and may pick another one); and the
/// fused plan twice, which must agree with itself.
void expectFusedEqualsUnfusedOnGpu(const EmittedPlan& fused, const EmittedPlan& plain,
                                   double tol = 0) {
  BackendOptions o;
  o.deterministic = true;
  auto a = makeGpuBackend(o), b = makeGpuBackend(o), again = makeGpuBackend(o);
  ASSERT_TRUE(a.hasValue() && b.hasValue() && again.hasValue());
  ASSERT_TRUE((*a)->load(fused.plan, InitData{fused.data, {}}).isOk());
  ASSERT_TRUE((*again)->load(fused.plan, InitData{fused.data, {}}).isOk());
  ASSERT_TRUE((*b)->load(plain.plan, InitData{plain.data, {}}).isOk());
  for (int run = 0; run < 3; ++run) {
    for (auto [backend, e] : {std::pair{a->get(), &fused}, std::pair{again->get(), &fused},
                              std::pair{b->get(), &plain}}) {
      for (size_t i = 0; i < e->plan.tensors.size(); ++i) {
        const PlanTensor& pt = e->plan.tensors[i];
        if (pt.storage != StorageClass::Persistent || pt.role != TensorRole::Param) continue;
        std::vector<uint8_t> bytes = defaultFeed(pt, run);
        ASSERT_TRUE(backend->write(int(i), bytes.data()).isOk());
      }
      Status st = backend->run("step");
      ASSERT_TRUE(st.isOk()) << st.toString();
    }
    for (const auto& [name, idx] : plain.plan.bindings) {
      int f = fused.plan.binding(name);
      ASSERT_GE(f, 0) << name;
      const PlanTensor& pt = plain.plan.tensors[size_t(idx)];
      std::vector<uint8_t> want = readTensor(**b, plain.plan, idx);
      EXPECT_TRUE(sameValues(pt, readTensor(**a, fused.plan, f), want, tol))
          << "binding " << name << ": fused against unfused on the GPU, run " << run;
      EXPECT_TRUE(sameValues(pt, readTensor(**again, fused.plan, f),
                             readTensor(**a, fused.plan, f), tol))
          << "binding " << name << ": the fused plan twice, run " << run;
    }
  }
}

/// With `sums`, the fused plan must have folded that many gradient Sums.
/// `withConv`: the graph holds a convolution (GPU comparisons within the precision's tolerance).
void checkFusion(const std::string& what, const Builder& build,
                 std::initializer_list<Shape> shapes, int64_t sums = -1, bool withConv = false) {
  for (DType low : {DType::F32, DType::BF16, DType::F16})
    for (const Shape& x : shapes) {
      SCOPED_TRACE(what + " " + shapeToString(x) + " " + dtypeName(low));
      int64_t folded = 0;
      auto fused = planOf(what, x, build, low, true, &folded),
           plain = planOf(what, x, build, low, false);
      ASSERT_TRUE(fused && plain);
      if (sums >= 0) {
        EXPECT_EQ(folded, sums) << "gradient Sums folded";
      }
      runAndCompare(*fused, specFor(low));
      expectFusedEqualsUnfusedOnGpu(*fused, *plain, withConv ? std::max(specFor(low).tol, 1e-5) : 0);
    }
}

TEST(CudaFuseBatchNorm, BatchNormTrainRelu) {
  HGP_REQUIRE_CUDA();
  checkFusion("bn-relu", kBnRelu,
              {Shape{4, 3, 5, 7}, Shape{8, 16, 8, 8}, Shape{1, 4, 6, 4}, Shape{2, 3, 4, 4, 2},
               Shape{16, 64, 7, 7}, Shape{32, 8, 28, 28}});
}

TEST(CudaFuseBatchNorm, BatchNormTrainAddRelu) {
  HGP_REQUIRE_CUDA();
  checkFusion("bn-add-relu", kBnAddRelu, {Shape{4, 3, 5, 7}, Shape{8, 16, 8, 8}, Shape{16, 64, 7, 7}});
  checkFusion("bn-bn-add-relu", kTwoBnAddRelu, {Shape{4, 6, 6, 6}, Shape{8, 32, 14, 14}});
}

TEST(CudaFuseBatchNorm, InferenceBatchNormRelu) {
  HGP_REQUIRE_CUDA();
  checkFusion("frozen-bn-relu", kFrozenBnRelu, {Shape{2, 3, 5, 5}, Shape{4, 8, 8, 8}});
}

/// BatchNormBwd with a folded gradient Sum (dy_parts=2): fused with ReluBwd without G (the
/// block's stem, the two-reader Relu), plain (two readers without a Relu), and at a ResNet block
/// input (the Sum of ConvBwdData and G). Vector and scalar paths; the sums of 16-bit parts round
/// once, as the unfused Sum kernel stores them, so the comparison with the unfused plan is exact.
TEST(CudaFuseBatchNorm, BatchNormBwdFoldedSum) {
  HGP_REQUIRE_CUDA();
  checkFusion("bn-block", kBnBlock, {Shape{4, 3, 5, 7}, Shape{8, 16, 8, 8}, Shape{16, 64, 7, 7}}, 1);
  checkFusion("bn-two-readers", kBnTwoReaders, {Shape{4, 3, 5, 7}, Shape{8, 16, 8, 8}}, 1);
  checkFusion("bn-relu-two-readers", kBnReluTwoReaders, {Shape{4, 3, 5, 7}, Shape{8, 16, 8, 8}}, 1);
  checkFusion("conv-block", kConvBlock, {Shape{2, 8, 6, 6}, Shape{4, 16, 8, 8}}, 1, true);
}

/// The large-mean case of the op suite, through the fused forward and backward.
TEST(CudaFuseBatchNorm, LargeMeanKeepsTheVariance) {
  HGP_REQUIRE_CUDA();
  auto fused = planOf("bn-relu-offset", {8, 5, 9, 9}, kBnRelu, DType::F32, true);
  ASSERT_TRUE(fused);
  RunSpec spec;
  spec.feed = [](const PlanTensor& t, int run) {
    if (t.name != "p0") return defaultFeed(t, run);
    return uniformBytes(t.type, hashName(t.name, uint64_t(run) + 17), 1000.0, 1000.5);
  };
  runAndCompare(*fused, spec);
}

} // namespace
} // namespace hgp::gputest
