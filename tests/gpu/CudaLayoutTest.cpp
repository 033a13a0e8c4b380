// CudaLayoutTest.cpp - the channels-last (layout="nhwc") CUDA executors of BatchNorm (inference,
// training, gradient, with their fused forms) and of pooling (max, average, global average and
// their gradients), runtime/cuda/NhwcNormOps.cu and NhwcPoolOps.cu.
//
// BatchNormBwd's folded gradient Sum (dy_parts=2) is also held bit for bit to the unfused Sum +
// BatchNormBwd on the same channels-last operands (BatchNormBwdFoldedSumEqualsSumThenBatchNormBwd).
//
// Each case builds one graph that runs its op twice over the same f32 parameters: once as NCHW,
// once with layout="nhwc" on operands transposed by (0, 2, 3, 1), in f32, bf16 or f16 (Casts
// around the op); the NHWC results are transposed back, so both forms are bound NCHW, as
// "nchw.<k>" and "nhwc.<k>". Then
//
//  1. the CUDA backend against the CPU reference running the same plan (runAndCompare, eager and
//     captured), with the tolerances of the existing suites: for BatchNorm 1e-5 in f32 and the
//     mixed-precision suite's 2e-2 (bf16) / 4e-3 (f16); for max and average pooling and their
//     gradients 0 in f32 (the same comparisons and sums, in the same order, as the CPU), the
//     mixed-precision tolerances in 16 bits; for GlobalAveragePool the op suite's 1e-5;
//  2. on the CUDA backend, the NHWC results against the NCHW results of the same data: within
//     the same tolerances for BatchNorm and GlobalAveragePool, whose sums run in another order,
//     and bit for bit for the other pooling ops, which do the same operations per element;
//  3. two CUDA backends fed alike (so at other addresses), run to run: bit-identical.
//
// Shapes cover the 16-byte vector paths (C a multiple of 4 for f32 and of 8 for 16-bit data),
// the 8-byte path of 16-bit data (C = 12), the scalar path (C = 3, 7), batch 1, a larger spatial
// size (several parts in the BatchNorm sums), and rows wider than one block (C = 520, 1040:
// column tiles, the last one partly idle).
#include "runtime/plan/Window.h"
#include "tests/gpu/GpuTestUtil.h"

