// StridedWalk.h - 32-bit strided indexing for the data-movement kernels (ShapeOps.cu): Slice,
// Transpose and Expand gather dst[i] = src[base + offset(i)], SliceBwd scatters the other way.
//
// Why: the general kernels find each element's source with one 64-bit division per dim, for
// elements of two bytes. On the H200 (2026-12-03, bf16, b128) ShuffleNet-v2's Transposes took
// 1.68 ms in 34 launches for about 0.84 GB of channel-shuffle reads and writes: 0.5 TB/s, a
// ninth of the HBM bandwidth. The index math, not the memory, sets that pace.
// Here a thread takes V consecutive elements, finds the first one's coordinates once with
// multiply-high divisions by precomputed constants (FastDiv.h), and steps to the next ones with an
// odometer: add the innermost stride, and carry into the next dim when a coordinate reaches its
// size. All dims are right-aligned in kWalkDims slots (unused outer slots have size 1, stride
// 0), so that every index is a constant and the coordinates stay in registers.
//
// Only for tensors whose element count and every offset fit in 31 bits (fitsStrided32); the
// 64-bit kernels take the rest. Host and device share the code, so that the CPU unit tests
// (tests/unit/StridedWalkTest.cpp) hold it to the row-major decomposition on shapes the GPU runs.
#pragma once

#include "runtime/cuda/FastDiv.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hgp::cuda {

/// Slots of a StridedDims: as many dims as the general kernels take (CudaKernel.h's kMaxDims).
constexpr int kWalkDims = 8;

/// A shape and strides (in elements), right-aligned in kWalkDims slots. A stride is kept as
/// its 32-bit two's complement: offsets are added modulo 2^32, where a step past a dim's end
/// (before its carry) may leave 31 bits, and every offset that is read lies inside them.
struct StridedDims {
  FastDiv size[kWalkDims];
  uint32_t stride[kWalkDims] = {};
  uint32_t base = 0; ///< The offset of element 0.
};

/// Whether n elements over `shape` and `strides` from `base` stay within 31 bits (every
/// reachable offset, and n itself), so that the 32-bit walk may take them; fills `d`.
inline bool fitsStrided32(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                          int64_t base, StridedDims& d) {
  if (shape.size() > size_t(kWalkDims) || strides.size() != shape.size()) return false;
  const int64_t limit = int64_t(1) << 31;
  int64_t n = 1, lo = base, hi = base;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] < 1 || shape[k] >= limit) return false;
    n *= shape[k];
    if (n >= limit) return false;
    int64_t reach = (shape[k] - 1) * strides[k];
    (reach < 0 ? lo : hi) += reach;
    if (strides[k] <= -limit || strides[k] >= limit) return false;
  }
  if (lo < 0 || hi >= limit) return false;
  d = StridedDims();
  d.base = uint32_t(base);
  size_t pad = size_t(kWalkDims) - shape.size();
  for (size_t k = 0; k < shape.size(); ++k) {
    d.size[pad + k] = FastDiv(uint32_t(shape[k]));
    d.stride[pad + k] = uint32_t(strides[k]);
  }
  return true;
}

/// The position of a walk over row-major elements: each dim's coordinate and the offset.
struct StridedWalk {
  uint32_t c[kWalkDims];
  uint32_t off; ///< Modulo 2^32; below 2^31 at every element.

  /// Puts the walk at element i.
  HGP_INDEX_FN void start(const StridedDims& d, uint32_t i) {
    off = d.base;
    HGP_INDEX_UNROLL
    for (int k = kWalkDims - 1; k >= 0; --k) {
      uint32_t q = d.size[k].div(i);
      c[k] = i - q * d.size[k].d;
      off += c[k] * d.stride[k];
      i = q;
    }
  }
  /// Moves to the next element. Past the last one the outermost coordinate reaches its size,
  /// and the offset is not to be read.
  HGP_INDEX_FN void next(const StridedDims& d) {
    ++c[kWalkDims - 1];
    off += d.stride[kWalkDims - 1];
    HGP_INDEX_UNROLL
    for (int k = kWalkDims - 1; k > 0; --k) {
      if (c[k] == d.size[k].d) {
        c[k] = 0;
        off -= d.size[k].d * d.stride[k];
        ++c[k - 1];
        off += d.stride[k - 1];
      }
    }
  }
};

} // namespace hgp::cuda
