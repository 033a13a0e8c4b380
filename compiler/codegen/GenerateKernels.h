// GenerateKernels.h - the CUDA kernels of a plan's FusedElementwise steps, compiled ahead of time.
//
// For every distinct (program, input dtypes) among the plan's FusedElementwise steps, this
// writes the CUDA C source (FusedKernelSource.h), compiles it with NVRTC for the target's SM
// architecture (Nvrtc.h) and adds both to the plan's kernel table (Plan::kernels, "fe0",
// "fe1", ... in program order); each step names its kernel with the attribute `kernel`. The
// CUDA backend loads the cubins when it loads the plan (runtime/cuda/FusedOps.cpp).
#pragma once

#include "runtime/plan/Plan.h"

namespace hgp {

/// Generates and compiles the kernels for sm_<arch>. A plan without fused steps needs nothing
/// (and no NVRTC). When NVRTC cannot be loaded: an error if `required` (suggesting --no-fuse),
/// else the plan is left without kernels (it runs on the CPU backend; the CUDA backend refuses
/// it at load with a clear message).
Status generateFusedKernels(Plan& plan, int arch, bool required);

} // namespace hgp
