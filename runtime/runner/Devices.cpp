#include "runtime/runner/Devices.h"

#include <cstdio>

namespace hgp {

Expected<std::unique_ptr<Backend>> selectBackend(const std::string& device) {
  if (device == "cpu") return createCpuBackend();
  const char* why = "this executable was built without the CUDA backend";
  if (device == "cuda") return Status(ErrorCode::Device, std::string("--device cuda: ") + why);
  std::fprintf(stderr, "note: no usable GPU (%s); running on the CPU reference backend\n", why);
  return createCpuBackend();
}

} // namespace hgp
