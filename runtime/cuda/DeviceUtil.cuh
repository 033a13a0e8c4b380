// DeviceUtil.cuh - what the CUDA op families share (internal to runtime/cuda).
//
// Operand checks: the compiler's shape rules already hold, so a failed check is a bug or a
// corrupted plan, and the executor returns ErrorCode::Internal instead of launching a kernel that
// reads out of bounds. Launch sizing: grid-stride loops capped at a few waves of the device.
// Deterministic reductions: a block sums in a fixed tree (warp shuffles, then one warp over the
// warps), so a result depends only on the launch shape, never on timing; no float atomics
// anywhere. Tables: executors that need device-side tables (pointer lists, index maps) build
// them once, in their first (eager) call, in a DeviceBuffer kept in the step's state.
// Element types: kernels that mixed precision reaches are templated on the stored type T (float,
// __nv_bfloat16 or __half); they load with toFloat, compute in float and store with fromFloat<T>,
// which rounds to nearest even as the CPU reference does (runtime/plan/Half.h).
#pragma once

#include "runtime/cuda/CudaKernel.h"
#include "runtime/cuda/FastDiv.h"
#include "runtime/plan/Layout.h"
#include "runtime/plan/ShapeAttrs.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hgp::cuda {

// ---- Operand checks (host) -----------------------------------------------------------------

inline Status checkArity(const CudaArgs& a, size_t minIn, size_t maxIn, size_t minOut,
                         size_t maxOut) {
  if (a.in.size() < minIn || a.in.size() > maxIn || a.out.size() < minOut || a.out.size() > maxOut)
    return a.fail("got " + std::to_string(a.in.size()) + " inputs and " +
                  std::to_string(a.out.size()) + " outputs");
  for (const auto& v : a.in)
    if (!v.shape || !v.data) return a.fail("an input has no shape or no data");
  for (const auto& v : a.out)
    if (!v.shape || !v.data) return a.fail("an output has no shape or no data");
  return Status::ok();
}

inline Status checkF32(const CudaArgs& a, const DeviceTensor& v, const char* what) {
  if (v.dtype != DType::F32)
    return a.fail(std::string(what) + " must be f32, got " + dtypeName(v.dtype));
  return Status::ok();
}

/// Fails unless `v` is f32, bf16 or f16.
inline Status checkFloat(const CudaArgs& a, const DeviceTensor& v, const char* what) {
  if (v.dtype != DType::F32 && v.dtype != DType::BF16 && v.dtype != DType::F16)
    return a.fail(std::string(what) + " must be f32, bf16 or f16, got " + dtypeName(v.dtype));
  return Status::ok();
}

/// Fails unless `v` has the dtype `t` (the step's element type).
inline Status checkDType(const CudaArgs& a, const DeviceTensor& v, DType t, const char* what) {
  if (v.dtype != t)
    return a.fail(std::string(what) + " is " + dtypeName(v.dtype) + ", expected " + dtypeName(t));
  return Status::ok();
}

inline Status checkShape(const CudaArgs& a, const DeviceTensor& v, const Shape& want,
                         const char* what) {
  if (*v.shape != want)
    return a.fail(std::string(what) + " has shape " + shapeToString(*v.shape) + ", expected " +
                  shapeToString(want));
  return Status::ok();
}

inline Status checkScalar(const CudaArgs& a, const DeviceTensor& v, DType t, const char* what) {
  if (v.dtype != t || v.numel() != 1)
    return a.fail(std::string(what) + " must be a " + dtypeName(t) + " scalar, got " +
                  dtypeName(v.dtype) + shapeToString(*v.shape));
  return Status::ok();
}

/// `s` with the step named in front, as fail() names it, for the errors of the readers in
/// runtime/plan (ShapeAttrs.h, PoolWindow.h), which know no step.
inline Status inStep(const CudaArgs& a, const Status& s) {
  return s ? s : a.fail(s.message());
}

/// Reads an integer list attribute that must have exactly `n` entries.
inline Status readInts(const CudaArgs& a, const char* name, size_t n, std::vector<int64_t>& out) {
  return inStep(a, readIntList(a.attrs(), name, n, out));
}

// ---- Launch sizing -------------------------------------------------------------------------

/// Blocks of `threads` for a grid-stride loop over `work` items: one item per thread, at most
/// `wavesCap` blocks per multiprocessor.
inline unsigned blocksFor(const CudaArgs& a, int64_t work, int threads = kBlock,
                          int wavesCap = 16) {
  int64_t b = (work + threads - 1) / threads;
  int64_t cap =
      int64_t(a.ctx.props.multiProcessorCount > 0 ? a.ctx.props.multiProcessorCount : 132) *
      wavesCap;
  return unsigned(b < 1 ? 1 : b > cap ? cap : b);
}

