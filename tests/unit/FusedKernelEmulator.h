// FusedKernelEmulator.h - a generated FusedElementwise kernel run on the host, for the unit tests
// (FuseElementwiseTest.cpp, FuseDropoutTest.cpp).
//
// Without a GPU, the kernel's vector and scalar paths, its 16-bit packing, its Philox draws and
// every op's expression are still checked: the generated source is compiled by the host C++
// compiler with a few definitions standing in for CUDA's (the PTX conversions become Half.h's,
// which round the same way; __umulhi the high word of the 64-bit product; expf, tanhf, erff and
// logf glibc's, which the CPU executors call too), run over a grid of 3 blocks of 256 threads,
// and compared with the CPU executor's result of the same step. The host build contracts no
// multiply-add (-ffp-contract=off), as neither the CPU executors nor the GPU kernels do. So the
// emulation checks the kernel's logic bit for bit; that CUDA's math functions differ from glibc's
// by a few ulp is the GPU test's business (tests/gpu/CudaFusedElementwiseTest.cpp).
#pragma once

#include "FusedTestGraphs.h"

#include "compiler/codegen/FusedKernelSource.h"
#include "runtime/plan/FusedProgram.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace hgp::fusiontest {

inline const char* kHostShim = R"(#include "runtime/plan/Half.h"
#include <math.h>
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
inline unsigned __umulhi(unsigned a, unsigned b) { return unsigned((unsigned long long)a * b >> 32); }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.f / a; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
struct D3 { unsigned x; };
D3 blockIdx, blockDim, threadIdx, gridDim;
)";

/// The source with the PTX conversions replaced by Half.h's.
inline std::string hostSource(const std::string& src) {
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
inline std::string hostMain(int ni, int no) {
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

inline std::vector<uint8_t> readTensorBytes(Backend& b, const Plan& p, int t) {
  std::vector<uint8_t> bytes(size_t(p.tensors[size_t(t)].bytes()));
  EXPECT_TRUE(b.read(t, bytes.data()).isOk());
  return bytes;
}

inline bool haveHostCompiler() { return std::system("c++ --version > /dev/null 2>&1") == 0; }

/// Compiles generated kernels for the host, once per distinct source, in a scratch directory
/// (kept for reading when HGP_KEEP_EMU is set).
class KernelEmulator {
public:
  KernelEmulator()
      : dir_(std::filesystem::temp_directory_path() / ("hgp-fused-emu-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir_);
  }
  ~KernelEmulator() { if (!std::getenv("HGP_KEEP_EMU")) std::filesystem::remove_all(dir_); }

  /// Runs every FusedElementwise step of program "step" of `e` emulated, with its vector path on
  /// and off, on the operands `cpu` holds after running the plan, and expects the CPU's results
  /// bit for bit. The number of steps checked.
  int checkSteps(const EmittedPlan& e, Backend& cpu) {
    int checked = 0;
    for (const PlanStep& step : e.plan.programs[0].steps) {
      if (step.op != OpKind::FusedElementwise) continue;
      auto p = parseFusedProgram(step.attrs, int(step.inputs.size()));
      EXPECT_TRUE(p.hasValue()) << p.status().toString();
      if (!p) continue;
      std::vector<DType> in;
      std::vector<FusedOperandMap> maps;
      const Shape& out = e.plan.tensors[size_t(step.outputs[0])].type.shape;
      for (int t : step.inputs) {
        const TensorType& type = e.plan.tensors[size_t(t)].type;
        in.push_back(type.dtype);
        maps.push_back(type.dtype == DType::I64 ? FusedOperandMap{} : *fusedOperandMap(type.shape, out));
      }
      auto src = fusedKernelSource(*p, in, 90, maps);
      EXPECT_TRUE(src.hasValue()) << src.status().toString();
      if (!src) continue;
      std::string exe = compile(*src, int(step.inputs.size()), int(step.outputs.size()));
      if (exe.empty()) continue;
      int64_t n = e.plan.tensors[size_t(step.outputs[0])].type.numElements();
      for (int vec : {0, 1}) {
        SCOPED_TRACE(p->text() + " (vec " + std::to_string(vec) + ")");
        std::string cmd = exe + " " + std::to_string(n) + " " + std::to_string(vec);
        for (size_t k = 0; k < step.inputs.size(); ++k) {
          std::vector<uint8_t> b = readTensorBytes(cpu, e.plan, step.inputs[k]);
          std::string f = (dir_ / ("in" + std::to_string(k))).string();
          std::ofstream(f, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
          cmd += " " + f;
        }
        for (size_t r = 0; r < step.outputs.size(); ++r) cmd += " " + (dir_ / ("out" + std::to_string(r))).string();
        EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
        for (size_t r = 0; r < step.outputs.size(); ++r) {
          std::vector<uint8_t> want = readTensorBytes(cpu, e.plan, step.outputs[r]);
          std::ifstream f(dir_ / ("out" + std::to_string(r)), std::ios::binary);
          std::vector<uint8_t> got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
          EXPECT_GE(got.size(), want.size());
          got.resize(want.size());
          EXPECT_TRUE(got == want) << "result " << r << " differs";
        }
      }
      ++checked;
    }
    return checked;
  }

private:
  /// The host executable of a kernel source; empty (and a failure recorded) when it does not build.
  std::string compile(const std::string& src, int ni, int no) {
    auto it = built_.find(src);
    if (it != built_.end()) return it->second;
    std::string name = "k" + std::to_string(built_.size());
    std::ofstream(dir_ / (name + ".cpp")) << kHostShim << hostSource(src) << hostMain(ni, no);
    std::string cc = "c++ -std=c++20 -O1 -ffp-contract=off -I" + std::string(HGP_SOURCE_DIR) + " " +
                     (dir_ / (name + ".cpp")).string() + " -o " + (dir_ / name).string() + " 2>&1";
    bool ok = std::system(cc.c_str()) == 0;
    EXPECT_TRUE(ok) << cc;
    return built_[src] = ok ? (dir_ / name).string() : std::string();
  }

  std::filesystem::path dir_;
  std::map<std::string, std::string> built_; // source -> executable
};

} // namespace hgp::fusiontest
