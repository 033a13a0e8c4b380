// CUDA executors for LayerNorm and its gradient (runtime/cpu/LayerNormOps.cpp).
//
// X is a row-major [rows, cols] matrix (cols: the normalized trailing dims). One warp per row:
// its lanes stride over the columns, the row's sums are taken in double with a fixed shuffle
// tree, as the CPU reference takes them in double. The parameter gradients sum over rows in two
// deterministic stages: block (column tile, part) sums its part's rows per column in a fixed
// order, and a finalize kernel adds the parts of each column in part order. No atomics.
// Mixed precision: X, Y, dY and dX may be bf16 or f16 (the kernels are templated on that stored
// type T, read with toFloat, rounded once on store); scale, bias, the row statistics and the
// parameter gradients are always f32, as the CPU reference computes them from widened copies.
#include "runtime/cuda/DeviceUtil.cuh"

namespace hgp::cuda {

namespace {

constexpr int kRowsPerBlock = 8; ///< Warps per 256-thread block, one row each.

struct RowShape {
  int64_t rows = 1, cols = 1;
};

Status rowShape(const CudaArgs& a, const Shape& x, RowShape& r) {
  int64_t axis = a.attrs().getInt("axis", -1);
  if (axis < 0 || axis >= int64_t(x.size())) return a.fail("LayerNorm axis is out of range");
  for (size_t d = 0; d < x.size(); ++d) (int64_t(d) < axis ? r.rows : r.cols) *= x[d];
  return Status::ok();
}

/// The sum of `v` over the warp, in every lane.
__device__ __forceinline__ double warpAllSum(double v) {
  v = warpSum(v);
  return __shfl_sync(0xffffffffu, v, 0);
}

template <typename T>
__global__ void layerNormKernel(RowShape s, double eps, const T* x, const float* scale,
                                const float* bias, T* y, float* mean, float* invstd) {
  int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  int lane = threadIdx.x & 31;
  if (row >= s.rows) return;
  const T* xr = x + row * s.cols;
  double sum = 0;
  for (int64_t j = lane; j < s.cols; j += 32) sum += toFloat(xr[j]);
  double m = warpAllSum(sum) / double(s.cols);
  double ss = 0;
  for (int64_t j = lane; j < s.cols; j += 32) {
    double d = toFloat(xr[j]) - m;
    ss += d * d;
  }
  ss = warpAllSum(ss);
  float mf = float(m), is = float(1.0 / sqrt(ss / double(s.cols) + eps));
  if (lane == 0) {
    mean[row] = mf;
    invstd[row] = is;
  }
  T* yr = y + row * s.cols;
  for (int64_t j = lane; j < s.cols; j += 32) {
    float v = __fmul_rn(__fmul_rn(__fsub_rn(toFloat(xr[j]), mf), is), scale[j]);
    yr[j] = fromFloat<T>(bias ? __fadd_rn(v, bias[j]) : v);
  }
}

template <typename T>
__global__ void layerNormDxKernel(RowShape s, const T* dy, const T* x, const float* scale,
                                  const float* mean, const float* invstd, T* dx) {
  int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  int lane = threadIdx.x & 31;
  if (row >= s.rows) return;
  const T *xr = x + row * s.cols, *gr = dy + row * s.cols;
  double m = mean[row], is = invstd[row], sg = 0, sgx = 0;
  for (int64_t j = lane; j < s.cols; j += 32) {
    double g = double(toFloat(gr[j])) * scale[j], xhat = (double(toFloat(xr[j])) - m) * is;
    sg += g;
    sgx += g * xhat;
  }
  double mg = warpAllSum(sg) / double(s.cols), mgx = warpAllSum(sgx) / double(s.cols);
  for (int64_t j = lane; j < s.cols; j += 32) {
    double g = double(toFloat(gr[j])) * scale[j], xhat = (double(toFloat(xr[j])) - m) * is;
    dx[row * s.cols + j] = fromFloat<T>(float(is * (g - mg - xhat * mgx)));
  }
}

/// Block (tile, part): 32 columns by 8 row lanes; partials[(part * cols + c) * 2 + k] receives
/// the part's sum of dY * xhat (k = 0) and of dY (k = 1) for column c.
template <typename T>
__global__ void layerNormParamPartials(RowShape s, int64_t chunk, const T* dy, const T* x,
                                       const float* mean, const float* invstd, double* partials) {
  __shared__ double sh[kRowsPerBlock][32][2];
  int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  int64_t c = int64_t(blockIdx.x) * 32 + tx, part = blockIdx.y;
  int64_t r0 = part * chunk, r1 = min(s.rows, r0 + chunk);
  double ds = 0, db = 0;
  if (c < s.cols)
    for (int64_t r = r0 + ty; r < r1; r += kRowsPerBlock) {
      double g = toFloat(dy[r * s.cols + c]);
      ds += g * (double(toFloat(x[r * s.cols + c])) - mean[r]) * invstd[r];
      db += g;
    }
  sh[ty][tx][0] = ds;
  sh[ty][tx][1] = db;
  __syncthreads();
  if (ty == 0 && c < s.cols) {
    for (int k = 1; k < kRowsPerBlock; ++k) {
      ds += sh[k][tx][0];
      db += sh[k][tx][1];
    }
    partials[(part * s.cols + c) * 2] = ds;
    partials[(part * s.cols + c) * 2 + 1] = db;
  }
}

__global__ void layerNormParamFinalize(int64_t cols, int parts, const double* partials,
                                       float* dscale, float* dbias) {
  HGP_GRID_LOOP(c, cols) {
    double ds = 0, db = 0;
    for (int p = 0; p < parts; ++p) {
      ds += partials[(p * cols + c) * 2];
      db += partials[(p * cols + c) * 2 + 1];
    }
    dscale[c] = float(ds);
    dbias[c] = float(db);
  }
}

/// Operands [0, nData) and result 0 have X's float dtype, every other one is f32.
Status checkDTypes(const CudaArgs& a, size_t nData) {
  DType t = a.in[nData - 1].dtype;
  HGP_TRY(checkFloat(a, a.in[nData - 1], "X"));
  for (size_t i = 0; i < a.in.size(); ++i)
    HGP_TRY(checkDType(a, a.in[i], i < nData ? t : DType::F32, "operand"));
  for (size_t i = 0; i < a.out.size(); ++i)
    HGP_TRY(checkDType(a, a.out[i], i == 0 ? t : DType::F32, "result"));
  return Status::ok();
}

unsigned rowBlocks(const RowShape& s) {
  return unsigned((s.rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

} // namespace

Status execLayerNorm(CudaArgs& a) {
  HGP_TRY(checkArity(a, 2, 3, 3, 3));
  HGP_TRY(checkDTypes(a, 1));
  RowShape s;
  HGP_TRY(rowShape(a, *a.in[0].shape, s));
  if (a.in[1].numel() != s.cols || (a.in.size() == 3 && a.in[2].numel() != s.cols) ||
      a.out[1].numel() != s.rows || a.out[2].numel() != s.rows)
    return a.fail("LayerNorm operand sizes do not match X");
  if (s.rows == 0 || s.cols == 0) return Status::ok();
  if (rowBlocks(s) > 0x7fffffffu) return a.fail("too many LayerNorm rows");
  const float* bias = a.in.size() == 3 ? a.in[2].f32() : nullptr;
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) {
    using T = decltype(t);
    layerNormKernel<T><<<rowBlocks(s), 32 * kRowsPerBlock, 0, a.stream>>>(
        s, a.attrs().getFloat("epsilon", 1e-5), a.in[0].as<T>(), a.in[1].f32(), bias,
        a.out[0].as<T>(), a.out[1].f32(), a.out[2].f32());
    return checkLaunch(a, "layerNormKernel");
  });
}

Status execLayerNormBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 5, 5, 3, 3));
  HGP_TRY(checkDTypes(a, 2));
  RowShape s;
  HGP_TRY(rowShape(a, *a.in[1].shape, s));
  if (a.in[2].numel() != s.cols || a.in[3].numel() != s.rows || a.in[4].numel() != s.rows ||
      a.out[1].numel() != s.cols || a.out[2].numel() != s.cols)
    return a.fail("LayerNormBwd operand sizes do not match X");
  if (s.rows == 0 || s.cols == 0) return Status::ok();
  if (rowBlocks(s) > 0x7fffffffu) return a.fail("too many LayerNorm rows");
  const float *mean = a.in[3].f32(), *invstd = a.in[4].f32();
  // Parts of at least 128 rows, at most 64 of them: the split depends only on the shape.
  int64_t parts = std::min<int64_t>(64, (s.rows + 127) / 128);
  int64_t chunk = (s.rows + parts - 1) / parts;
  parts = (s.rows + chunk - 1) / chunk;
  double* partials;
  HGP_TRY(stepScratch(a, size_t(parts * s.cols * 2) * sizeof(double), partials));
  dim3 grid(unsigned((s.cols + 31) / 32), unsigned(parts));
  if ((s.cols + 31) / 32 > 0x7fffffff) return a.fail("too many LayerNorm columns");
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) {
    using T = decltype(t);
    const T *dy = a.in[0].as<T>(), *x = a.in[1].as<T>();
    layerNormParamPartials<T><<<grid, 32 * kRowsPerBlock, 0, a.stream>>>(s, chunk, dy, x, mean,
                                                                         invstd, partials);
    HGP_TRY(checkLaunch(a, "layerNormParamPartials"));
    layerNormParamFinalize<<<blocksFor(a, s.cols), kBlock, 0, a.stream>>>(
        s.cols, int(parts), partials, a.out[1].f32(), a.out[2].f32());
    HGP_TRY(checkLaunch(a, "layerNormParamFinalize"));
    layerNormDxKernel<T><<<rowBlocks(s), 32 * kRowsPerBlock, 0, a.stream>>>(
        s, dy, x, a.in[2].f32(), mean, invstd, a.out[0].as<T>());
    return checkLaunch(a, "layerNormDxKernel");
  });
}

} // namespace hgp::cuda
