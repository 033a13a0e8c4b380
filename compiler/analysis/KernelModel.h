// KernelModel.h - the kernel analyzer: launch shapes, occupancy, and kernels sharing the GPU.
//
// HGP4CNN's kernel analyzer decides how many kernels can run at once from the resources each
// needs. Here a kernel is a LaunchShape (blocks, threads per block, registers per thread, shared
// memory per block); estimateLaunch gives the shape hgpc's executors or cuDNN typically use for a
// plan step, and `--records` (a profiling run's measurements) replaces the estimate. The
// arithmetic below is the CUDA occupancy calculation: an SM holds as many blocks as the tightest
// of its block, thread, register and shared-memory limits allows.
#pragma once

#include "compiler/target/Target.h"
#include "runtime/plan/Plan.h"

#include <vector>

namespace hgp {

struct LaunchShape {
  int64_t blocks = 1;
  int threads = 256; ///< Per block.
  int regs = 32;     ///< Per thread.
  int64_t smem = 0;  ///< Bytes per block.
  /// Implicit-GEMM kernels: the blocks that share each output tile's reduction (split-K), whose
  /// partial tiles a second kernel adds up; 1 for every other kernel.
  int64_t splitK = 1;
};

/// Blocks of `k` one SM can hold at once (0 if a single block does not fit).
int blocksPerSm(const Target& t, const LaunchShape& k);

/// The fraction of the GPU `k` occupies when it runs alone, in (0, 1]: below 1, the kernel leaves
/// SMs (or room on its busiest SM) to a concurrent kernel.
double gpuShare(const Target& t, const LaunchShape& k);

/// Waves: the kernel's blocks over what the whole GPU holds at once.
double waves(const Target& t, const LaunchShape& k);

/// Whether all of `ks` can be resident at the same time, each with all of its blocks (or as many
/// as it would have alone), sharing every SM's registers, shared memory, threads and block slots.
bool coResident(const Target& t, const std::vector<LaunchShape>& ks);

/// Predicted time of kernels launched together on separate streams, from their solo times: they
/// overlap as far as their shares of the GPU allow. max(longest solo time, sum of time x share).
/// A kernel's share is its SM share (gpuShare), or with `bandwidthShares` (each kernel's memory
/// time over its solo time) the larger of that and its share of the memory bandwidth: kernels
/// that together stream more bytes than the GPU moves do not overlap, however few SMs they hold.
/// With `launchSeconds` (the part of each solo time that is the graph's launch gap), those parts
/// add up instead: the GPU's front end issues one kernel at a time, whatever the streams.
double concurrentSeconds(const Target& t, const std::vector<LaunchShape>& ks,
                         const std::vector<double>& soloSeconds,
                         const std::vector<double>& bandwidthShares = {},
                         const std::vector<double>& launchSeconds = {});

/// The GEMM tile edge the libraries use for a dimension of `v`: 128, or the next power of two
/// down to 32 for small dimensions.
int64_t gemmTile(int64_t v);

/// The launch shape a plan step's kernel typically has (implicit-GEMM tiles for convolutions and
/// matrix products, grid-stride elementwise and reduction kernels otherwise). An implicit GEMM
/// with too few output tiles to fill the GPU splits its reduction across blocks (split-K), at
/// most until one wave is full, in chunks of at least 256: cuDNN's weight-gradient kernels on the
/// H200 split that far (CUPTI shows their splitKreduce kernels), and a cap of 16 left a 1x1
/// weight gradient of ResNet-50 at a tenth of a wave, predicted 2-3x slower than measured.
LaunchShape estimateLaunch(const Target& t, const Plan& plan, const PlanStep& step);

} // namespace hgp