inline int smCount(const CudaArgs& a) {
  return a.ctx.props.multiProcessorCount > 0 ? a.ctx.props.multiProcessorCount : 132;
}

/// Whether every pointer is 16-byte aligned (float4 access).
inline bool aligned16(std::initializer_list<const void*> ps) {
  for (const void* p : ps)
    if (reinterpret_cast<uintptr_t>(p) & 15) return false;
  return true;
}

/// Enqueues a device-to-device copy of a whole tensor unless source and destination coincide.
inline Status copyTensor(const CudaArgs& a, const DeviceTensor& dst, const DeviceTensor& src) {
  if (dst.data == src.data) return Status::ok();
  HGP_CUDA_TRY(cudaMemcpyAsync(dst.data, src.data, size_t(src.numel() * dtypeSize(src.dtype)),
                               cudaMemcpyDeviceToDevice, a.stream));
  return Status::ok();
}

// ---- Shapes (host) -------------------------------------------------------------------------

// Row-major strides, broadcast strides and coalesceDims are runtime/plan/ShapeAttrs.h's.

/// Packs a shape and one stride list into Dims (fails beyond kMaxDims).
inline Status toDims(const CudaArgs& a, const Shape& shape, const std::vector<int64_t>& strides,
                     Dims& d) {
  if (shape.size() > size_t(kMaxDims))
    return a.fail("more than " + std::to_string(kMaxDims) + " dims after merging");
  d = Dims();
  d.rank = int(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    d.size[i] = shape[i];
    d.stride[i] = strides[i];
  }
  return Status::ok();
}

// ---- Element types -------------------------------------------------------------------------

/// Calls fn(T{}) with T the element type stored for `t`: float, __nv_bfloat16 or __half.
template <typename Fn> Status dispatchFloat(const CudaArgs& a, DType t, Fn&& fn) {
  switch (t) {
  case DType::F32: return fn(float{});
  case DType::BF16: return fn(__nv_bfloat16{});
  case DType::F16: return fn(__half{});
  default: return a.fail(std::string("no kernel for element type ") + dtypeName(t));
  }
}

__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float toFloat(__half v) { return __half2float(v); }

/// `v` in T, rounded to nearest even.
template <typename T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ __half fromFloat<__half>(float v) {
  return __float2half_rn(v);
}

/// The elements of one 16-byte load or store (eight of a 16-bit type): the vector path of the
/// 16-bit kernels.
template <typename T> struct Pack16B {
  static constexpr int kN = int(16 / sizeof(T));
  union {
    uint4 raw;
    T e[kN];
  };
  __device__ Pack16B() {}
};

// ---- Vector access -------------------------------------------------------------------------

/// Elements of one 16-byte access: 4 f32 or 8 bf16/f16.
template <typename T> constexpr int kVec = int(16 / sizeof(T));

/// The raw type of an access of `Bytes` bytes.
template <int Bytes> struct RawOf;
template <> struct RawOf<16> { using type = uint4; };
template <> struct RawOf<8> { using type = uint2; };
template <> struct RawOf<4> { using type = uint32_t; };
template <> struct RawOf<2> { using type = uint16_t; };
template <> struct RawOf<1> { using type = uint8_t; };

/// N elements of T loaded or stored as one access.
template <typename T, int N> struct PackN {
  union {
    typename RawOf<int(N * sizeof(T))>::type raw;
    T e[N];
  };
  __device__ PackN() {}
};

template <int N, typename T> __device__ __forceinline__ PackN<T, N> loadPack(const T* p) {
  PackN<T, N> pk;
  pk.raw = *reinterpret_cast<const decltype(pk.raw)*>(p);
  return pk;
}

template <int N, typename T> __device__ __forceinline__ void loadVec(const T* p, float (&v)[N]) {
  PackN<T, N> pk = loadPack<N>(p);
#pragma unroll
  for (int k = 0; k < N; ++k) v[k] = toFloat(pk.e[k]);
}

template <int N, typename T> __device__ __forceinline__ void storeVec(T* p, const float (&v)[N]) {
  PackN<T, N> pk;
#pragma unroll
  for (int k = 0; k < N; ++k) pk.e[k] = fromFloat<T>(v[k]);
  *reinterpret_cast<decltype(pk.raw)*>(p) = pk.raw;
}

