// CUDA executors for ReduceMean, ReduceSum and ReduceMax over sorted axes (ReduceOps.cpp on the
// CPU). ReduceMax runs a thread per output, NaN winning as on the CPU.
//
// Sums accumulate in double. When the kept dims are one contiguous run, X is [outer, kept,
// inner] and each output is a "channel": the convolution-bias gradient (every dim but 1) and
// full reductions take the split two-stage channel reduction (DeviceUtil.cuh) when each output
// sums many elements, and reductions over the leading dims (the Gemm-bias gradient) sum columns,
// split into parts of rows first when there are many (the bias gradient of a channels-last
// convolution, docs/layout.md). A reduction over a middle run of dims ([outer, rows, cols] over
// rows: squeeze-excitation's gate gradient in channels-last) sums the columns of each outer
// matrix the same way, all at once.
// Everything else runs a thread per output that walks its reduced elements in row-major order,
// the order in which the CPU adds them. No atomics: results are deterministic. bf16/f16 inputs
// (mixed precision) are read as float and the result rounded once on store.
#include "runtime/cuda/DeviceUtil.cuh"

#include <type_traits>

namespace hgp::cuda {

namespace {

/// The per-channel sum of channelPartialsKernel (DeviceUtil.cuh): each access goes straight into
/// the double accumulator (Run = double, Flush = 1), four elements as (x0 + x1) + (x2 + x3).
template <typename T> struct SumOne {
  const T* x;
  struct Channel {
    const T* x;
    __device__ void one(double (&acc)[1], int64_t off) const { acc[0] += toFloat(x[off]); }
    template <int N> __device__ void vec(double (&acc)[1], int64_t off) const {
      static_assert(N % 4 == 0, "the accesses are groups of four elements");
      for (int q = 0; q < N; q += 4) {
        if constexpr (std::is_same_v<T, float>) {
          float4 v = *reinterpret_cast<const float4*>(x + off + q);
          acc[0] += (double(v.x) + double(v.y)) + (double(v.z) + double(v.w));
        } else {
          const T* p = x + off + q;
          acc[0] += (double(toFloat(p[0])) + double(toFloat(p[1]))) +
                    (double(toFloat(p[2])) + double(toFloat(p[3])));
        }
      }
    }
  };
  __device__ Channel channel(int64_t) const { return {x}; }
};

template <typename T>
__global__ void channelFinalizeKernel(int64_t channels, int parts, const double* partials,
                                      double divisor, T* y) {
  HGP_GRID_LOOP(c, channels) {
    double s[1];
    sumParts<1>(partials, parts, c, s);
    y[c] = fromFloat<T>(float(divisor != 1.0 ? s[0] / divisor : s[0]));
  }
}

/// Sums the rows of a row-major [rows, cols] matrix (the Gemm-bias gradient: every dim but the
/// last ones): a block of 32 x 8 threads per 32 columns; thread row t adds rows t, t + 8, ... in
/// order, then the block adds its 8 partials in order. Deterministic, and coalesced along rows.
template <typename T>
__global__ void columnSumKernel(const T* x, T* y, int64_t rows, int64_t cols, double divisor) {
  __shared__ double part[8][33];
  int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  double acc = 0;
  if (c < cols)
    for (int64_t r = threadIdx.y; r < rows; r += 8) acc += toFloat(x[r * cols + c]);
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    double sum = 0;
    for (int i = 0; i < 8; ++i) sum += part[i][threadIdx.x];
    y[c] = fromFloat<T>(float(divisor != 1.0 ? sum / divisor : sum));
  }
}

/// The first stage of a column sum over many rows (the bias gradient of a channels-last
/// convolution, [N * H * W, C]): block (p, t, o) sums rows [p * chunk, (p + 1) * chunk) of
/// columns 32t .. 32t + 31 of matrix o (X is [outer, rows, cols]; outer is 1 but for the
/// middle-axis case) as columnSumKernel sums all of them, into partials[(o * parts + p) * cols + c].
template <typename T>
__global__ void columnPartialsKernel(const T* x, double* partials, int64_t rows, int64_t cols,
                                     int64_t chunk) {
  __shared__ double part[8][33];
  x += int64_t(blockIdx.z) * rows * cols;
  partials += int64_t(blockIdx.z) * gridDim.x * cols;
  int64_t c = int64_t(blockIdx.y) * 32 + threadIdx.x;
  int64_t begin = int64_t(blockIdx.x) * chunk, end = min(rows, begin + chunk);
  double acc = 0;
  if (c < cols)
    for (int64_t r = begin + threadIdx.y; r < end; r += 8) acc += toFloat(x[r * cols + c]);
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    double sum = 0;
    for (int i = 0; i < 8; ++i) sum += part[i][threadIdx.x];
    partials[int64_t(blockIdx.x) * cols + c] = sum;
  }
}