namespace hgp::gputest {
namespace {

using I = std::vector<int64_t>;

TensorType f32(Shape s) {
  return {DType::F32, std::move(s)};
}

AttrMap attrs(std::initializer_list<std::pair<const char*, AttrValue>> kv) {
  AttrMap a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

/// An operand of the op: a rank-4 tensor (given by its NCHW shape; transposed for the NHWC
/// form, cast to the case's precision) or an f32 per-channel vector, fed uniform [lo, hi).
struct Operand {
  std::string name;
  Shape nchw;
  double lo = -1, hi = 1;
};

struct Case {
  std::string what;
  OpKind op;
  AttrMap attrs;
  std::vector<Operand> ins;
  int results = -1;      ///< The op's result count (-1: its default).
  bool exact = false;    ///< The same operations per element in both layouts and on the CPU.
  bool integers = false; ///< Rank-4 operands get small integers: many ties.
  bool castVectors = false; ///< Per-channel operands take the case's precision too (a conv bias).
  /// Two backends may time different cuDNN algorithms for a convolution: they then agree within
  /// the tolerance, not bit for bit.
  bool timedAlgorithms = false;
};

Value* transpose(Graph& g, Value* v, I perm) {
  return op1(g, OpKind::Transpose, {v}, attrs({{"perm", perm}}));
}

Value* cast(Graph& g, Value* v, DType to) {
  AttrMap a;
  a.setString("to", dtypeName(to));
  return op1(g, OpKind::Cast, {v}, a);
}

std::string precisionOf(DType low) {
  return precisionName(precisionStoring(low));
}

/// The case's plan in `low` precision: the op in both layouts over the same parameters.
std::optional<EmittedPlan> planOf(const Case& c, DType low) {
  Graph g(c.what);
  std::vector<Value*> params;
  for (const Operand& o : c.ins) {
    params.push_back(addValue(g, o.name, TensorRole::Param, f32(o.nchw)));
    if (!params.back()) return std::nullopt;
  }
  std::map<std::string, std::string> bindings;
  for (bool nhwc : {false, true}) {
    std::vector<Value*> ins;
    for (Value* p : params) {
      Value* v = p;
      if (v->rank() == 4 && nhwc) v = transpose(g, v, {0, 2, 3, 1});
      if (v && (v->rank() == 4 || c.castVectors) && low != DType::F32) v = cast(g, v, low);
      if (!v) return std::nullopt;
      ins.push_back(v);
    }
    AttrMap a = c.attrs;
    if (nhwc) a.setString("layout", "nhwc");
    Node* n = addNode(g, c.op, ins, a, c.results);
    if (!n) return std::nullopt;
    for (size_t k = 0; k < n->numOutputs(); ++k) {
      Value* y = n->output(k);
      if (y->rank() == 4) {
        if (low != DType::F32) y = cast(g, y, DType::F32);
        if (y && nhwc) y = transpose(g, y, {0, 3, 1, 2});
      }
      if (!y) return std::nullopt;
      g.addOutput(y);
      bindings[(nhwc ? "nhwc." : "nchw.") + std::to_string(k)] = y->name();
    }
  }
  return emit(g, bindings, precisionOf(low));
}

/// Uniform [lo, hi) per operand; with `integers`, rank-4 operands become floor(1.5 v).
Feeder feederOf(const Case& c) {
  return [c](const PlanTensor& t, int run) {
    for (const Operand& o : c.ins) {
      if (o.name != t.name) continue;
      std::vector<uint8_t> b =
          uniformBytes(t.type, hashName(t.name, uint64_t(run) + 17), o.lo, o.hi);
      if (c.integers && o.nchw.size() == 4)
        for (size_t i = 0; i + 4 <= b.size(); i += 4) {
          float v;
          std::memcpy(&v, b.data() + i, 4);
          v = std::floor(v * 1.5f);
          std::memcpy(b.data() + i, &v, 4);
        }
      return b;
    }
    return defaultFeed(t, run);
  };
}

/// The tolerance against the CPU: the existing suites' per precision.
double tolOf(const Case& c, DType low) {
  if (low == DType::BF16) return 2e-2;
  if (low == DType::F16) return 4e-3;
  return c.exact ? 0 : 1e-5;
}

/// Runs the plan on two CUDA backends, fed alike, twice each: on the first, each NHWC result
/// against its NCHW twin (within `tol`); between the two, every compared tensor within
/// `repeatTol` (0: bit for bit).
void expectLayoutsAgreeAndRepeat(const EmittedPlan& e, const Feeder& feed, double tol,
                                 double repeatTol = 0) {
  const Plan& plan = e.plan;
  BackendOptions o;
  o.deterministic = true;
  auto a = makeGpuBackend(o), b = makeGpuBackend(o);
  ASSERT_TRUE(a.hasValue() && b.hasValue());
  for (Backend* x : {a->get(), b->get()}) {
    Status st = x->load(plan, InitData{e.data, {}});
    ASSERT_TRUE(st.isOk()) << st.toString();
  }
  std::vector<int> compared = comparedTensors(plan);
  for (int run = 0; run < 2; ++run) {
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      const PlanTensor& pt = plan.tensors[i];
      if (pt.storage != StorageClass::Persistent || pt.role != TensorRole::Param) continue;
      std::vector<uint8_t> bytes = feed(pt, run);
      for (Backend* x : {a->get(), b->get()}) ASSERT_TRUE(x->write(int(i), bytes.data()).isOk());
    }
    for (Backend* x : {a->get(), b->get()}) {
      Status st = x->run("step");
      ASSERT_TRUE(st.isOk()) << st.toString();
    }
    for (int k = 0;; ++k) {
      int x = plan.binding("nhwc." + std::to_string(k)),
          y = plan.binding("nchw." + std::to_string(k));
      if (x < 0 || y < 0) {
        EXPECT_GT(k, 0) << "no results bound";
        break;
      }
      EXPECT_TRUE(sameValues(plan.tensors[size_t(x)], readTensor(**a, plan, x),
                             readTensor(**a, plan, y), tol))
          << "result " << k << ": NHWC against NCHW on the GPU, run " << run;
    }
    for (int id : compared)
      EXPECT_TRUE(sameValues(plan.tensors[size_t(id)], readTensor(**a, plan, id),
                             readTensor(**b, plan, id), repeatTol))
          << "tensor '" << plan.tensors[size_t(id)].name << "': two runs differ, run " << run;
  }
}

void check(const Case& c) {
  for (DType low : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(c.what + " " + dtypeName(low));
    auto e = planOf(c, low);
    ASSERT_TRUE(e.has_value());
    RunSpec spec;
    spec.tol = tolOf(c, low);
    spec.feed = feederOf(c);
    runAndCompare(*e, spec);
    expectLayoutsAgreeAndRepeat(*e, spec.feed, c.exact ? 0 : spec.tol,
                                c.timedAlgorithms ? spec.tol : 0);
  }
}

std::string nameOf(const std::string& what, const Shape& x) {
  return what + " " + shapeToString(x);
}

// ---- BatchNorm ------------------------------------------------------------------------------

/// Vector paths (C = 16, 64), the 8-byte 16-bit path (C = 12), scalar (C = 3, 7), batch 1,
/// many rows (several parts), wide rows (column tiles).
const std::vector<Shape> kBnShapes = {
    Shape{2, 16, 5, 7},   Shape{4, 3, 5, 7},    Shape{1, 7, 6, 5},  Shape{2, 12, 4, 4},
    Shape{8, 16, 32, 32}, Shape{4, 64, 14, 14}, Shape{2, 520, 3, 5}};

AttrMap bnAttrs(const char* activation = "none") {
  return attrs({{"epsilon", 1e-5}, {"activation", std::string(activation)}});
}

std::vector<Operand> perChannel(int64_t c, std::initializer_list<const char*> names) {
  std::vector<Operand> v;
  for (const char* n : names) v.push_back({n, {c}});
  return v;
}

TEST(CudaLayout, BatchNormInference) {
  HGP_REQUIRE_CUDA();
  for (const char* act : {"none", "relu", "silu", "hardswish"})
    for (const Shape& x : kBnShapes) {
      int64_t c = x[1];
      std::vector<Operand> ins = {{"x", x}};
      for (Operand o : perChannel(c, {"scale", "bias", "mean"})) ins.push_back(o);
      ins.push_back({"var", {c}, 0.5, 2});
      check({nameOf(std::string("bn-frozen-") + act, x), OpKind::BatchNorm, bnAttrs(act), ins});
    }
}

TEST(CudaLayout, BatchNormTrain) {
  HGP_REQUIRE_CUDA();
  for (const char* act : {"none", "relu", "silu", "hardswish"})
    for (const Shape& x : kBnShapes) {
      std::vector<Operand> ins = {{"x", x}};
      for (Operand o : perChannel(x[1], {"scale", "bias"})) ins.push_back(o);
      check({nameOf(std::string("bn-train-") + act, x), OpKind::BatchNormTrain, bnAttrs(act), ins});
    }
}

TEST(CudaLayout, BatchNormTrainResidualRelu) {
  HGP_REQUIRE_CUDA();
  for (const Shape& x : kBnShapes) {
    std::vector<Operand> ins = {{"x", x}};
    for (Operand o : perChannel(x[1], {"scale", "bias"})) ins.push_back(o);
    ins.push_back({"s", x});
    check({nameOf("bn-add-relu", x), OpKind::BatchNormTrain, bnAttrs("relu"), ins});
  }
}

/// A mean far from zero against a small spread: the shifted sums keep the variance.
TEST(CudaLayout, BatchNormTrainLargeMean) {
  HGP_REQUIRE_CUDA();
  for (const Shape& x : {Shape{8, 5, 9, 9}, Shape{4, 16, 8, 8}}) {
    std::vector<Operand> ins = {{"x", x, 1000.0, 1000.5}};
    for (Operand o : perChannel(x[1], {"scale", "bias"})) ins.push_back(o);
    check({nameOf("bn-offset", x), OpKind::BatchNormTrain, bnAttrs(), ins});
  }
}

/// dY, X, scale, mean, var [, Z | bias] [, dY2]: plain, frozen statistics, fused with ReluBwd
/// (mask Z), fused with the masked dY G as a fourth result, fused with SiluBwd and HardSwishBwd
/// (y recomputed from X with the bias); each also with a folded gradient Sum (dy_parts=2, dY2
/// last).
TEST(CudaLayout, BatchNormBwd) {
  HGP_REQUIRE_CUDA();
  for (int parts : {1, 2})
    for (int form = 0; form < 6; ++form)
      for (const Shape& x : kBnShapes) {
        int64_t c = x[1];
        std::vector<Operand> ins = {
            {"dy", x}, {"x", x}, {"scale", {c}}, {"mean", {c}}, {"var", {c}, 0.5, 2}};
        const char* acts[] = {"none", "none", "relu", "relu", "silu", "hardswish"};
        AttrMap a = bnAttrs(acts[form]);
        if (form == 1) a.setInt("batch_stats", 0);
        if (form == 2 || form == 3) ins.push_back({"z", x});
        if (form >= 4) ins.push_back({"bias", {c}});
        if (parts == 2) {
          a.setInt("dy_parts", 2);
          ins.push_back({"dy2", x});
        }
        const char* names[] = {"bn-bwd",        "bn-bwd-frozen", "bn-bwd-relu",
                               "bn-bwd-relu-g", "bn-bwd-silu",   "bn-bwd-hardswish"};
        std::string name = std::string(names[form]) + (parts == 2 ? "-sum" : "");
        check({nameOf(name, x), OpKind::BatchNormBwd, a, ins, form == 3 ? 4 : -1});
      }
}

/// The folded Sum in channels-last, against the unfused Sum + BatchNormBwd on the same NHWC
/// operands, bit for bit on the GPU (the same partial sums in the same order, and the Sum kernel's
/// rounding of the two parts), and against the CPU reference: plain, fused with ReluBwd, and
/// with G.
TEST(CudaLayout, BatchNormBwdFoldedSumEqualsSumThenBatchNormBwd) {
  HGP_REQUIRE_CUDA();
  for (DType low : {DType::F32, DType::BF16, DType::F16})
    for (int form = 0; form < 3; ++form)
      for (const Shape& x : {Shape{2, 16, 5, 7}, Shape{4, 3, 5, 7}, Shape{2, 12, 4, 4},
                             Shape{4, 64, 14, 14}}) {
        SCOPED_TRACE(nameOf("bn-bwd-sum-" + std::to_string(form), x) + " " + dtypeName(low));
        int64_t c = x[1];
        Case cs{"fold", OpKind::BatchNormBwd, {},
                {{"dy", x}, {"dy2", x}, {"x", x}, {"z", x}, {"scale", {c}}, {"mean", {c}},
                 {"var", {c}, 0.5, 2}}};
        Graph g("bn-bwd-sum");
        std::map<std::string, Value*> p;
        for (const Operand& o : cs.ins) p[o.name] = addValue(g, o.name, TensorRole::Param, f32(o.nchw));
        auto act = [&](const std::string& n) {
          Value* v = transpose(g, p[n], {0, 2, 3, 1});
          return low == DType::F32 ? v : cast(g, v, low);
        };
        Value *dy = act("dy"), *dy2 = act("dy2"), *xv = act("x"), *z = act("z");
        AttrMap a = bnAttrs(form >= 1 ? "relu" : "none");
        a.setString("layout", "nhwc");
        std::vector<Value*> common = {xv, p["scale"], p["mean"], p["var"]};
        if (form >= 1) common.push_back(z);
        std::vector<Value*> plainIns = {op1(g, OpKind::Sum, {dy, dy2})}, foldedIns = {dy};
        for (Value* v : common) plainIns.push_back(v), foldedIns.push_back(v);
        foldedIns.push_back(dy2);
        AttrMap fa = a;
        fa.setInt("dy_parts", 2);
        int results = form == 2 ? 4 : -1;
        Node* plain = addNode(g, OpKind::BatchNormBwd, plainIns, a, results);
        Node* folded = addNode(g, OpKind::BatchNormBwd, foldedIns, fa, results);
        ASSERT_TRUE(plain && folded);
        std::map<std::string, std::string> bindings;
        for (auto [n, prefix] : {std::pair{plain, "plain."}, std::pair{folded, "folded."}})
          for (size_t k = 0; k < n->numOutputs(); ++k) {
            Value* y = n->output(k);
            if (y->dtype() != DType::F32) y = cast(g, y, DType::F32);
            g.addOutput(y);
            bindings[prefix + std::to_string(k)] = y->name();
          }
        auto e = emit(g, bindings, precisionOf(low));
        ASSERT_TRUE(e.has_value());
        RunSpec spec;
        spec.tol = tolOf(cs, low);
        spec.feed = feederOf(cs);
        runAndCompare(*e, spec);
        BackendOptions o;
        o.deterministic = true;
        auto b = makeGpuBackend(o);
        ASSERT_TRUE(b.hasValue());
        ASSERT_TRUE((*b)->load(e->plan, InitData{e->data, {}}).isOk());
        for (int run = 0; run < 2; ++run) {
          for (size_t i = 0; i < e->plan.tensors.size(); ++i) {
            const PlanTensor& pt = e->plan.tensors[i];
            if (pt.storage != StorageClass::Persistent || pt.role != TensorRole::Param) continue;
            std::vector<uint8_t> bytes = spec.feed(pt, run);
            ASSERT_TRUE((*b)->write(int(i), bytes.data()).isOk());
          }
          Status st = (*b)->run("step");
          ASSERT_TRUE(st.isOk()) << st.toString();
          for (size_t k = 0; k < plain->numOutputs(); ++k) {
            int f = e->plan.binding("folded." + std::to_string(k)),
                u = e->plan.binding("plain." + std::to_string(k));
            ASSERT_TRUE(f >= 0 && u >= 0);
            EXPECT_TRUE(sameValues(e->plan.tensors[size_t(f)], readTensor(**b, e->plan, f),
                                   readTensor(**b, e->plan, u), 0))
                << "result " << k << ": folded against Sum + BatchNormBwd, run " << run;
          }
        }
      }
}

// ---- Pooling --------------------------------------------------------------------------------

AttrMap poolAttrs(I k, I s, I pads, bool ceil, I dil = {}) {
  AttrMap a =
      attrs({{"kernel_shape", k}, {"strides", s}, {"pads", pads}, {"ceil_mode", int64_t(ceil)}});
  if (!dil.empty()) a.setInts("dilations", dil);
  return a;
}

/// The NCHW shape MaxPool or AveragePool gives x under attributes a.
Shape pooledShape(const Shape& x, const AttrMap& a) {
  I k = a.getInts("kernel_shape"), s = a.getInts("strides"), p = a.getInts("pads");
  I d = a.has("dilations") ? a.getInts("dilations") : I{1, 1};
  bool ceil = a.getInt("ceil_mode", 0) != 0;
  Shape y = x;
  for (size_t i = 0; i < 2; ++i)
    y[2 + i] = windowOutputSize(x[2 + i], k[i], s[i], p[i], p[2 + i], d[i], ceil);
  return y;
}

struct PoolCase {
  Shape x;
  AttrMap a;
};

/// ResNet's 3x3 stride-2 pool (vector, 8-byte and scalar paths, batch 1), 2x2, an asymmetric
/// window with ceil_mode and pads, a dilated window, a 3x3 stride-1 window, and a 16x16 window
/// (256 elements: two-byte argmaxes in the gradient).
const std::vector<PoolCase> kMaxPools = {
    {{2, 16, 15, 14}, poolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, false)},
    {{4, 64, 28, 28}, poolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, false)},
    {{1, 12, 9, 8}, poolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, false)},
    {{2, 3, 9, 8}, poolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, false)},
    {{2, 8, 8, 8}, poolAttrs({2, 2}, {2, 2}, {0, 0, 0, 0}, false)},
    {{2, 7, 7, 6}, poolAttrs({3, 2}, {2, 2}, {1, 0, 1, 1}, true)},
    {{2, 8, 9, 8}, poolAttrs({3, 3}, {2, 1}, {1, 1, 1, 1}, false, {2, 1})},
    {{2, 16, 14, 13}, poolAttrs({3, 3}, {1, 1}, {1, 1, 1, 1}, true)},
    {{1, 8, 21, 20}, poolAttrs({16, 16}, {3, 2}, {1, 0, 2, 1}, true)}};

