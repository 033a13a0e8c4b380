// CUDA executors for LRN and its gradient (execLRN and execLRNBwd in runtime/cpu/NormOps.cpp),
// f32 only: one thread per element, the window sum and the power in double, as the CPU reference
// computes them.
#include "runtime/cuda/DeviceUtil.cuh"

namespace hgp::cuda {

namespace {

struct LrnParams {
  int64_t size = 1, lo = 0, hi = 0; ///< The window is channels [c - lo, c + hi].
  double alpha = 1e-4, beta = 0.75, bias = 1.0;
};

Status readLrn(const CudaArgs& a, LrnParams& p) {
  p.size = a.attrs().getInt("size", 0);
  if (p.size < 1) return a.fail("LRN size must be positive");
  p.lo = (p.size - 1) / 2;
  p.hi = p.size - 1 - p.lo;
  p.alpha = a.attrs().getFloat("alpha", 1e-4);
  p.beta = a.attrs().getFloat("beta", 0.75);
  p.bias = a.attrs().getFloat("bias", 1.0);
  return Status::ok();
}

/// bias + alpha/size * the sum of x^2 over channel c's window (x at channel 0 of its position).
__device__ double lrnScale(const LrnParams& p, const float* x, int64_t c, int64_t channels,
                           int64_t plane) {
  double sum = 0;
  int64_t k0 = c - p.lo < 0 ? 0 : c - p.lo, k1 = c + p.hi > channels - 1 ? channels - 1 : c + p.hi;
  for (int64_t k = k0; k <= k1; ++k) sum += double(x[k * plane]) * double(x[k * plane]);
  return p.bias + p.alpha / double(p.size) * sum;
}

__global__ void lrnKernel(LrnParams p, ChannelShape s, const float* x, float* y) {
  HGP_GRID_LOOP(e, s.outer * s.channels * s.inner) {
    int64_t j = e % s.inner, c = (e / s.inner) % s.channels, n = e / (s.inner * s.channels);
    const float* base = x + n * s.channels * s.inner + j;
    y[e] = float(double(x[e]) * pow(lrnScale(p, base, c, s.channels, s.inner), -p.beta));
  }
}

__global__ void lrnBwdKernel(LrnParams p, ChannelShape s, const float* dy, const float* x,
                             const float* y, float* dx) {
  double coef = 2.0 * p.alpha * p.beta / double(p.size);
  HGP_GRID_LOOP(e, s.outer * s.channels * s.inner) {
    int64_t j = e % s.inner, c = (e / s.inner) % s.channels, n = e / (s.inner * s.channels);
    int64_t off = n * s.channels * s.inner + j;
    const float* base = x + off;
    // Channel c is in window(k) for k in [c - hi, c + lo].
    double sum = 0;
    int64_t k0 = c - p.hi < 0 ? 0 : c - p.hi;
    int64_t k1 = c + p.lo > s.channels - 1 ? s.channels - 1 : c + p.lo;
    for (int64_t k = k0; k <= k1; ++k) {
      int64_t ek = off + k * s.inner;
      sum += double(dy[ek]) * double(y[ek]) / lrnScale(p, base, k, s.channels, s.inner);
    }
    double sc = lrnScale(p, base, c, s.channels, s.inner);
    dx[e] = float(double(dy[e]) * pow(sc, -p.beta) - coef * double(x[e]) * sum);
  }
}

} // namespace

Status execLRN(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32(a, a.in[0], "X"));
  if (a.in[0].rank() < 3) return a.fail("LRN needs rank 3 or more");
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "Y"));
  if (a.out[0].data == a.in[0].data) return a.fail("LRN cannot run in place");
  LrnParams p;
  HGP_TRY(readLrn(a, p));
  ChannelShape s = channelShapeOf(*a.in[0].shape);
  lrnKernel<<<blocksFor(a, a.in[0].numel()), kBlock, 0, a.stream>>>(p, s, a.in[0].f32(),
                                                                    a.out[0].f32());
  return checkLaunch(a, "lrnKernel");
}

Status execLRNBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 3, 3, 1, 1));
  for (const auto& v : a.in) {
    HGP_TRY(checkF32(a, v, "operand"));
    HGP_TRY(checkShape(a, v, *a.in[0].shape, "operand"));
  }
  if (a.in[0].rank() < 3) return a.fail("LRN needs rank 3 or more");
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "dX"));
  for (const auto& v : a.in)
    if (v.data == a.out[0].data) return a.fail("LRNBwd cannot run in place");
  LrnParams p;
  HGP_TRY(readLrn(a, p));
  ChannelShape s = channelShapeOf(*a.in[0].shape);
  lrnBwdKernel<<<blocksFor(a, a.in[0].numel()), kBlock, 0, a.stream>>>(
      p, s, a.in[0].f32(), a.in[1].f32(), a.in[2].f32(), a.out[0].f32());
  return checkLaunch(a, "lrnBwdKernel");
}

} // namespace hgp::cuda
