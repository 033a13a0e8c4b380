// Devices.h - choosing the backend for --device auto|cpu|cuda.
#pragma once

#include "runtime/Backend.h"

namespace hgp {

/// "cpu" gives the CPU reference backend. "cuda" gives the CUDA backend or a Device error
/// saying why there is none. "auto" prefers CUDA and otherwise falls back to the CPU, saying
/// so once on stderr.
Expected<std::unique_ptr<Backend>> selectBackend(const std::string& device,
                                                 const BackendOptions& options = {});

} // namespace hgp