/// The second stage: each column's parts added in order (output j = o * cols + c).
template <typename T>
__global__ void columnFinalizeKernel(const double* partials, int parts, int64_t cols,
                                     int64_t outputs, double divisor, T* y) {
  HGP_GRID_LOOP(j, outputs) {
    int64_t o = j / cols, c = j - o * cols;
    const double* p0 = partials + o * parts * cols + c;
    double sum = 0;
    for (int p = 0; p < parts; ++p) sum += p0[int64_t(p) * cols];
    y[j] = fromFloat<T>(float(divisor != 1.0 ? sum / divisor : sum));
  }
}

/// X as [outer, rows, cols] summed over rows, `outer` matrices at once: the column sums split
/// into parts of rows, about four blocks per SM in all.
template <typename T>
Status launchColumnSums(CudaArgs& a, const T* xp, T* yp, int64_t outer, int64_t rows,
                        int64_t cols, double divisor) {
  int64_t tiles = (cols + 31) / 32;
  int64_t parts = std::max<int64_t>(1, std::min<int64_t>(rows / 256, 4 * smCount(a) / (tiles * outer)));
  parts = std::min<int64_t>(parts, 65535);
  int64_t chunk = (rows + parts - 1) / parts;
  parts = (rows + chunk - 1) / chunk;
  double* partials;
  HGP_TRY(stepScratch(a, size_t(outer * cols * parts) * sizeof(double), partials));
  columnPartialsKernel<<<dim3(unsigned(parts), unsigned(tiles), unsigned(outer)), dim3(32, 8), 0,
                         a.stream>>>(xp, partials, rows, cols, chunk);
  HGP_TRY(checkLaunch(a, "columnPartialsKernel"));
  columnFinalizeKernel<<<blocksFor(a, outer * cols), kBlock, 0, a.stream>>>(
      partials, int(parts), cols, outer * cols, divisor, yp);
  return checkLaunch(a, "columnFinalizeKernel");
}

/// The dims of X (size 1 left out) as [outer kept, reduced, inner kept] runs, when they are
/// exactly that: squeeze-excitation's gate gradient in channels-last, [N, H, W, C] over H and W.
bool middleRun(const Shape& x, const std::vector<bool>& reduced, int64_t& outer, int64_t& rows,
               int64_t& cols) {
  int64_t size[3] = {1, 1, 1};
  int group = -1;
  bool prev = false;
  for (size_t d = 0; d < x.size(); ++d) {
    if (x[d] == 1) continue;
    if (group < 0 || reduced[d] != prev) ++group, prev = reduced[d];
    if (group > 2 || reduced[d] != (group == 1)) return false;
    size[group] *= x[d];
  }
  outer = size[0], rows = size[1], cols = size[2];
  return group == 2;
}

