// CUDA executors for Dropout and its gradient, Bernoulli and RandomNormal (RandomOps.cpp on the
// CPU).
//
// The mask is the CPU's bit for bit: philox4x32 below is runtime/cpu/CpuKernel.cpp's
// Philox-4x32-10, and element i is kept when the top 24 bits of output (i & 3) of the call with
// counter (i >> 2, i >> 34, iter, iter >> 32) and key seed ^ (key * 0x9E3779B97F4A7C15), scaled to
// [0, 1), are >= ratio. A thread makes one call for four consecutive elements. The iteration
// counter is read on the device, so a replayed graph draws a fresh mask every step.
#include "runtime/cuda/DeviceUtil.cuh"

#include <type_traits>

namespace hgp::cuda {

namespace {

__device__ __forceinline__ uint4 philox4x32(uint4 c, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0 = __umulhi(kMul0, c.x), lo0 = kMul0 * c.x;
    uint32_t hi1 = __umulhi(kMul1, c.z), lo1 = kMul1 * c.z;
    c = make_uint4(hi1 ^ c.y ^ key0, lo1, hi0 ^ c.w ^ key1, lo0);
    key0 += kW0;
    key1 += kW1;
  }
  return c;
}

struct DropoutParams {
  uint32_t key0 = 0, key1 = 0;
  float threshold = 0.f, scale = 1.f;
};

__device__ __forceinline__ float uniformOf(uint32_t bits) {
  return float(bits >> 8) * (1.0f / 16777216.0f);
}

__device__ __forceinline__ float keep(float x, uint32_t bits, const DropoutParams& p) {
  return uniformOf(bits) >= p.threshold ? x * p.scale : 0.f;
}

template <typename T>
__global__ void dropoutKernel(DropoutParams p, const int64_t* iterPtr, const T* x, T* y,
                              int64_t n, bool vec) {
  uint64_t iter = uint64_t(*iterPtr);
  HGP_GRID_LOOP(q, (n + 3) / 4) {
    uint64_t index = uint64_t(q) * 4;
    uint4 r = philox4x32(make_uint4(uint32_t(index >> 2), uint32_t(index >> 34), uint32_t(iter),
                                    uint32_t(iter >> 32)),
                         p.key0, p.key1);
    if constexpr (!std::is_same_v<T, float>) { // 16-bit storage: scalar, in float
      uint32_t bits[4] = {r.x, r.y, r.z, r.w};
      for (int k = 0; k < 4 && int64_t(index) + k < n; ++k)
        y[index + k] = fromFloat<T>(keep(toFloat(x[index + k]), bits[k], p));
    } else if (vec && int64_t(index) + 4 <= n) {
      float4 v = reinterpret_cast<const float4*>(x)[q];
      reinterpret_cast<float4*>(y)[q] =
          make_float4(keep(v.x, r.x, p), keep(v.y, r.y, p), keep(v.z, r.z, p), keep(v.w, r.w, p));
    } else {
      uint32_t bits[4] = {r.x, r.y, r.z, r.w};
      for (int k = 0; k < 4 && int64_t(index) + k < n; ++k)
        y[index + k] = keep(x[index + k], bits[k], p);
    }
  }
}

/// y = x * mask * scale; the identity when `iter` is absent or ratio is 0.
Status applyDropout(CudaArgs& a, const DeviceTensor* iter) {
  HGP_TRY(checkFloat(a, a.in[0], "input"));
  HGP_TRY(checkDType(a, a.out[0], a.in[0].dtype, "result"));
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "result"));
  double ratio = a.attrs().getFloat("ratio", 0.5);
  if (!(ratio >= 0 && ratio < 1)) return a.fail("dropout ratio must be in [0, 1)");
  if (!iter || ratio == 0) return copyTensor(a, a.out[0], a.in[0]);
  HGP_TRY(checkScalar(a, *iter, DType::I64, "iter"));
  uint64_t seed = uint64_t(a.attrs().getInt("seed", 0)), key = uint64_t(a.attrs().getInt("key", 0));
  uint64_t k = seed ^ (key * 0x9E3779B97F4A7C15ull);
  DropoutParams p;
  p.key0 = uint32_t(k);
  p.key1 = uint32_t(k >> 32);
  p.threshold = float(ratio);
  p.scale = float(1.0 / (1.0 - ratio));
  int64_t n = a.in[0].numel();
  bool vec = aligned16({a.in[0].data, a.out[0].data});
  return dispatchFloat(a, a.in[0].dtype, [&](auto t) {
    using T = decltype(t);
    dropoutKernel<<<blocksFor(a, (n + 3) / 4), kBlock, 0, a.stream>>>(
        p, iter->as<int64_t>(), a.in[0].as<T>(), a.out[0].as<T>(), n, vec);
    return checkLaunch(a, "dropoutKernel");
  });
}

