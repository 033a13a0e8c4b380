// CUDA executors for the losses and metrics: softmax cross-entropy, mean squared error, OneHot
// and CountCorrect (LossOps.cpp on the CPU).
//
// Rows of [N, C] logits go a warp each (log-sum-exp in double, max-subtracted). Batch sums are
// two-stage: per-row or per-block values in the step's scratch, then one block adds them in a
// fixed order, so the loss is deterministic. Labels live on the device and cannot be checked on
// the host: a label outside [0, C) never indexes memory; it makes its row's loss and gradient NaN
// (so the step's CheckFinite skips the update and the runner reports it), its OneHot row zero
// and its CountCorrect row wrong.
#include "runtime/cuda/DeviceUtil.cuh"

namespace hgp::cuda {

namespace {

Status checkLogitsAndLabels(const CudaArgs& a, int64_t& n, int64_t& c) {
  const DeviceTensor &logits = a.in[0], &labels = a.in[1];
  HGP_TRY(checkF32(a, logits, "logits"));
  if (logits.rank() != 2)
    return a.fail("logits must be [N, C], got " + shapeToString(*logits.shape));
  n = logits.dim(0);
  c = logits.dim(1);
  if (labels.dtype != DType::I64) return a.fail("labels must be i64");
  return checkShape(a, labels, {n}, "labels");
}

struct WarpRows {
  int64_t warp, warps;
  int lane;
};

__device__ __forceinline__ WarpRows warpRows() {
  return {(blockIdx.x * int64_t(blockDim.x) + threadIdx.x) >> 5,
          (int64_t(gridDim.x) * blockDim.x) >> 5, int(threadIdx.x & 31)};
}

__device__ __forceinline__ double warpAllSum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// The row's log-sum-exp, max-subtracted, in double; every lane gets it.
__device__ double rowLogSumExp(const float* row, int64_t c, int lane) {
  float mx = row[0];
  for (int64_t j = lane; j < c; j += 32) mx = mx < row[j] ? row[j] : mx;
  for (int o = 16; o > 0; o >>= 1) {
    float v = __shfl_xor_sync(0xffffffffu, mx, o);
    mx = mx < v ? v : mx;
  }
  double sum = 0;
  for (int64_t j = lane; j < c; j += 32) sum += exp(double(row[j]) - double(mx));
  return double(mx) + log(warpAllSum(sum));
}

__global__ void crossEntropyRowsKernel(const float* logits, const int64_t* labels, int64_t n,
                                       int64_t c, double eps, double* rowLoss) {
  WarpRows w = warpRows();
  for (int64_t i = w.warp; i < n; i += w.warps) {
    const float* row = logits + i * c;
    double lse = rowLogSumExp(row, c, w.lane);
    double sumNll = 0; // sum over classes of -log p_c
    for (int64_t j = w.lane; j < c; j += 32) sumNll += lse - double(row[j]);
    sumNll = warpAllSum(sumNll);
    int64_t label = labels[i];
    if (w.lane == 0) {
      bool valid = label >= 0 && label < c;
      double nll = valid ? lse - double(row[label]) : 0.0;
      rowLoss[i] = valid ? (1 - eps) * nll + eps * (sumNll / double(c)) : NAN;
    }
  }
}

/// One block: out[0] = float(sum of v[0..n) / divisor), in a fixed order.
__global__ void finalSumKernel(const double* v, int64_t n, double divisor, float* out) {
  __shared__ double scratch[32];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += v[i];
  s = blockSum(s, scratch);
  if (threadIdx.x == 0) out[0] = float(s / divisor);
}

__global__ void crossEntropyBwdKernel(const float* logits, const int64_t* labels,
                                      const float* dloss, int64_t n, int64_t c, double eps,
                                      float* dx) {
  WarpRows w = warpRows();
  double k = double(*dloss) / double(n);
  for (int64_t i = w.warp; i < n; i += w.warps) {
    const float* row = logits + i * c;
    double lse = rowLogSumExp(row, c, w.lane);
    int64_t label = labels[i];
    bool valid = label >= 0 && label < c;
    for (int64_t j = w.lane; j < c; j += 32) {
      double target = (j == label ? 1 - eps : 0.0) + eps / double(c);
      dx[i * c + j] = valid ? float(k * (exp(double(row[j]) - lse) - target)) : NAN;
    }
  }
}

__global__ void squaredErrorPartialsKernel(const float* p, const float* t, int64_t n,
                                           double* partials) {
  __shared__ double scratch[32];
  double s = 0;
  HGP_GRID_LOOP(i, n) {
    double d = double(p[i]) - double(t[i]);
    s += d * d;
  }
  s = blockSum(s, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__global__ void mseBwdKernel(const float* p, const float* t, const float* dloss, float norm,
                             float* dp, int64_t n) {
  float g = *dloss;
  HGP_GRID_LOOP(i, n) dp[i] = norm * (p[i] - t[i]) * g;
}

__global__ void oneHotKernel(const int64_t* labels, int64_t n, int64_t depth, float* y) {
  HGP_GRID_LOOP(e, n * depth) y[e] = labels[e / depth] == e % depth ? 1.f : 0.f;
}

/// rowCorrect[i] = 1 when row i's first maximum is its label. NaNs never win, except that a
/// NaN in column 0 stays the maximum (the CPU's strictly-greater scan from column 0).
__global__ void countCorrectRowsKernel(const float* logits, const int64_t* labels, int64_t n,
                                       int64_t c, int* rowCorrect) {
  WarpRows w = warpRows();
  for (int64_t i = w.warp; i < n; i += w.warps) {
    const float* row = logits + i * c;
    int64_t best = -1;
    float bestVal = 0.f;
    for (int64_t j = w.lane; j < c; j += 32) {
      float v = row[j];
      if (isnan(v)) continue;
      if (best < 0 || v > bestVal) best = j, bestVal = v;
    }
    for (int o = 16; o > 0; o >>= 1) {
      int64_t ob = __shfl_xor_sync(0xffffffffu, best, o);
      float ov = __shfl_xor_sync(0xffffffffu, bestVal, o);
      if (ob >= 0 && (best < 0 || ov > bestVal || (ov == bestVal && ob < best)))
        best = ob, bestVal = ov;
    }
    if (best < 0 || isnan(row[0])) best = 0;
    if (w.lane == 0) rowCorrect[i] = best == labels[i] ? 1 : 0;
  }
}

__global__ void countSumKernel(const int* rowCorrect, int64_t n, float* out) {
  __shared__ long long scratch[32];
  long long s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += rowCorrect[i];
  s = blockSum(s, scratch);
  if (threadIdx.x == 0) out[0] = float(s);
}

} // namespace

Status execSoftmaxCrossEntropy(CudaArgs& a) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  HGP_TRY(checkScalar(a, a.out[0], DType::F32, "loss"));
  int64_t n, c;
  HGP_TRY(checkLogitsAndLabels(a, n, c));
  double* rowLoss;
  HGP_TRY(stepScratch(a, size_t(n) * sizeof(double), rowLoss));
  crossEntropyRowsKernel<<<blocksFor(a, n * 32), kBlock, 0, a.stream>>>(
      a.in[0].f32(), a.in[1].as<int64_t>(), n, c, a.attrs().getFloat("label_smoothing", 0.0),
      rowLoss);
  HGP_TRY(checkLaunch(a, "crossEntropyRowsKernel"));
  finalSumKernel<<<1, 1024, 0, a.stream>>>(rowLoss, n, double(n), a.out[0].f32());
  return checkLaunch(a, "finalSumKernel");
}

Status execSoftmaxCrossEntropyBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 3, 3, 1, 1));
  HGP_TRY(checkScalar(a, a.in[2], DType::F32, "dloss"));
  int64_t n, c;
  HGP_TRY(checkLogitsAndLabels(a, n, c));
  HGP_TRY(checkF32(a, a.out[0], "dlogits"));
  HGP_TRY(checkShape(a, a.out[0], {n, c}, "dlogits"));
  crossEntropyBwdKernel<<<blocksFor(a, n * 32), kBlock, 0, a.stream>>>(
      a.in[0].f32(), a.in[1].as<int64_t>(), a.in[2].f32(), n, c,
      a.attrs().getFloat("label_smoothing", 0.0), a.out[0].f32());
  return checkLaunch(a, "crossEntropyBwdKernel");
}