TEST(CudaLayout, MaxPool) {
  HGP_REQUIRE_CUDA();
  for (int ties = 0; ties < 2; ++ties)
    for (const PoolCase& p : kMaxPools) {
      Case c{nameOf("maxpool", p.x) + (ties ? " ties" : ""), OpKind::MaxPool, p.a, {{"x", p.x}}};
      c.exact = true;
      c.integers = ties != 0;
      check(c);
    }
}

TEST(CudaLayout, MaxPoolBwd) {
  HGP_REQUIRE_CUDA();
  for (int ties = 0; ties < 2; ++ties)
    for (const PoolCase& p : kMaxPools) {
      Case c{nameOf("maxpool-bwd", p.x) + (ties ? " ties" : ""),
             OpKind::MaxPoolBwd,
             p.a,
             {{"dy", pooledShape(p.x, p.a)}, {"x", p.x}}};
      c.exact = true;
      c.integers = ties != 0;
      check(c);
    }
}

const std::vector<PoolCase> kAvgPools = {
    {{2, 16, 7, 6}, poolAttrs({3, 3}, {2, 2}, {1, 1, 1, 0}, true)},
    {{2, 3, 8, 8}, poolAttrs({2, 2}, {2, 2}, {0, 0, 0, 0}, false)},
    {{1, 12, 10, 9}, poolAttrs({3, 3}, {1, 1}, {1, 1, 1, 1}, false)},
    {{2, 64, 14, 14}, poolAttrs({3, 3}, {2, 2}, {1, 1, 1, 1}, false)}};