/// Bernoulli: element i is 1 when its uniform draw is < threshold (= float(p)), else 0 (both
/// exact in every float dtype, so a 16-bit mask is the f32 one).
template <typename T>
__global__ void bernoulliKernel(uint32_t key0, uint32_t key1, float threshold,
                                const int64_t* iterPtr, T* y, int64_t n) {
  uint64_t iter = uint64_t(*iterPtr);
  HGP_GRID_LOOP(q, (n + 3) / 4) {
    uint64_t index = uint64_t(q) * 4;
    uint4 r = philox4x32(make_uint4(uint32_t(index >> 2), uint32_t(index >> 34), uint32_t(iter),
                                    uint32_t(iter >> 32)),
                         key0, key1);
    uint32_t bits[4] = {r.x, r.y, r.z, r.w};
    for (int k = 0; k < 4 && int64_t(index) + k < n; ++k)
      y[index + k] = fromFloat<T>(uniformOf(bits[k]) < threshold ? 1.f : 0.f);
  }
}

/// The expectation p, rounded to T as the CPU rounds its f32 result.
template <typename T> __global__ void fillKernel(float v, T* y, int64_t n) {
  HGP_GRID_LOOP(i, n) y[i] = fromFloat<T>(v);
}

/// RandomNormal: one Philox call per element, Box-Muller in double (OpList.def), as the CPU
/// computes it; libm's and CUDA's log and cos may differ in the last bit of a double, which
/// rounding to float almost never shows.
template <typename T>
__global__ void normalKernel(uint32_t key0, uint32_t key1, double mean, double scale,
                             const int64_t* iterPtr, T* y, int64_t n) {
  uint64_t iter = uint64_t(*iterPtr);
  HGP_GRID_LOOP(i, n) {
    uint4 r = philox4x32(make_uint4(uint32_t(uint64_t(i)), uint32_t(uint64_t(i) >> 32),
                                    uint32_t(iter), uint32_t(iter >> 32)),
                         key0, key1);
    double u1 = double((r.x >> 8) + 1) / 16777216.0, u2 = double(r.y >> 8) / 16777216.0;
    double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    y[i] = fromFloat<T>(float(mean + scale * z));
  }
}

} // namespace

Status execRandomNormal(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 2, 1, 1));
  HGP_TRY(checkFloat(a, a.out[0], "result"));
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "result"));
  double mean = a.attrs().getFloat("mean", 0.0), scale = a.attrs().getFloat("scale", 1.0);
  int64_t n = a.out[0].numel();
  if (a.in.size() == 2) HGP_TRY(checkScalar(a, a.in[1], DType::I64, "iter"));
  uint64_t seed = uint64_t(a.attrs().getInt("seed", 0)), key = uint64_t(a.attrs().getInt("key", 0));
  uint64_t k = seed ^ (key * 0x9E3779B97F4A7C15ull);
  return dispatchFloat(a, a.out[0].dtype, [&](auto t) {
    using T = decltype(t);
    if (a.in.size() < 2) { // no counter: the expectation
      fillKernel<T><<<blocksFor(a, n), kBlock, 0, a.stream>>>(float(mean), a.out[0].as<T>(), n);
      return checkLaunch(a, "fillKernel");
    }
    normalKernel<T><<<blocksFor(a, n), kBlock, 0, a.stream>>>(
        uint32_t(k), uint32_t(k >> 32), mean, scale, a.in[1].as<int64_t>(), a.out[0].as<T>(), n);
    return checkLaunch(a, "normalKernel");
  });
}

Status execBernoulli(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 2, 1, 1));
  HGP_TRY(checkFloat(a, a.out[0], "result"));
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "result"));
  double p = a.attrs().getFloat("p", -1);
  if (!(p >= 0 && p <= 1)) return a.fail("Bernoulli p must be in [0, 1]");
  int64_t n = a.out[0].numel();
  if (a.in.size() == 2) HGP_TRY(checkScalar(a, a.in[1], DType::I64, "iter"));
  uint64_t seed = uint64_t(a.attrs().getInt("seed", 0)), key = uint64_t(a.attrs().getInt("key", 0));
  uint64_t k = seed ^ (key * 0x9E3779B97F4A7C15ull);
  return dispatchFloat(a, a.out[0].dtype, [&](auto t) {
    using T = decltype(t);
    if (a.in.size() < 2) { // no counter: the expectation
      fillKernel<T><<<blocksFor(a, n), kBlock, 0, a.stream>>>(float(p), a.out[0].as<T>(), n);
      return checkLaunch(a, "fillKernel");
    }
    bernoulliKernel<T><<<blocksFor(a, (n + 3) / 4), kBlock, 0, a.stream>>>(
        uint32_t(k), uint32_t(k >> 32), float(p), a.in[1].as<int64_t>(), a.out[0].as<T>(), n);
    return checkLaunch(a, "bernoulliKernel");
  });
}

Status execDropout(CudaArgs& a) {
  HGP_TRY(checkArity(a, 1, 2, 1, 1));
  return applyDropout(a, a.in.size() == 2 ? &a.in[1] : nullptr);
}

Status execDropoutBwd(CudaArgs& a) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  return applyDropout(a, &a.in[1]);
}

} // namespace hgp::cuda
