#include "compiler/target/Target.h"

#include "runtime/support/DynamicLibrary.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>

namespace hgp {

double Target::peak(Precision precision) const {
  double r = precision == Precision::TF32   ? tf32
             : precision == Precision::FP16 ? fp16
             : precision == Precision::BF16 ? bf16
                                            : fp32;
  return r > 0 ? r : fp32;
}

int Target::smArch() const {
  if (name == "h200" || name == "h100") return 90;
  if (name == "a100") return 80;
  if (name == "v100") return 70;
  if (name == "t4") return 75;
  if (name == "l4") return 89;
  return 0;
}

const std::vector<Target>& knownTargets() {
  static const std::vector<Target> targets = {
#define HGP_TARGET(N, Desc, Sms, Regs, SmemKiB, Threads, Blocks, L2MiB, GBs, F32, TF32, F16, BF16, \
                   LaunchUs, LinkGBs, MemMiB)                                                                \
  Target{#N, Desc, Sms, Regs, int64_t(SmemKiB) * 1024, Threads, Blocks, int64_t(L2MiB) << 20,      \
         double(GBs) * 1e9, F32 * 1e12, TF32 * 1e12, F16 * 1e12, BF16 * 1e12, LaunchUs * 1e-6,     \
         double(LinkGBs) * 1e9, int64_t(MemMiB) << 20},
#include "compiler/target/Targets.def"
  };
  return targets;
}

namespace {

std::string knownNames() {
  std::string s;
  for (const Target& t : knownTargets()) s += (s.empty() ? "" : ", ") + t.name;
  return s;
}

/// The local GPU's name from the CUDA driver, loaded at run time (hgpc itself needs no GPU).
Expected<std::string> localGpuName() {
  std::optional<DynamicLibrary> lib =
      DynamicLibrary::openFirst({"libcuda.so.1"}, DynamicLibrary::Scope::Local);
  if (!lib) return Status(ErrorCode::Device, "no NVIDIA driver (libcuda.so.1) on this machine");
  using InitFn = int (*)(unsigned);
  using GetFn = int (*)(int*, int);
  using NameFn = int (*)(char*, int, int);
  auto init = lib->function<InitFn>("cuInit");
  auto get = lib->function<GetFn>("cuDeviceGet");
  auto name = lib->function<NameFn>("cuDeviceGetName");
  int dev = 0;
  char buf[256] = {};
  if (!init || !get || !name || init(0) != 0 || get(&dev, 0) != 0 || name(buf, sizeof buf, dev) != 0)
    return Status(ErrorCode::Device, "the NVIDIA driver reports no usable GPU");
  return std::string(buf);
}

} // namespace

Expected<DeviceMemory> localDeviceMemory() {
  std::optional<DynamicLibrary> lib =
      DynamicLibrary::openFirst({"libcuda.so.1"}, DynamicLibrary::Scope::Local);
  if (!lib) return Status(ErrorCode::Device, "no NVIDIA driver (libcuda.so.1) on this machine");
  using InitFn = int (*)(unsigned);
  using GetFn = int (*)(int*, int);
  using RetainFn = int (*)(void**, int);
  using ReleaseFn = int (*)(int);
  using PushFn = int (*)(void*);
  using PopFn = int (*)(void**);
  using MemFn = int (*)(size_t*, size_t*);
  auto init = lib->function<InitFn>("cuInit");
  auto get = lib->function<GetFn>("cuDeviceGet");
  auto retain = lib->function<RetainFn>("cuDevicePrimaryCtxRetain");
  auto release = lib->function<ReleaseFn>("cuDevicePrimaryCtxRelease_v2");
  auto push = lib->function<PushFn>("cuCtxPushCurrent_v2");
  auto pop = lib->function<PopFn>("cuCtxPopCurrent_v2");
  auto mem = lib->function<MemFn>("cuMemGetInfo_v2");
  if (!init || !get || !retain || !release || !push || !pop || !mem)
    return Status(ErrorCode::Device, "the NVIDIA driver lacks the memory query entry points");
  int dev = 0, rc = init(0);
  if (rc == 0) rc = get(&dev, 0);
  if (rc != 0) return Status(ErrorCode::Device, "the NVIDIA driver reports no usable GPU (CUDA error " + std::to_string(rc) + ")");
  void* ctx = nullptr;
  if ((rc = retain(&ctx, dev)) != 0)
    return Status(ErrorCode::Device, "cannot open a context on GPU 0 (CUDA error " + std::to_string(rc) + ")");
  size_t freeBytes = 0, totalBytes = 0;
  if ((rc = push(ctx)) == 0) {
    rc = mem(&freeBytes, &totalBytes);
    void* popped = nullptr;
    int popRc = pop(&popped);
    if (rc == 0) rc = popRc;
  }
  int releaseRc = release(dev);
  if (rc == 0) rc = releaseRc;
  if (rc != 0) return Status(ErrorCode::Device, "cuMemGetInfo failed (CUDA error " + std::to_string(rc) + ")");
  return DeviceMemory{int64_t(freeBytes), int64_t(totalBytes)};
}

Expected<Target> findTarget(const std::string& name) {
  if (name == "auto") {
    Expected<std::string> gpu = localGpuName();
    if (!gpu)
      return Status(ErrorCode::Usage, "--target auto: " + gpu.status().message() +
                                          "; name the GPU instead: " + knownNames());
    std::string upper = *gpu;
    for (const Target& t : knownTargets()) {
      std::string key = t.name;
      std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::toupper(c); });
      if (upper.find(key) != std::string::npos) return t;
    }
    return Status(ErrorCode::Usage, "--target auto: hgpc has no description of the local GPU '" +
                                        *gpu + "'; name the closest of " + knownNames() +
                                        " (docs/adding-a-target.md says how to add one)");
  }
  for (const Target& t : knownTargets())
    if (t.name == name) return t;
  return Status(ErrorCode::Usage, "unknown target '" + name + "'; known: " + knownNames() + ", auto");
}

} // namespace hgp