/// Whether every (possibly null) pointer is aligned to `bytes`.
inline bool alignedTo(size_t bytes, std::initializer_list<const void*> ps) {
  for (const void* p : ps)
    if (reinterpret_cast<uintptr_t>(p) % bytes) return false;
  return true;
}

/// The widest access a pass over contiguous runs of `inner` elements of T can use: 16 bytes when
/// the run is a multiple of 16 bytes' worth of elements, else 8 bytes for 16-bit data when it is
/// a multiple of 4 (ResNet's 14x14 planes in bf16), else one element; the data must be aligned
/// to the access.
template <typename T> int vectorWidth(int64_t inner, std::initializer_list<const void*> ps) {
  if (inner % kVec<T> == 0 && alignedTo(16, ps)) return kVec<T>;
  if (sizeof(T) == 2 && inner % 4 == 0 && alignedTo(8, ps)) return 4;
  return 1;
}

// ---- Device helpers ------------------------------------------------------------------------

#define HGP_GRID_LOOP(i, n)                                                                        \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);                        \
       i += int64_t(gridDim.x) * blockDim.x)

/// The offset of row-major element `i` of d's shape under d's strides.
__device__ __forceinline__ int64_t stridedOffset(const Dims& d, int64_t i) {
  int64_t off = 0;
  for (int k = d.rank - 1; k >= 0; --k) {
    int64_t s = d.size[k];
    int64_t q = i / s;
    off += (i - q * s) * d.stride[k];
    i = q;
  }
  return off;
}

/// Sums `v` over the block in a fixed order; the result is valid in thread 0. `scratch` holds
/// one T per warp. Every thread of the block must call it.
template <typename T> __device__ T blockSum(T v, T* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  int warps = int(blockDim.x + 31) >> 5;
  __syncthreads(); // scratch may still be read from an earlier call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? scratch[lane] : T(0);
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  }
  return v;
}

/// Sums `v` over a warp in a fixed order; the result is valid in lane 0.
template <typename T> __device__ __forceinline__ T warpSum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

// ---- Per-channel reductions ----------------------------------------------------------------
//
// A tensor viewed as [outer, channels, inner] (BatchNorm's [N, C, H*W], or any "sum over every
// dim but one"). Each channel's outer*inner elements are split into `parts` contiguous chunks of
// the channel's own element order; block (p, c) sums chunk p of channel c into NV doubles, and a
// finalize kernel adds the parts of a channel in order p = 0, 1, ...: a deterministic two-stage
// reduction that fills the device even when there are few channels.

struct ChannelShape {
  int64_t outer = 1, channels = 1, inner = 1;
  __host__ __device__ int64_t count() const { return outer * inner; }
};

/// N, C and the product of the spatial dims of an [N, C, *S] shape.
inline ChannelShape channelShapeOf(const Shape& s) {
  ChannelShape c;
  c.outer = s[0];
  c.channels = s[1];
  for (size_t i = 2; i < s.size(); ++i) c.inner *= s[i];
  return c;
}

// FastDiv (FastDiv.h) divides the indices of the per-channel sums below.

struct ChannelSplit {
  int parts = 1;
  uint32_t chunk = 0; ///< Elements per part (a multiple of the access width).
  int width = 1;      ///< Elements per access: 1, 4 or kVec<T> (vectorWidth).
  FastDiv inner;
};

/// Chooses the split for accesses of `width` elements: about two waves of 256-thread blocks in
/// all (16 per SM), at least 4096 elements a part.
inline ChannelSplit planChannelSplit(const CudaArgs& a, const ChannelShape& s, int width) {
  ChannelSplit sp;
  sp.width = width;
  const int64_t V = width;
  int64_t count = s.count();
  int64_t target = int64_t(smCount(a)) * 16;
  int64_t parts = (target + s.channels - 1) / s.channels;
  int64_t maxParts = (count + 4095) / 4096;
  parts = parts < 1 ? 1 : parts > maxParts ? maxParts : parts;
  if (parts < 1) parts = 1;
  int64_t chunk = (count + parts - 1) / parts;
  chunk = (chunk + V - 1) / V * V;
  sp.parts = int((count + chunk - 1) / chunk);
  sp.chunk = uint32_t(chunk);
  sp.inner = FastDiv(uint32_t(s.inner));
  return sp;
}

