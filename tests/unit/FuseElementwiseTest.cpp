// Tests of the fuse-elementwise pass (passes/FuseElementwise.cpp), the FusedElementwise CPU
// executor and program text (runtime/plan/FusedProgram.h), and the CUDA kernel generator with
// NVRTC (compiler/codegen): what is fused and what must not be, bit-identical results of fused
// and unfused plans on the CPU in f32, bf16 and f16, and generated source that NVRTC compiles to
// an sm_90 cubin (skipped where NVRTC cannot be loaded).
#include "FusedTestGraphs.h"

#include <unistd.h>

#include "compiler/codegen/FusedKernelSource.h"
#include "compiler/codegen/GenerateKernels.h"
#include "compiler/codegen/Nvrtc.h"
#include "compiler/ir/Printer.h"
#include "runtime/plan/FusedProgram.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace hgp {
namespace {

using namespace fusiontest;

Status fuse(Graph& g) {
  PassContext ctx;
  return runPipeline(g, {"fuse-elementwise"}, ctx);
}

const Node* onlyFused(const Graph& g) {
  for (const Node* n : g.nodes())
    if (n->op() == OpKind::FusedElementwise) return n;
  return nullptr;
}

TEST(FuseElementwise, FusesAWholeChainAndKeepsOutsideUsesAsResults) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    Graph g("chain");
    buildChain(g, d, {2, 3, 5, 7});
    size_t before = g.nodes().size();
    ASSERT_TRUE(fuse(g).isOk()) << printGraph(g);
    // A node joins one group (its first producer's): the Casts of b and c, which start groups of
    // their own, stay ops (in 16 bits), everything else is one node.
    int casts = d == DType::F32 ? 0 : 2;
    ASSERT_EQ(g.nodes().size(), size_t(1 + casts)) << printGraph(g);
    EXPECT_EQ(countOps(g, OpKind::Cast), casts);
    const Node* f = onlyFused(g);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->numInputs(), 3u);  // a, b, c (or their casts)
    EXPECT_EQ(f->numOutputs(), 4u); // out.0, out.1 (also used inside), out.2, out.3
    auto p = parseFusedProgram(f->attrs(), int(f->numInputs()));
    ASSERT_TRUE(p.hasValue()) << p.status().toString();
    EXPECT_EQ(p->instrs.size(), before - size_t(casts));
    // The program text parses back to itself.
    AttrMap again;
    p->store(again);
    EXPECT_EQ(again.getString("program"), f->attrs().getString("program"));
  }
}

TEST(FuseElementwise, AddReluInResidualFormAndSumReluBwd) {
  Graph g("resid");
  TensorType t{DType::BF16, {4, 8, 3, 3}};
  Value* a = *g.addGraphValue("a", TensorRole::Input, t);
  Value* b = *g.addGraphValue("b", TensorRole::Input, t);
  Value* y = node(g, OpKind::Relu, {node(g, OpKind::Add, {a, b})});
  Value* dx = node(g, OpKind::ReluBwd, {node(g, OpKind::Sum, {a, b, y}), y});
  g.addOutput(y);
  g.addOutput(dx);
  ASSERT_TRUE(fuse(g).isOk());
  ASSERT_EQ(g.nodes().size(), 1u) << printGraph(g);
  EXPECT_EQ(g.nodes()[0]->attrs().getString("program"),
            "Add bf16 %0 %1; Relu bf16 %2; Sum bf16 %0 %1 %3; ReluBwd bf16 %4 %3");
  EXPECT_EQ(g.nodes()[0]->numOutputs(), 2u);
}

TEST(FuseElementwise, NeverMakesACycle) {
  // s = a + b; g = sigmoid(s) (not fusible); t = s * g. Fusing Mul into Add's group would need
  // the group before and after the Sigmoid.
  Graph g("cycle");
  TensorType t{DType::F32, {2, 16}};
  Value* a = *g.addGraphValue("a", TensorRole::Input, t);
  Value* b = *g.addGraphValue("b", TensorRole::Input, t);
  Value* s = node(g, OpKind::Add, {a, b});
  Value* sg = node(g, OpKind::Sigmoid, {s});
  Value* m = node(g, OpKind::Mul, {s, sg});
  g.addOutput(node(g, OpKind::Relu, {m}));
  ASSERT_TRUE(fuse(g).isOk()) << printGraph(g);
  // Add stays alone; Mul and Relu fuse after the Sigmoid.
  EXPECT_EQ(countOps(g, OpKind::Add), 1) << printGraph(g);
  EXPECT_EQ(countOps(g, OpKind::FusedElementwise), 1) << printGraph(g);
  EXPECT_TRUE(verifyGraph(g).isOk());
}

