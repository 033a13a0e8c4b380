// Nvrtc.h - CUDA C to a cubin, ahead of time, with NVRTC loaded at run time.
//
// hgpc compiles the generated fused kernels (FusedKernelSource.h) for the target GPU's SM
// architecture while it compiles the model, so that the runner loads machine code and needs no
// compiler. NVRTC works without a GPU. Like the runtime's cuDNN and cuBLAS (runtime/cuda/
// CudaLibraries.h), it is opened with dlopen on first use rather than linked: hgpc still runs
// where the CUDA toolkit is missing, and only a compile that has kernels to build fails, saying
// where it looked and that --no-fuse avoids the need.
#pragma once

#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hgp {

/// Loads NVRTC once (libnvrtc.so.13, .so.12, .so, then $CUDA_HOME/lib64 and /usr/local/cuda/lib64,
/// or only $HGP_NVRTC_LIBRARY when that is set); the error names every place tried.
Status loadNvrtc();

/// Compiles `source` for sm_<arch> (e.g. 90) to a cubin; the error carries NVRTC's log.
/// Compiled with -fmad=false, so that no multiply and add are contracted (bit-exact kernels).
Expected<std::vector<uint8_t>> compileCubin(const std::string& source, const std::string& name,
                                            int arch);

} // namespace hgp