TEST(CudaLayout, AveragePool) {
  HGP_REQUIRE_CUDA();
  for (int include = 0; include < 2; ++include)
    for (const PoolCase& p : kAvgPools) {
      AttrMap a = p.a;
      a.setInt("count_include_pad", include);
      Case c{nameOf("avgpool", p.x) + (include ? " include-pad" : ""),
             OpKind::AveragePool,
             a,
             {{"x", p.x}}};
      c.exact = true;
      check(c);
    }
}

/// x_shape stays the NCHW shape: attributes do not change with the layout.
TEST(CudaLayout, AveragePoolBwd) {
  HGP_REQUIRE_CUDA();
  for (int include = 0; include < 2; ++include)
    for (const PoolCase& p : kAvgPools) {
      AttrMap a = p.a;
      a.setInt("count_include_pad", include);
      a.setInts("x_shape", p.x);
      Case c{nameOf("avgpool-bwd", p.x) + (include ? " include-pad" : ""),
             OpKind::AveragePoolBwd,
             a,
             {{"dy", pooledShape(p.x, p.a)}}};
      c.exact = true;
      check(c);
    }
}

/// [N, H, W, C] -> [N, 1, 1, C]: vector, 8-byte and scalar paths, batch 1, a large plane, and
/// wide rows (column tiles).
const std::vector<Shape> kGlobalShapes = {Shape{2, 16, 7, 7}, Shape{1, 3, 5, 5},
                                          Shape{2, 12, 40, 40}, Shape{3, 7, 4, 6},
                                          Shape{2, 1040, 3, 3}};

