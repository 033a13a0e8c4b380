// CudaLibraries.h - cuDNN and cuBLAS, loaded at run time.
//
// Include this instead of linking the libraries: it declares the official API (from the
// toolkit's headers), and CudaLibraries.cpp defines the functions listed in CudaLibraries.def as
// stubs that dlopen libcudnn.so.9 and libcublas.so.13 on first use. loadCudaLibraries() says
// whether they are present, so the runner can fall back to the CPU with a clear reason.
#pragma once

#include "runtime/support/Status.h"

#include <cublas_v2.h>
#include <cudnn.h>

namespace hgp::cuda {

/// Loads cuDNN and cuBLAS (once); the error names the library that is missing and where the
/// loader looked.
Status loadCudaLibraries();

} // namespace hgp::cuda