TEST(FuseElementwise, SideEffectOpsBroadcastsAndCarriesStayOut) {
  Graph g("barriers");
  TensorType t{DType::F32, {2, 3, 4}};
  Value* a = *g.addGraphValue("a", TensorRole::Input, t);
  Value* w = *g.addGraphValue("w", TensorRole::State, t);
  Value* bias = *g.addGraphValue("bias", TensorRole::Input, {DType::F32, {4}});
  // A broadcasting Add is not fused.
  Value* x = node(g, OpKind::Add, {a, bias});
  Value* r = node(g, OpKind::Relu, {x});
  // The value the finiteness check reads is also a result of the group.
  Value* s = node(g, OpKind::Mul, {r, a});
  Value* ok = node(g, OpKind::CheckFinite, {s});
  Value* y = node(g, OpKind::Neg, {s});
  // A carried result stays an op of its own.
  Value* next = node(g, OpKind::Add, {w, y});
  g.addCarry(w, next);
  g.addOutput(ok);
  g.addOutput(y);
  ASSERT_TRUE(fuse(g).isOk()) << printGraph(g);
  EXPECT_EQ(countOps(g, OpKind::CheckFinite), 1);
  EXPECT_EQ(countOps(g, OpKind::Add), 2) << printGraph(g); // broadcast and carried
  const Node* f = onlyFused(g);
  ASSERT_NE(f, nullptr) << printGraph(g);
  EXPECT_EQ(f->attrs().getString("program"), "Relu f32 %0; Mul f32 %2 %1; Neg f32 %3");
  EXPECT_EQ(f->numOutputs(), 2u); // s for CheckFinite, y for the carry and the output
  EXPECT_TRUE(verifyGraph(g).isOk());
}

TEST(FuseElementwise, CpuFusedAndUnfusedAreBitIdentical) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    for (Shape shape : {Shape{2, 3, 5, 7}, Shape{4, 8, 16}}) {
      Graph plain("plain"), fused("fused");
      auto bp = buildChain(plain, d, shape);
      auto bf = buildChain(fused, d, shape);
      ASSERT_TRUE(fuse(fused).isOk());
      ASSERT_EQ(countOps(fused, OpKind::FusedElementwise), 1);
      auto ep = emitStep(plain, bp), ef = emitStep(fused, bf);
      ASSERT_TRUE(ep && ef);
      for (uint64_t seed : {1, 2}) {
        auto bpl = createCpuBackend(), bfu = createCpuBackend();
        auto want = runStep(*bpl, *ep, seed), got = runStep(*bfu, *ef, seed);
        ASSERT_EQ(want.size(), 4u);
        for (const auto& [name, bytes] : want)
          EXPECT_TRUE(bytes == got[name]) << dtypeName(d) << " " << shapeToString(shape) << " "
                                          << name << " differs";
      }
    }
  }
}

TEST(FuseElementwise, ProgramErrorsAreClean) {
  AttrMap a;
  a.setString("program", "Add f32 %0 %5");
  a.setInts("results", {2});
  EXPECT_FALSE(parseFusedProgram(a, 2).hasValue());
  a.setString("program", "Conv f32 %0 %1");
  EXPECT_FALSE(parseFusedProgram(a, 2).hasValue());
  a.setString("program", "Add bf16 %0 %1");
  auto p = parseFusedProgram(a, 2);
  ASSERT_TRUE(p.hasValue());
  EXPECT_FALSE(checkFusedTypes(*p, {DType::F32, DType::BF16}).hasValue());
}

