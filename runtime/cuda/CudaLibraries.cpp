#include "runtime/cuda/CudaLibraries.h"

#include "runtime/support/DynamicLibrary.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>

namespace hgp::cuda {

namespace {

std::optional<DynamicLibrary> gCudnnLib, gCublasLib;
std::once_flag gOnce;
Status gStatus;

/// The function `name` from `lib`; aborts with a clear message if a loaded library lacks it,
/// which means an incompatible version (the stubs cannot return an error of the right type).
void* resolve(const std::optional<DynamicLibrary>& lib, const char* name) {
  void* f = lib ? lib->symbol(name) : nullptr;
  if (!f) {
    std::fprintf(stderr, "error: %s is missing from the loaded CUDA libraries (%s); hgpc needs "
                         "cuDNN 9 and cuBLAS 13\n", name, DynamicLibrary::lastError().c_str());
    std::abort();
  }
  return f;
}

} // namespace

Status loadCudaLibraries() {
  std::call_once(gOnce, [] {
    std::vector<DynamicLibrary::Failure> failed;
    gCudnnLib = DynamicLibrary::openFirst({"libcudnn.so.9", "libcudnn.so"},
                                          DynamicLibrary::Scope::Global, &failed);
    if (!gCudnnLib) {
      gStatus = Status(ErrorCode::Device, "cuDNN 9 was not found (tried " +
                                              DynamicLibrary::namesOf(failed) +
                                              " on the library path)");
      return;
    }
    failed.clear();
    gCublasLib = DynamicLibrary::openFirst({"libcublas.so.13", "libcublas.so"},
                                           DynamicLibrary::Scope::Global, &failed);
    if (!gCublasLib)
      gStatus = Status(ErrorCode::Device, "cuBLAS 13 was not found (tried " +
                                              DynamicLibrary::namesOf(failed) +
                                              " on the library path)");
  });
  return gStatus;
}

} // namespace hgp::cuda


extern "C" {
#define HGP_CUDNN_FN(Ret, Name, Params, Args)                                                     \
  Ret Name Params {                                                                                \
    using Fn = Ret(*) Params;                                                                      \
    static Fn fn = reinterpret_cast<Fn>(hgp::cuda::resolve(hgp::cuda::gCudnnLib, #Name));          \
    return fn Args;                                                                                \
  }
#define HGP_CUBLAS_FN(Ret, Name, Params, Args)                                                    \
  Ret Name Params {                                                                                \
    using Fn = Ret(*) Params;                                                                      \
    static Fn fn = reinterpret_cast<Fn>(hgp::cuda::resolve(hgp::cuda::gCublasLib, #Name));         \
    return fn Args;                                                                                \
  }
#include "runtime/cuda/CudaLibraries.def"
}
