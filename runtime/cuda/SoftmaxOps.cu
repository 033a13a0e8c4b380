// CUDA executors for Softmax, LogSoftmax and their gradients along one axis (SoftmaxOps.cpp on
// the CPU).
//
// X is [outer, n, inner] with n the softmax axis. When inner is 1 a warp owns each line (lanes
// stride along it, shuffles reduce it); otherwise a thread owns each line and neighbouring
// threads read neighbouring elements. Like the CPU, the forward subtracts the line's maximum and
// does the exponentials and sums in double.
#include "runtime/cuda/DeviceUtil.cuh"

namespace hgp::cuda {

namespace {

struct Lines {
  int64_t outer = 1, n = 1, inner = 1;
};

Status readLines(const CudaArgs& a, size_t operands, Lines& l) {
  HGP_TRY(checkArity(a, operands, operands, 1, 1));
  const Shape& s = *a.in[0].shape;
  for (const auto& v : a.in) {
    HGP_TRY(checkF32(a, v, "operand"));
    HGP_TRY(checkShape(a, v, s, "operand"));
  }
  HGP_TRY(checkF32(a, a.out[0], "result"));
  HGP_TRY(checkShape(a, a.out[0], s, "result"));
  int64_t axis = a.attrs().getInt("axis", -1);
  l = Lines();
  if (s.empty() && axis == 0) return Status::ok(); // a scalar is one line of one element
  if (axis < 0 || axis >= int64_t(s.size())) return a.fail("axis out of range");
  for (int64_t i = 0; i < axis; ++i) l.outer *= s[size_t(i)];
  l.n = s[size_t(axis)];
  for (size_t i = size_t(axis) + 1; i < s.size(); ++i) l.inner *= s[i];
  return Status::ok();
}

enum class Kind : int { Softmax, LogSoftmax, SoftmaxBwd, LogSoftmaxBwd };

__device__ __forceinline__ float maxOf(float m, float v) {
  return m < v ? v : m; // std::max's rule
}

/// One line at (p, stride st), processed by `lanes` threads starting at `lane`; `reduce` combines
/// the lanes' partial results (identity for a single thread).
template <Kind K, typename MaxR, typename SumR>
__device__ void line(const float* a, const float* b, float* out, int64_t n, int64_t st, int lane,
                     int lanes, MaxR maxReduce, SumR sumReduce) {
  if constexpr (K == Kind::Softmax || K == Kind::LogSoftmax) {
    float mx = lane < n ? a[lane * st] : a[0];
    for (int64_t j = lane + lanes; j < n; j += lanes) mx = maxOf(mx, a[j * st]);
    mx = maxReduce(mx);
    double sum = 0;
    for (int64_t j = lane; j < n; j += lanes) sum += exp(double(a[j * st]) - double(mx));
    sum = sumReduce(sum);
    if constexpr (K == Kind::LogSoftmax) {
      double lse = log(sum);
      for (int64_t j = lane; j < n; j += lanes)
        out[j * st] = float(double(a[j * st]) - double(mx) - lse);
    } else {
      for (int64_t j = lane; j < n; j += lanes)
        out[j * st] = float(exp(double(a[j * st]) - double(mx)) / sum);
    }
  } else if constexpr (K == Kind::SoftmaxBwd) {
    // a = dy, b = y: dx = y * (dy - sum(dy * y)).
    double dot = 0;
    for (int64_t j = lane; j < n; j += lanes) dot += double(a[j * st]) * double(b[j * st]);
    dot = sumReduce(dot);
    for (int64_t j = lane; j < n; j += lanes)
      out[j * st] = float(double(b[j * st]) * (double(a[j * st]) - dot));
  } else {
    // dx = dy - exp(y) * sum(dy).
    double sum = 0;
    for (int64_t j = lane; j < n; j += lanes) sum += a[j * st];
    sum = sumReduce(sum);
    for (int64_t j = lane; j < n; j += lanes)
      out[j * st] = float(double(a[j * st]) - exp(double(b[j * st])) * sum);
  }
}

struct Identity {
  template <typename T> __device__ T operator()(T v) const { return v; }
};
struct WarpMax {
  __device__ float operator()(float v) const {
    for (int o = 16; o > 0; o >>= 1) v = maxOf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
  }
};
struct WarpAllSum {
  __device__ double operator()(double v) const {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
  }
};

template <Kind K>
__global__ void warpLinesKernel(const float* a, const float* b, float* out, int64_t lines,
                                int64_t n) {
  int64_t warp = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) >> 5;
  int64_t warps = (int64_t(gridDim.x) * blockDim.x) >> 5;
  int lane = int(threadIdx.x & 31);
  for (int64_t q = warp; q < lines; q += warps)
    line<K>(a + q * n, b ? b + q * n : nullptr, out + q * n, n, 1, lane, 32, WarpMax{},
            WarpAllSum{});
}

template <Kind K>
__global__ void threadLinesKernel(const float* a, const float* b, float* out, Lines l) {
  HGP_GRID_LOOP(q, l.outer * l.inner) {
    int64_t off = (q / l.inner) * l.n * l.inner + q % l.inner;
    line<K>(a + off, b ? b + off : nullptr, out + off, l.n, l.inner, 0, 1, Identity{}, Identity{});
  }
}

template <Kind K> Status run(CudaArgs& a, size_t operands) {
  Lines l;
  HGP_TRY(readLines(a, operands, l));
  const float* b = operands == 2 ? a.in[1].f32() : nullptr;
  if (l.inner == 1) {
    int64_t lines = l.outer;
    warpLinesKernel<K><<<blocksFor(a, lines * 32), kBlock, 0, a.stream>>>(
        a.in[0].f32(), b, a.out[0].f32(), lines, l.n);
  } else {
    threadLinesKernel<K><<<blocksFor(a, l.outer * l.inner), kBlock, 0, a.stream>>>(
        a.in[0].f32(), b, a.out[0].f32(), l);
  }
  return checkLaunch(a, "softmaxKernel");
}

} // namespace

Status execSoftmax(CudaArgs& a) {
  return run<Kind::Softmax>(a, 1);
}
Status execLogSoftmax(CudaArgs& a) {
  return run<Kind::LogSoftmax>(a, 1);
}
Status execSoftmaxBwd(CudaArgs& a) {
  return run<Kind::SoftmaxBwd>(a, 2);
}
Status execLogSoftmaxBwd(CudaArgs& a) {
  return run<Kind::LogSoftmaxBwd>(a, 2);
}

} // namespace hgp::cuda