/// A thread per output: `kept` maps the output index to X's offset, `reduced` the reduced index.
template <typename T>
__global__ void reduceGeneralKernel(const T* x, T* y, Dims kept, Dims reduced, int64_t outputs,
                                    int64_t count, double divisor) {
  HGP_GRID_LOOP(j, outputs) {
    const T* xp = x + stridedOffset(kept, j);
    int64_t idx[kMaxDims] = {};
    int64_t off = 0;
    double acc = 0;
    int last = reduced.rank - 1;
    for (int64_t r = 0; r < count; ++r) {
      acc += toFloat(xp[off]);
      // Odometer over the reduced dims, last fastest.
      for (int d = last; d >= 0; --d) {
        if (++idx[d] < reduced.size[d]) {
          off += reduced.stride[d];
          break;
        }
        off -= reduced.stride[d] * (reduced.size[d] - 1);
        idx[d] = 0;
      }
    }
    y[j] = fromFloat<T>(float(divisor != 1.0 ? acc / divisor : acc));
  }
}

/// ReduceMax: a thread per output, walking its reduced elements as reduceGeneralKernel does.
template <typename T>
__global__ void reduceMaxKernel(const T* x, T* y, Dims kept, Dims reduced, int64_t outputs,
                                int64_t count) {
  HGP_GRID_LOOP(j, outputs) {
    const T* xp = x + stridedOffset(kept, j);
    int64_t idx[kMaxDims] = {};
    int64_t off = 0;
    float m = -INFINITY;
    int last = reduced.rank - 1;
    for (int64_t r = 0; r < count; ++r) {
      float v = toFloat(xp[off]);
      if (m == m && (v != v || v > m)) m = v;
      for (int d = last; d >= 0; --d) {
        if (++idx[d] < reduced.size[d]) {
          off += reduced.stride[d];
          break;
        }
        off -= reduced.stride[d] * (reduced.size[d] - 1);
        idx[d] = 0;
      }
    }
    y[j] = fromFloat<T>(m);
  }
}

template <typename T> Status reduceMax(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkDType(a, a.out[0], a.in[0].dtype, "Y"));
  const Shape& x = *a.in[0].shape;
  Expected<ReduceAxes> ax = readReduceAxes(a.attrs(), x);
  if (!ax) return inStep(a, ax.status());
  HGP_TRY(checkShape(a, a.out[0], ax->result, "Y"));
  if (ax->none) return copyTensor(a, a.out[0], a.in[0]);
  int64_t outputs = a.out[0].numel(), count = a.in[0].numel() / outputs;
  std::vector<int64_t> xs = stridesOf(x);
  Shape keptShape, redShape;
  std::vector<int64_t> keptStrides, redStrides;
  for (size_t d = 0; d < x.size(); ++d) {
    if (x[d] == 1) continue;
    (ax->reduced[d] ? redShape : keptShape).push_back(x[d]);
    (ax->reduced[d] ? redStrides : keptStrides).push_back(xs[d]);
  }
  if (keptShape.empty()) keptShape.push_back(1), keptStrides.push_back(0);
  if (redShape.empty()) redShape.push_back(1), redStrides.push_back(0);
  coalesceDims(keptShape, {&keptStrides});
  coalesceDims(redShape, {&redStrides});
  Dims kept, red;
  HGP_TRY(toDims(a, keptShape, keptStrides, kept));
  HGP_TRY(toDims(a, redShape, redStrides, red));
  reduceMaxKernel<<<blocksFor(a, outputs), kBlock, 0, a.stream>>>(
      a.in[0].as<T>(), a.out[0].as<T>(), kept, red, outputs, count);
  return checkLaunch(a, "reduceMaxKernel");
}