/// Block (p, c) of the partial-sum kernel sums chunk p of channel c (its elements in channel
/// order, image by image) into NV doubles: partials[(c * parts + p) * NV + k]. F::Channel ch =
/// f.channel(c) adds one element with ch.one(run, offset) and V consecutive ones with
/// ch.vec<V>(run, offset) into NV accumulators of type Run. A thread makes up to Flush such
/// accesses into a fresh run, then adds the run into its double accumulators: BatchNorm sums
/// runs of kFlush vectors in float (NormKernels.cuh), ReduceSum and ReduceMean add every access
/// straight into double (Run = double, Flush = 1). The block then combines its threads in a
/// fixed tree (blockSum).
template <int V, int NV, typename Run, int Flush, typename F>
__global__ void channelPartialsKernel(ChannelShape s, ChannelSplit sp, F f, double* partials) {
  __shared__ double scratch[32];
  int64_t c = blockIdx.y;
  int p = int(blockIdx.x);
  auto ch = f.channel(c);
  double acc[NV];
  for (int k = 0; k < NV; ++k) acc[k] = 0.0;
  uint32_t count = uint32_t(s.count());
  uint32_t begin = uint32_t(p) * sp.chunk;
  uint32_t end = uint32_t(min(int64_t(count), int64_t(p + 1) * sp.chunk));
  int64_t planeStride = s.channels * s.inner, base = c * s.inner;
  uint32_t inner = uint32_t(s.inner), step = V * blockDim.x;
  for (uint32_t e0 = begin + V * threadIdx.x; e0 < end; e0 += Flush * step) {
    Run run[NV];
    for (int k = 0; k < NV; ++k) run[k] = Run(0);
#pragma unroll
    for (int k = 0; k < Flush; ++k) {
      uint32_t e = e0 + k * step;
      if (e >= end) break;
      uint32_t i = sp.inner.div(e), j = e - i * inner;
      int64_t off = base + int64_t(i) * planeStride + j;
      if constexpr (V == 1) ch.one(run, off);
      else ch.template vec<V>(run, off);
    }
    for (int k = 0; k < NV; ++k) acc[k] += double(run[k]);
  }
  for (int k = 0; k < NV; ++k) {
    double v = blockSum(acc[k], scratch);
    if (threadIdx.x == 0) partials[(c * sp.parts + p) * NV + k] = v;
  }
}

/// Launches the partial sums over elements of type T with sp's access width; `partials` holds
/// channels * parts * NV doubles.
template <int NV, typename Run, int Flush, typename T, typename F>
Status launchChannelPartials(const CudaArgs& a, const ChannelShape& s, const ChannelSplit& sp,
                             const F& f, double* partials) {
  if (s.count() >= (int64_t(1) << 31)) return a.fail("more than 2^31 elements per channel");
  if (s.channels > 65535) return a.fail("more than 65535 channels");
  dim3 grid(unsigned(sp.parts), unsigned(s.channels));
  if (sp.width == kVec<T>)
    channelPartialsKernel<kVec<T>, NV, Run, Flush><<<grid, kBlock, 0, a.stream>>>(s, sp, f, partials);
  else if (sp.width == 4)
    channelPartialsKernel<4, NV, Run, Flush><<<grid, kBlock, 0, a.stream>>>(s, sp, f, partials);
  else
    channelPartialsKernel<1, NV, Run, Flush><<<grid, kBlock, 0, a.stream>>>(s, sp, f, partials);
  return checkLaunch(a, "channelPartialsKernel");
}

/// The sum over the parts of channel c, in part order.
template <int NV>
__device__ __forceinline__ void sumParts(const double* partials, int parts, int64_t c,
                                         double (&out)[NV]) {
  for (int k = 0; k < NV; ++k) out[k] = 0.0;
  for (int p = 0; p < parts; ++p)
    for (int k = 0; k < NV; ++k) out[k] += partials[(c * parts + p) * NV + k];
}

// ---- Channels-last operands ----------------------------------------------------------------
//
// An op with layout="nhwc" stores its rank-4 operands and results channels-last, [N, H, W, C]
// (the NCHW shape permuted by (0, 2, 3, 1); runtime/plan/Layout.h); per-channel operands stay
// [C]. A pass over such a tensor sees an [M, C] row-major matrix (M = N * H * W) and runs its
// threads along C, so that neighbouring threads touch neighbouring channels and each thread
// keeps the same channels from row to row (NhwcTiling).

/// Reads the step's layout attribute: nhwc is set for layout="nhwc".
inline Status readLayout(const CudaArgs& a, bool& nhwc) {
  Expected<Layout> l = layoutOf(a.step.op, a.attrs());
  if (!l) return a.fail(l.status().message());
  nhwc = *l == Layout::NHWC;
  return Status::ok();
}