TEST(FusedKernelCodegen, NvrtcCompilesEveryOpToAnSm90Cubin) {
  if (Status st = loadNvrtc(); !st) GTEST_SKIP() << st.message();
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    Graph g("chain");
    auto b = buildChain(g, d, {4, 8, 16});
    ASSERT_TRUE(fuse(g).isOk());
    auto e = emitStep(g, b);
    ASSERT_TRUE(e);
    ASSERT_TRUE(generateFusedKernels(e->plan, 90, true).isOk());
    ASSERT_EQ(e->plan.kernels.size(), 1u);
    const PlanKernel& k = e->plan.kernels[0];
    EXPECT_EQ(k.arch, 90);
    // An ELF image (the cubin) with the entry point in it.
    ASSERT_GT(k.cubin.size(), 4u);
    EXPECT_EQ(std::memcmp(k.cubin.data(), "\x7f" "ELF", 4), 0);
    EXPECT_NE(std::string(k.cubin.begin(), k.cubin.end()).find(kFusedEntry), std::string::npos);
    for (const char* op : {"__fadd_rn", "__fsub_rn", "__fmul_rn", "relu(", "clip(", " / "})
      EXPECT_NE(k.source.find(op), std::string::npos) << op;
    // The plan text keeps the kernel and parses back to the same plan.
    std::string text = printPlan(e->plan);
    auto back = parsePlan(text);
    ASSERT_TRUE(back.hasValue()) << back.status().toString();
    ASSERT_EQ(back->kernels.size(), 1u);
    EXPECT_EQ(back->kernels[0].cubin, k.cubin);
    EXPECT_EQ(back->kernels[0].source, k.source);
    EXPECT_EQ(printPlan(*back), text);
  }
  // Other targets (software bf16 rounding below sm_80; CUDA 13's NVRTC has no sm_70).
  for (int arch : {75, 80, 89}) {
    Graph g("chain");
    auto b = buildChain(g, DType::BF16, {4, 8, 16});
    ASSERT_TRUE(fuse(g).isOk());
    auto e = emitStep(g, b);
    ASSERT_TRUE(e);
    Status st = generateFusedKernels(e->plan, arch, true);
    EXPECT_TRUE(st.isOk()) << "sm_" << arch << ": " << st.toString();
  }
}

// ---- The generated kernel, emulated on the host ------------------------------------------------
// Without a GPU, the kernel's vector and scalar paths, its 16-bit packing and every op's
// expression are still checked: the generated source is compiled by the host C++ compiler with a
// few definitions standing in for CUDA's (the PTX conversions become Half.h's, which round the
// same way), run over a grid of 3 blocks of 256 threads, and compared with the CPU executor.

const char* kHostShim = R"(#include "runtime/plan/Half.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#define __device__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(x)
#define __restrict__
struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
struct D3 { unsigned x; };
D3 blockIdx, blockDim, threadIdx, gridDim;
)";

/// The source with the PTX conversions replaced by Half.h's.
std::string hostSource(const std::string& src) {
  std::istringstream in(src);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.rfind("__device__ __forceinline__ float h2f", 0) == 0)
      line = "inline float h2f(u16 h) { return hgp::halfToFloat(h); }";
    else if (line.rfind("__device__ __forceinline__ u16 f2h", 0) == 0)
      line = "inline u16 f2h(float f) { return hgp::floatToHalf(f); }";
    else if (line.rfind("__device__ __forceinline__ u16 f2b", 0) == 0)
      line = "inline u16 f2b(float f) { return hgp::floatToBf16(f); }";
    out += line + "\n";
  }
  return out;
}

/// main(argv: n vec files...): reads each input file, runs the kernel over the grid, writes each
/// result file.
std::string hostMain(int ni, int no) {
  std::string s = "int main(int argc, char** argv) {\n  long long n = atoll(argv[1]); int vec = atoi(argv[2]);\n"
                  "  std::vector<std::vector<uint4>> buf(" + std::to_string(ni + no) + ");\n"
                  "  for (int k = 0; k < " + std::to_string(ni + no) + "; ++k) {\n"
                  "    buf[k].assign(size_t(n) / 2 + 8, uint4{0, 0, 0, 0});\n"
                  "    if (k < " + std::to_string(ni) + ") { FILE* f = fopen(argv[3 + k], \"rb\"); "
                  "if (!f || fread(buf[k].data(), 1, buf[k].size() * 16, f) == 0) return 2; fclose(f); }\n  }\n"
                  "  gridDim.x = 3; blockDim.x = 256;\n"
                  "  for (blockIdx.x = 0; blockIdx.x < gridDim.x; ++blockIdx.x)\n"
                  "    for (threadIdx.x = 0; threadIdx.x < blockDim.x; ++threadIdx.x)\n      hgp_fused(";
  for (int k = 0; k < ni + no; ++k) s += "buf[" + std::to_string(k) + "].data(), ";
  s += "n, vec);\n  for (int k = " + std::to_string(ni) + "; k < " + std::to_string(ni + no) +
       "; ++k) { FILE* f = fopen(argv[3 + k], \"wb\"); if (!f) return 3; "
       "fwrite(buf[k].data(), 1, buf[k].size() * 16, f); fclose(f); }\n  return 0;\n}\n";
  return s;
}