TEST(CudaLayout, GlobalAveragePool) {
  HGP_REQUIRE_CUDA();
  for (const Shape& x : kGlobalShapes)
    check({nameOf("gap", x), OpKind::GlobalAveragePool, {}, {{"x", x}}});
}

TEST(CudaLayout, GlobalAveragePoolBwd) {
  HGP_REQUIRE_CUDA();
  for (const Shape& x : kGlobalShapes) {
    Case c{nameOf("gap-bwd", x),
           OpKind::GlobalAveragePoolBwd,
           attrs({{"x_shape", I(x)}}),
           {{"dy", {x[0], x[1], 1, 1}}}};
    c.exact = true;
    check(c);
  }
}

// ---- Convolution epilogues -------------------------------------------------------------------

/// Conv with its bias and activation="relu" (fuse-conv-epilogue): hgpc's epilogue kernel or a
/// cuDNN fused graph, whichever timed faster, in both layouts. Shapes cover the 16-byte paths
/// (NCHW planes of 64; NHWC rows of 16 channels), NCHW planes of 42 and NHWC rows of 8 (vector
/// in one layout, scalar in the other for 16-bit data), and 12 channels (f32 vectors, 16-bit
/// scalar in NHWC).
TEST(CudaLayout, ConvEpilogue) {
  HGP_REQUIRE_CUDA();
  struct Geometry {
    Shape x, w;
    I pads;
  };
  std::vector<Geometry> geometries = {{{2, 16, 8, 8}, {16, 16, 3, 3}, {1, 1, 1, 1}},
                                      {{2, 8, 7, 6}, {8, 8, 3, 3}, {1, 1, 1, 1}},
                                      {{2, 12, 5, 5}, {12, 12, 1, 1}, {0, 0, 0, 0}}};
  for (const Geometry& gm : geometries)
    for (bool bias : {true, false})
      for (const char* act : {"relu", "none"}) {
        if (!bias && std::string(act) == "none") continue;
        std::vector<Operand> ins = {{"x", gm.x}, {"w", gm.w, -0.3, 0.3}};
        if (bias) ins.push_back({"b", {gm.w[0]}});
        Case c{nameOf(std::string("conv-") + (bias ? "bias-" : "") + act, gm.x), OpKind::Conv,
               attrs({{"strides", I{1, 1}},
                      {"pads", gm.pads},
                      {"dilations", I{1, 1}},
                      {"group", int64_t(1)},
                      {"activation", std::string(act)}}),
               ins};
        c.castVectors = true;
        c.timedAlgorithms = true;
        check(c);
      }
}

} // namespace
} // namespace hgp::gputest