/// The threads of a pass over an [M, C] matrix in vectors of V channels: a block is
/// rowsPerBlock rows of `cols` consecutive channel vectors (thread t takes column t % cols of row
/// t / cols), so that a warp reads contiguous memory; the grid's y dim tiles the C / V vectors of
/// a row, its x dim goes down the rows.
struct NhwcTiling {
  uint32_t rows = 0, channels = 0;
  uint32_t vecs = 1;         ///< Channel vectors per row: C / V.
  uint32_t cols = 1;         ///< Channel vectors per block.
  uint32_t rowsPerBlock = 1; ///< kBlock / cols.
  uint32_t rowHalf = 0;      ///< Half the power of two at or above rowsPerBlock (tree sums).
  uint32_t tiles = 1;        ///< Blocks across a row: ceil(vecs / cols).
  unsigned threads() const { return cols * rowsPerBlock; }
};

/// Rows of up to 64 vectors go whole into a block; wider rows in tiles of 32 to 64 vectors
/// (512 bytes or more per warp), a tile that divides the row when there is one. Needs
/// rows, channels >= 1 and channels % V == 0.
inline NhwcTiling nhwcTiling(int64_t rows, int64_t channels, int V) {
  NhwcTiling t;
  t.rows = uint32_t(rows);
  t.channels = uint32_t(channels);
  t.vecs = uint32_t(channels / V);
  t.cols = t.vecs;
  if (t.vecs > 64) {
    t.cols = 32;
    for (uint32_t d = 64; d > 32; --d)
      if (t.vecs % d == 0) {
        t.cols = d;
        break;
      }
  }
  t.rowsPerBlock = uint32_t(kBlock) / t.cols;
  uint32_t p = 1;
  while (p < t.rowsPerBlock) p <<= 1;
  t.rowHalf = p / 2;
  t.tiles = (t.vecs + t.cols - 1) / t.cols;
  return t;
}

/// Blocks of `threads` threads of `kernel` that one multiprocessor holds at once (at least 1).
template <typename K> Status residentBlocks(K kernel, int threads, int& n) {
  n = 0;
  HGP_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, 0));
  if (n < 1) n = 1;
  return Status::ok();
}

// ---- Device tables -------------------------------------------------------------------------

/// Device memory owned by a step's state: allocated and filled on the executor's first (eager)
/// call, freed with the state.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
  /// Copies `n` bytes from the host into a fresh allocation. Only outside capture.
  Status upload(const CudaArgs& a, const void* host, size_t n) {
    if (a.ctx.capturing) return a.fail("a device table was first built during graph capture");
    if (ptr) HGP_CUDA_TRY(cudaFree(ptr));
    ptr = nullptr;
    bytes = 0;
    HGP_CUDA_TRY(cudaMalloc(&ptr, n < 16 ? 16 : n));
    // Ordered on the step's stream; the wait keeps `host` alive until the copy is done.
    HGP_CUDA_TRY(cudaMemcpyAsync(ptr, host, n, cudaMemcpyHostToDevice, a.stream));
    HGP_CUDA_TRY(cudaStreamSynchronize(a.stream));
    bytes = n;
    return Status::ok();
  }
  /// Makes the buffer at least `n` bytes (contents undefined). Only outside capture.
  Status reserve(const CudaArgs& a, size_t n) {
    if (n <= bytes && ptr) return Status::ok();
    if (a.ctx.capturing) return a.fail("scratch memory was first needed during graph capture");
    if (ptr) HGP_CUDA_TRY(cudaStreamSynchronize(a.stream));
    if (ptr) HGP_CUDA_TRY(cudaFree(ptr));
    ptr = nullptr;
    bytes = 0;
    HGP_CUDA_TRY(cudaMalloc(&ptr, n < 16 ? 16 : n));
    bytes = n;
    return Status::ok();
  }
  template <typename T> T* as() const { return static_cast<T*>(ptr); }
};

/// Scratch memory owned by one step, allocated on its eager first call. Steps keep their own
/// (small) scratch rather than the shared workspace because a graph captured earlier keeps the
/// workspace's address, and the workspace moves when a later program's first run grows it.
struct ScratchState : StepState {
  DeviceBuffer scratch;
};

template <typename T> Status stepScratch(CudaArgs& a, size_t bytes, T*& p) {
  ScratchState& s = a.stateAs<ScratchState>();
  HGP_TRY(s.scratch.reserve(a, bytes));
  p = s.scratch.as<T>();
  return Status::ok();
}

} // namespace hgp::cuda
