#include "runtime/cuda/CudaLibraries.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace hgp::cuda {

namespace {

void* gCudnn = nullptr;
void* gCublas = nullptr;
std::once_flag gOnce;
Status gStatus;

void* openFirst(std::initializer_list<const char*> names, std::string& tried) {
  for (const char* n : names) {
    if (void* h = dlopen(n, RTLD_NOW | RTLD_GLOBAL)) return h;
    tried += std::string(tried.empty() ? "" : ", ") + n;
  }
  return nullptr;
}

/// The function `name` from `lib`; aborts with a clear message if a loaded library lacks it,
/// which means an incompatible version (the stubs cannot return an error of the right type).
void* resolve(void* lib, const char* name) {
  void* f = lib ? dlsym(lib, name) : nullptr;
  if (!f) {
    std::fprintf(stderr, "error: %s is missing from the loaded CUDA libraries (%s); hgpc needs "
                         "cuDNN 9 and cuBLAS 13\n", name, dlerror());
    std::abort();
  }
  return f;
}

} // namespace

Status loadCudaLibraries() {
  std::call_once(gOnce, [] {
    std::string tried;
    gCudnn = openFirst({"libcudnn.so.9", "libcudnn.so"}, tried);
    if (!gCudnn) {
      gStatus = Status(ErrorCode::Device, "cuDNN 9 was not found (tried " + tried +
                                              " on the library path)");
      return;
    }
    tried.clear();
    gCublas = openFirst({"libcublas.so.13", "libcublas.so"}, tried);
    if (!gCublas)
      gStatus = Status(ErrorCode::Device, "cuBLAS 13 was not found (tried " + tried +
                                              " on the library path)");
  });
  return gStatus;
}

} // namespace hgp::cuda

using hgp::cuda::gCublas;
using hgp::cuda::gCudnn;

extern "C" {
#define HGP_CUDNN_FN(Ret, Name, Params, Args)                                                     \
  Ret Name Params {                                                                                \
    using Fn = Ret(*) Params;                                                                      \
    static Fn fn = reinterpret_cast<Fn>(hgp::cuda::resolve(gCudnn, #Name));                        \
    return fn Args;                                                                                \
  }
#define HGP_CUBLAS_FN(Ret, Name, Params, Args)                                                    \
  Ret Name Params {                                                                                \
    using Fn = Ret(*) Params;                                                                      \
    static Fn fn = reinterpret_cast<Fn>(hgp::cuda::resolve(gCublas, #Name));                       \
    return fn Args;                                                                                \
  }
#include "runtime/cuda/CudaLibraries.def"
}
