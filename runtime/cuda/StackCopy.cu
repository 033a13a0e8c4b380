// StackCopy.cu - Concat's and Split's copy: one vectorized launch per 32 parts (StackCopy.h).
#include "runtime/cuda/StackCopy.h"

#include "runtime/cuda/DeviceUtil.cuh"

#include <algorithm>

namespace hgp::cuda {

namespace {

constexpr int kMaxStackParts = 32;

/// One launch's parts. Lengths and offsets count accesses of the launch's width.
struct StackParts {
  char* whole;
  int64_t wholeRow;                 ///< Accesses per row of the whole.
  char* part[kMaxStackParts];
  int64_t partRow[kMaxStackParts];  ///< Accesses per row of the part.
  int64_t column[kMaxStackParts];   ///< The part's first access within a row of the whole.
  int64_t size[kMaxStackParts];     ///< The part's accesses: rows * partRow.
};

template <typename V, typename Idx, bool ToWhole>
__global__ void stackKernel(StackParts s) {
  int p = blockIdx.y;
  V* part = reinterpret_cast<V*>(s.part[p]);
  V* whole = reinterpret_cast<V*>(s.whole);
  Idx row = Idx(s.partRow[p]), wholeRow = Idx(s.wholeRow), column = Idx(s.column[p]);
  Idx n = Idx(s.size[p]);
  for (Idx i = Idx(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += Idx(gridDim.x) * blockDim.x) {
    Idx r = i / row;
    Idx w = r * wholeRow + column + (i - r * row);
    if constexpr (ToWhole) whole[w] = part[i];
    else part[i] = whole[w];
  }
}

template <typename V, typename Idx>
Status launchStack(CudaArgs& a, const StackParts& s, int count, int64_t largest, bool toWhole) {
  // Enough blocks for the largest part, at most about 8 waves of the device over all parts.
  int64_t cap = std::max<int64_t>(1, int64_t(smCount(a)) * 8 / count);
  int64_t want = (largest + kBlock - 1) / kBlock;
  dim3 grid(unsigned(std::clamp<int64_t>(want, 1, cap)), unsigned(count));
  if (toWhole) stackKernel<V, Idx, true><<<grid, kBlock, 0, a.stream>>>(s);
  else stackKernel<V, Idx, false><<<grid, kBlock, 0, a.stream>>>(s);
  return checkLaunch(a, "stackKernel");
}

template <typename V>
Status launchWidth(CudaArgs& a, const StackParts& s, int count, int64_t largest, int64_t total,
                   bool toWhole) {
  if (total < (int64_t(1) << 31)) return launchStack<V, uint32_t>(a, s, count, largest, toWhole);
  return launchStack<V, int64_t>(a, s, count, largest, toWhole);
}

} // namespace

Status stackCopy(CudaArgs& a, const std::vector<DeviceTensor>& parts, const DeviceTensor& whole,
                 int64_t axis, bool toWhole) {
  int64_t es = dtypeSize(whole.dtype), outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= whole.dim(d);
  for (int64_t d = axis + 1; d < whole.rank(); ++d) inner *= whole.dim(d);
  int64_t wholeRow = whole.dim(axis) * inner * es;
  // The widest access every row length, column offset and pointer is a multiple of.
  int64_t width = 16;
  auto fit = [&](int64_t bytes) {
    while (width > 1 && bytes % width) width /= 2;
  };
  fit(wholeRow);
  fit(int64_t(reinterpret_cast<uintptr_t>(whole.data) % 16));
  int64_t column = 0;
  for (const DeviceTensor& p : parts) {
    fit(p.dim(axis) * inner * es);
    fit(column);
    fit(int64_t(reinterpret_cast<uintptr_t>(p.data) % 16));
    column += p.dim(axis) * inner * es;
  }
  column = 0;
  for (size_t first = 0; first < parts.size(); first += kMaxStackParts) {
    StackParts s{};
    s.whole = static_cast<char*>(whole.data);
    s.wholeRow = wholeRow / width;
    int count = int(std::min(parts.size() - first, size_t(kMaxStackParts)));
    int64_t largest = 0;
    for (int k = 0; k < count; ++k) {
      const DeviceTensor& p = parts[first + size_t(k)];
      int64_t rowBytes = p.dim(axis) * inner * es;
      s.part[k] = static_cast<char*>(p.data);
      s.partRow[k] = rowBytes / width;
      s.column[k] = column / width;
      s.size[k] = outer * s.partRow[k];
      largest = std::max(largest, s.size[k]);
      column += rowBytes;
    }
    int64_t total = outer * s.wholeRow;
    Status st = width == 16  ? launchWidth<uint4>(a, s, count, largest, total, toWhole)
                : width == 8 ? launchWidth<uint2>(a, s, count, largest, total, toWhole)
                : width == 4 ? launchWidth<uint32_t>(a, s, count, largest, total, toWhole)
                : width == 2 ? launchWidth<uint16_t>(a, s, count, largest, total, toWhole)
                             : launchWidth<uint8_t>(a, s, count, largest, total, toWhole);
    HGP_TRY(st);
  }
  return Status::ok();
}

} // namespace hgp::cuda