template <typename T> Status reduce(CudaArgs& a, bool mean) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkDType(a, a.out[0], a.in[0].dtype, "Y"));
  const Shape& x = *a.in[0].shape;
  Expected<ReduceAxes> ax = readReduceAxes(a.attrs(), x);
  if (!ax) return inStep(a, ax.status());
  const std::vector<bool>& reduced = ax->reduced;
  HGP_TRY(checkShape(a, a.out[0], ax->result, "Y"));
  if (ax->none) return copyTensor(a, a.out[0], a.in[0]);

  int64_t outputs = a.out[0].numel(), count = a.in[0].numel() / outputs;
  double divisor = mean ? double(count) : 1.0;
  // Split X's dims (size-1 dims dropped) into kept and reduced lists.
  std::vector<int64_t> xs = stridesOf(x);
  Shape keptShape, redShape;
  std::vector<int64_t> keptStrides, redStrides;
  int firstKept = -1, lastKept = -1;
  bool keptContiguous = true;
  for (size_t d = 0; d < x.size(); ++d) {
    if (x[d] == 1) continue;
    if (reduced[d]) {
      redShape.push_back(x[d]);
      redStrides.push_back(xs[d]);
    } else {
      if (firstKept >= 0 && lastKept != int(d) - 1) {
        // A reduced dim of size > 1 lies between two kept ones.
        for (int k = lastKept + 1; k < int(d); ++k) keptContiguous &= x[size_t(k)] == 1;
      }
      if (firstKept < 0) firstKept = int(d);
      lastKept = int(d);
      keptShape.push_back(x[d]);
      keptStrides.push_back(xs[d]);
    }
  }
  const T* xp = a.in[0].as<T>();
  T* yp = a.out[0].as<T>();
  if (keptContiguous) {
    ChannelShape s;
    s.channels = outputs;
    s.inner = firstKept < 0 ? 1 : xs[size_t(lastKept)];
    s.outer = count / s.inner;
    if (firstKept < 0) s.inner = count, s.outer = 1;
    if (count >= 2048 && (s.inner >= 32 || outputs == 1) && outputs <= 65535) {
      // Four elements an access when the rows allow it (never kVec<T> of 16-bit T).
      int width = aligned16({xp}) && s.inner % 4 == 0 ? 4 : 1;
      ChannelSplit sp = planChannelSplit(a, s, width);
      double* partials;
      HGP_TRY(stepScratch(a, size_t(outputs * sp.parts) * sizeof(double), partials));
      HGP_TRY((launchChannelPartials<1, double, 1, T>(a, s, sp, SumOne<T>{xp}, partials)));
      channelFinalizeKernel<<<blocksFor(a, outputs), kBlock, 0, a.stream>>>(outputs, sp.parts,
                                                                            partials, divisor, yp);
      return checkLaunch(a, "channelFinalizeKernel");
    }
    if (firstKept >= 0 && s.inner == 1 && outputs > 1 && s.outer >= 1024)
      return launchColumnSums(a, xp, yp, 1, s.outer, outputs, divisor); // many rows, in parts
    if (firstKept >= 0 && s.inner == 1 && outputs > 1) {
      columnSumKernel<<<unsigned((outputs + 31) / 32), dim3(32, 8), 0, a.stream>>>(
          xp, yp, s.outer, outputs, divisor);
      return checkLaunch(a, "columnSumKernel");
    }
  }
  int64_t outer = 1, rows = 1, cols = 1;
  if (middleRun(x, reduced, outer, rows, cols) && rows >= 64 && outer <= 65535)
    return launchColumnSums(a, xp, yp, outer, rows, cols, divisor);
  if (keptShape.empty()) keptShape.push_back(1), keptStrides.push_back(0);
  if (redShape.empty()) redShape.push_back(1), redStrides.push_back(0);
  coalesceDims(keptShape, {&keptStrides});
  coalesceDims(redShape, {&redStrides});
  Dims kept, red;
  HGP_TRY(toDims(a, keptShape, keptStrides, kept));
  HGP_TRY(toDims(a, redShape, redStrides, red));
  reduceGeneralKernel<<<blocksFor(a, outputs), kBlock, 0, a.stream>>>(xp, yp, kept, red, outputs,
                                                                      count, divisor);
  return checkLaunch(a, "reduceGeneralKernel");
}

} // namespace

Status execReduceMean(CudaArgs& a) {
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) { return reduce<decltype(t)>(a, /*mean=*/true); });
}
Status execReduceSum(CudaArgs& a) {
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) { return reduce<decltype(t)>(a, /*mean=*/false); });
}

Status execReduceMax(CudaArgs& a) {
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) { return reduceMax<decltype(t)>(a); });
}

} // namespace hgp::cuda
