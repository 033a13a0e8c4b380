#include "runtime/runner/Devices.h"

#include <cstdio>

namespace hgp {

#ifndef HGP_HAVE_CUDA
Expected<std::unique_ptr<Backend>> createCudaBackend(const BackendOptions&) {
  return Status(ErrorCode::Device, "this executable was built without the CUDA backend");
}
#endif

Expected<std::unique_ptr<Backend>> selectBackend(const std::string& device,
                                                 const BackendOptions& options) {
  if (device == "cpu") return createCpuBackend();
  auto cuda = createCudaBackend(options);
  if (cuda) return cuda;
  if (device == "cuda")
    return Status(ErrorCode::Device, "--device cuda: " + cuda.status().message());
  std::fprintf(stderr, "note: %s; running on the CPU reference backend\n",
               cuda.status().message().c_str());
  return createCpuBackend();
}

} // namespace hgp
