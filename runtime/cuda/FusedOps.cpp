// FusedOps.cpp - the CUDA executor for FusedElementwise, and the loading of the plan's
// generated kernels.
//
// hgpc compiled each distinct fused program to a cubin for the target's SM architecture
// (compiler/codegen, docs/fusion.md). At plan load, FusedKernels::load hands each cubin to the
// CUDA runtime (cudaLibraryLoadData) and looks its entry point up (cudaLibraryGetKernel); a cubin
// for another architecture is refused there, naming both. The executor launches the step's
// kernel with cudaLaunchKernel on the step's stream, so the launch is captured into the program's
// CUDA graph like any other. Arguments: the inputs, the results, the element count and whether
// the vector path may be used (every pointer 16-byte aligned; the arena aligns tensors to 64
// bytes, batch slices to 64 bytes too, so it nearly always is). An i64 input is a dropout's
// iteration counter: a device scalar that the kernel reads once per thread, passed by pointer so
// that a replayed graph sees its new value; it takes no part in the shape, alignment and vector
// width checks. Nor does a broadcast input (a squeeze-excitation gate, FusedOperandMap): the
// kernel reads it element by element, its index map compiled in.
#include "runtime/cuda/CudaKernel.h"
#include "runtime/plan/FusedProgram.h"

#include <algorithm>
#include <cstdint>

namespace hgp::cuda {

FusedKernels::~FusedKernels() {
  for (cudaLibrary_t l : libraries_) cudaLibraryUnload(l);
}

Status FusedKernels::load(const Plan& plan, const cudaDeviceProp& props) {
  int device = props.major * 10 + props.minor;
  for (const PlanKernel& k : plan.kernels) {
    if (k.arch != device)
      return Status(ErrorCode::Device,
                    "the plan's fused kernel " + k.name + " was compiled for sm_" +
                        std::to_string(k.arch) + ", but " + props.name + " is sm_" +
                        std::to_string(device) + "; compile with --target for this GPU (or --no-fuse)");
    cudaLibrary_t lib = nullptr;
    HGP_CUDA_TRY(cudaLibraryLoadData(&lib, k.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    libraries_.push_back(lib);
    cudaKernel_t fn = nullptr;
    HGP_CUDA_TRY(cudaLibraryGetKernel(&fn, lib, k.entry.c_str()));
    kernels_.emplace_back(k.name, fn);
  }
  return Status::ok();
}

cudaKernel_t FusedKernels::find(const std::string& name) const {
  for (const auto& [n, k] : kernels_)
    if (n == name) return k;
  return nullptr;
}

Status execFusedElementwise(CudaArgs& a) {
  if (a.in.empty() || a.out.empty()) return a.fail("FusedElementwise needs inputs and results");
  std::string name = a.attrs().getString("kernel");
  cudaKernel_t kernel = a.ctx.kernels && !name.empty() ? a.ctx.kernels->find(name) : nullptr;
  if (!kernel)
    return a.fail(name.empty() ? "the fused step has no generated kernel: hgpc could not compile "
                                 "it (NVRTC missing); recompile with NVRTC or with --no-fuse"
                               : "the plan has no kernel '" + name + "'");
  const Shape& shape = *a.out[0].shape;
  std::vector<DType> types;
  std::vector<void*> ptrs;
  bool vec = true;
  for (auto* list : {&a.in, &a.out})
    for (const DeviceTensor& t : *list) {
      if (list == &a.in && t.dtype == DType::I64) {
        if (t.numel() != 1)
          return a.fail("the dropout counter has shape " + shapeToString(*t.shape) + ", not []");
        ptrs.push_back(t.data);
        continue;
      }
      ptrs.push_back(t.data);
      if (*t.shape != shape) {
        Expected<FusedOperandMap> m = fusedOperandMap(*t.shape, shape);
        if (list == &a.in && m) continue; // a broadcast input
        return a.fail("FusedElementwise operands differ in shape");
      }
      types.push_back(t.dtype);
      vec = vec && (reinterpret_cast<uintptr_t>(t.data) & 15) == 0;
    }
  long long n = numElements(shape);
  int v = fusedVectorWidth(types), isVec = vec ? 1 : 0;
  std::vector<void*> args;
  for (void*& p : ptrs) args.push_back(&p);
  args.push_back(&n);
  args.push_back(&isVec);
  int sms = a.ctx.props.multiProcessorCount > 0 ? a.ctx.props.multiProcessorCount : 132;
  long long work = vec ? (n + v - 1) / v : n;
  long long blocks = std::clamp<long long>((work + kBlock - 1) / kBlock, 1, (long long)sms * 16);
  HGP_CUDA_TRY(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(unsigned(blocks)),
                                dim3(kBlock), args.data(), 0, a.stream));
  return checkLaunch(a, "fused elementwise kernel");
}

} // namespace hgp::cuda
