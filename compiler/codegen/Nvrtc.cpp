#include "compiler/codegen/Nvrtc.h"

#include "runtime/support/DynamicLibrary.h"

#include <cstdlib>
#include <mutex>
#include <optional>

namespace hgp {

namespace {

// The few NVRTC entry points hgpc uses, declared by their documented C signatures (nvrtc.h),
// so that hgpc builds without the CUDA headers.
using nvrtcProgram = struct _nvrtcProgram*;
using CreateFn = int (*)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                         const char* const*);
using DestroyFn = int (*)(nvrtcProgram*);
using CompileFn = int (*)(nvrtcProgram, int, const char* const*);
using SizeFn = int (*)(nvrtcProgram, size_t*);
using GetFn = int (*)(nvrtcProgram, char*);
using ErrorFn = const char* (*)(int);

struct Nvrtc {
  CreateFn create = nullptr;
  DestroyFn destroy = nullptr;
  CompileFn compile = nullptr;
  SizeFn cubinSize = nullptr, logSize = nullptr;
  GetFn cubin = nullptr, log = nullptr;
  ErrorFn error = nullptr;
};

Nvrtc gNvrtc;
Status gStatus;
std::once_flag gOnce;

void load() {
  std::vector<std::string> names = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  if (const char* home = std::getenv("CUDA_HOME")) names.push_back(std::string(home) + "/lib64/libnvrtc.so");
  names.push_back("/usr/local/cuda/lib64/libnvrtc.so");
  // $HGP_NVRTC_LIBRARY: exactly this library (a non-standard install; tests use a missing one).
  if (const char* only = std::getenv("HGP_NVRTC_LIBRARY")) names = {only};
  std::vector<DynamicLibrary::Failure> failed;
  std::optional<DynamicLibrary> lib =
      DynamicLibrary::openFirst(names, DynamicLibrary::Scope::Local, &failed);
  if (!lib) {
    gStatus = Status(ErrorCode::Io, "NVRTC (the CUDA toolkit's runtime compiler) is not available; "
                                    "tried " + DynamicLibrary::namesOf(failed));
    return;
  }
  // The library stays loaded for the life of the process; gNvrtc keeps its functions.
  auto sym = [&](const char* name) { return lib->symbol(name); };
  gNvrtc.create = reinterpret_cast<CreateFn>(sym("nvrtcCreateProgram"));
  gNvrtc.destroy = reinterpret_cast<DestroyFn>(sym("nvrtcDestroyProgram"));
  gNvrtc.compile = reinterpret_cast<CompileFn>(sym("nvrtcCompileProgram"));
  gNvrtc.cubinSize = reinterpret_cast<SizeFn>(sym("nvrtcGetCUBINSize"));
  gNvrtc.cubin = reinterpret_cast<GetFn>(sym("nvrtcGetCUBIN"));
  gNvrtc.logSize = reinterpret_cast<SizeFn>(sym("nvrtcGetProgramLogSize"));
  gNvrtc.log = reinterpret_cast<GetFn>(sym("nvrtcGetProgramLog"));
  gNvrtc.error = reinterpret_cast<ErrorFn>(sym("nvrtcGetErrorString"));
  if (!gNvrtc.create || !gNvrtc.destroy || !gNvrtc.compile || !gNvrtc.cubinSize || !gNvrtc.cubin ||
      !gNvrtc.logSize || !gNvrtc.log || !gNvrtc.error)
    gStatus = Status(ErrorCode::Io, "the loaded NVRTC lacks nvrtcGetCUBIN or another entry point "
                                    "(hgpc needs NVRTC 11.1 or newer)");
}

} // namespace

Status loadNvrtc() {
  std::call_once(gOnce, load);
  return gStatus;
}

Expected<std::vector<uint8_t>> compileCubin(const std::string& source, const std::string& name,
                                            int arch) {
  HGP_TRY(loadNvrtc());
  const Nvrtc& n = gNvrtc;
  nvrtcProgram prog = nullptr;
  auto fail = [&](const std::string& what, int rc) {
    return Status(ErrorCode::Internal, "NVRTC " + what + " for kernel " + name + " (sm_" +
                                           std::to_string(arch) + "): " + n.error(rc));
  };
  if (int rc = n.create(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr))
    return fail("nvrtcCreateProgram", rc);
  std::string archOpt = "--gpu-architecture=sm_" + std::to_string(arch);
  const char* opts[] = {archOpt.c_str(), "--fmad=false", "--std=c++17"};
  int rc = n.compile(prog, 3, opts);
  if (rc != 0) {
    size_t logSize = 0;
    n.logSize(prog, &logSize);
    std::string log(logSize, '\0');
    if (logSize) n.log(prog, log.data());
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    n.destroy(&prog);
    Status st = fail("compilation failed", rc);
    return Status(st.code(), st.message() + "\n" + log);
  }
  size_t size = 0;
  std::vector<uint8_t> cubin;
  if ((rc = n.cubinSize(prog, &size)) == 0) {
    cubin.resize(size);
    rc = n.cubin(prog, reinterpret_cast<char*>(cubin.data()));
  }
  n.destroy(&prog);
  if (rc != 0) return fail("nvrtcGetCUBIN", rc);
  return cubin;
}

} // namespace hgp