namespace {
Status checkPredAndTarget(const CudaArgs& a) {
  HGP_TRY(checkF32(a, a.in[0], "prediction"));
  HGP_TRY(checkF32(a, a.in[1], "target"));
  return checkShape(a, a.in[1], *a.in[0].shape, "target");
}
} // namespace

Status execMseLoss(CudaArgs& a) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  HGP_TRY(checkPredAndTarget(a));
  HGP_TRY(checkScalar(a, a.out[0], DType::F32, "loss"));
  int64_t n = a.in[0].numel();
  unsigned blocks = blocksFor(a, n, kBlock, 4);
  double* partials;
  HGP_TRY(stepScratch(a, blocks * sizeof(double), partials));
  squaredErrorPartialsKernel<<<blocks, kBlock, 0, a.stream>>>(a.in[0].f32(), a.in[1].f32(), n,
                                                              partials);
  HGP_TRY(checkLaunch(a, "squaredErrorPartialsKernel"));
  finalSumKernel<<<1, 1024, 0, a.stream>>>(partials, blocks, double(n), a.out[0].f32());
  return checkLaunch(a, "finalSumKernel");
}

Status execMseLossBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 3, 3, 1, 1));
  HGP_TRY(checkPredAndTarget(a));
  HGP_TRY(checkScalar(a, a.in[2], DType::F32, "dloss"));
  HGP_TRY(checkF32(a, a.out[0], "dpred"));
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "dpred"));
  int64_t n = a.in[0].numel();
  // PyTorch's order: (2/numel) * (p - t) * dloss.
  mseBwdKernel<<<blocksFor(a, n), kBlock, 0, a.stream>>>(
      a.in[0].f32(), a.in[1].f32(), a.in[2].f32(), float(2.0 / double(n)), a.out[0].f32(), n);
  return checkLaunch(a, "mseBwdKernel");
}

