// StackCopy.h - the copy behind Concat and Split on CUDA (internal to runtime/cuda).
//
// Parts stacked along an axis of a row-major tensor are, for each index of the dims before the
// axis (the "outer" rows), one run of bytes of the whole. A channel concatenation of a batch in
// NCHW has N rows per part; in NHWC, N*H*W rows of a few channels each, 64 bytes for 32 bf16
// channels. One cudaMemcpy2DAsync per part moves such narrow rows far below the memory's
// bandwidth (DenseNet-121's Concat and Split took 8.9 ms each per step on an H200, issue 19).
// This copy is one kernel launch for up to 32 parts: blockIdx.y picks the part, a grid-stride
// loop walks its elements in the widest access (16, 8, 4, 2 or 1 bytes) that every row length,
// column offset and pointer allows, so that both the part and the whole are read and written in
// coalesced, vectorized accesses. It moves bytes only, so it serves every dtype, and the result is
// the same bytes as any other copy's.
#pragma once

#include "runtime/cuda/CudaKernel.h"

#include <vector>

namespace hgp::cuda {

/// Copies each part's rows into its columns of `whole` (`toWhole`, Concat) or out of them
/// (Split). The parts must stack along `axis` to `whole` (the caller checks) and share its dtype.
Status stackCopy(CudaArgs& a, const std::vector<DeviceTensor>& parts, const DeviceTensor& whole,
                 int64_t axis, bool toWhole);

} // namespace hgp::cuda