std::vector<uint8_t> readTensorBytes(Backend& b, const Plan& p, int t) {
  std::vector<uint8_t> bytes(size_t(p.tensors[size_t(t)].bytes()));
  EXPECT_TRUE(b.read(t, bytes.data()).isOk());
  return bytes;
}

TEST(FusedKernelCodegen, GeneratedKernelEmulatedOnTheHostMatchesTheCpu) {
  if (std::system("c++ --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no host C++ compiler";
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("hgp-fused-emu-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (DType d : {DType::F32, DType::BF16, DType::F16})
    for (Shape shape : {Shape{2, 3, 5, 7}, Shape{4, 8, 16}}) {
      SCOPED_TRACE(std::string(dtypeName(d)) + " " + shapeToString(shape));
      Graph g("fused");
      auto bindings = buildChain(g, d, shape);
      ASSERT_TRUE(fuse(g).isOk());
      auto e = emitStep(g, bindings);
      ASSERT_TRUE(e);
      const PlanStep* step = nullptr;
      for (const PlanStep& s : e->plan.programs[0].steps)
        if (s.op == OpKind::FusedElementwise) step = &s;
      ASSERT_NE(step, nullptr);
      auto p = parseFusedProgram(step->attrs, int(step->inputs.size()));
      ASSERT_TRUE(p.hasValue());
      std::vector<DType> in;
      for (int t : step->inputs) in.push_back(e->plan.tensors[size_t(t)].type.dtype);
      auto src = fusedKernelSource(*p, in, 90);
      ASSERT_TRUE(src.hasValue()) << src.status().toString();
      std::ofstream(dir / "k.cpp") << kHostShim << hostSource(*src)
                                   << hostMain(int(step->inputs.size()), int(step->outputs.size()));
      std::string cc = "c++ -std=c++20 -O1 -I" + std::string(HGP_SOURCE_DIR) + " " +
                       (dir / "k.cpp").string() + " -o " + (dir / "k").string() + " 2>&1";
      ASSERT_EQ(std::system(cc.c_str()), 0) << cc;
      // The CPU runs the fused plan; its step's operands and results are the reference.
      auto cpu = createCpuBackend();
      auto outs = runStep(*cpu, *e, 3);
      ASSERT_FALSE(outs.empty());
      int64_t n = numElements(shape);
      for (int vec : {0, 1}) {
        std::string cmd = (dir / "k").string() + " " + std::to_string(n) + " " + std::to_string(vec);
        for (size_t k = 0; k < step->inputs.size(); ++k) {
          std::vector<uint8_t> b = readTensorBytes(*cpu, e->plan, step->inputs[k]);
          std::string f = (dir / ("in" + std::to_string(k))).string();
          std::ofstream(f, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
          cmd += " " + f;
        }
        for (size_t r = 0; r < step->outputs.size(); ++r) cmd += " " + (dir / ("out" + std::to_string(r))).string();
        ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
        for (size_t r = 0; r < step->outputs.size(); ++r) {
          std::vector<uint8_t> want = readTensorBytes(*cpu, e->plan, step->outputs[r]);
          std::ifstream f(dir / ("out" + std::to_string(r)), std::ios::binary);
          std::vector<uint8_t> got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
          ASSERT_GE(got.size(), want.size());
          got.resize(want.size());
          EXPECT_TRUE(got == want) << "result " << r << " differs (vec " << vec << ")";
        }
      }
    }
  std::filesystem::remove_all(dir);
}

} // namespace
} // namespace hgp