Status execOneHot(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  const DeviceTensor& labels = a.in[0];
  if (labels.dtype != DType::I64 || labels.rank() != 1) return a.fail("labels must be i64[N]");
  int64_t n = labels.dim(0), depth = a.attrs().getInt("depth", 0);
  if (depth < 1) return a.fail("depth must be positive");
  HGP_TRY(checkF32(a, a.out[0], "result"));
  HGP_TRY(checkShape(a, a.out[0], {n, depth}, "result"));
  oneHotKernel<<<blocksFor(a, n * depth), kBlock, 0, a.stream>>>(labels.as<int64_t>(), n, depth,
                                                                 a.out[0].f32());
  return checkLaunch(a, "oneHotKernel");
}

Status execCountCorrect(CudaArgs& a) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  HGP_TRY(checkScalar(a, a.out[0], DType::F32, "correct"));
  int64_t n, c;
  HGP_TRY(checkLogitsAndLabels(a, n, c));
  int* rowCorrect;
  HGP_TRY(stepScratch(a, size_t(n) * sizeof(int), rowCorrect));
  countCorrectRowsKernel<<<blocksFor(a, n * 32), kBlock, 0, a.stream>>>(
      a.in[0].f32(), a.in[1].as<int64_t>(), n, c, rowCorrect);
  HGP_TRY(checkLaunch(a, "countCorrectRowsKernel"));
  countSumKernel<<<1, 1024, 0, a.stream>>>(rowCorrect, n, a.out[0].f32());
  return checkLaunch(a, "countSumKernel");
}

} // namespace hgp::cuda
