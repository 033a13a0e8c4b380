// CUDA executors for the one-input elementwise ops and their gradients (ActivationOps.cpp on
// the CPU).
//
// One templated kernel per arity: y = f(x) and dx = f(dy, saved), float4 when the pointers are
// 16-byte aligned (the arena aligns every tensor to 64 bytes), with the < 4 leftover elements done
// by the first threads; bf16/f16 tensors (mixed precision) take eight elements per 16-byte load and
// compute in float, rounding on store. Each element is read before it is written by the same
// thread, so results may share storage with inputs. Products followed by sums use __fmul_rn/__fadd_rn so the GPU
// rounds exactly as the CPU reference does (no fused multiply-add); the file is compiled with
// --fmad=false (runtime/CMakeLists.txt), as the generated fused kernels are, so that the math
// functions (expf, tanhf, erff, logf) compile to the same code in both.
#include "runtime/cuda/ActivationMath.cuh"
#include "runtime/cuda/DeviceUtil.cuh"

#include <cmath>
#include <limits>

namespace hgp::cuda {

namespace {

template <typename F> __global__ void unaryKernel(const float* x, float* y, int64_t n, F f) {
  int64_t n4 = n / 4;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  HGP_GRID_LOOP(i, n4) {
    float4 v = x4[i];
    y4[i] = make_float4(f(v.x), f(v.y), f(v.z), f(v.w));
  }
  int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (t < n - n4 * 4) y[n4 * 4 + t] = f(x[n4 * 4 + t]);
}

template <typename F> __global__ void unaryKernelScalar(const float* x, float* y, int64_t n, F f) {
  HGP_GRID_LOOP(i, n) y[i] = f(x[i]);
}

template <typename F>
__global__ void binaryKernel(const float* a, const float* b, float* y, int64_t n, F f) {
  int64_t n4 = n / 4;
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  float4* y4 = reinterpret_cast<float4*>(y);
  HGP_GRID_LOOP(i, n4) {
    float4 u = a4[i], v = b4[i];
    y4[i] = make_float4(f(u.x, v.x), f(u.y, v.y), f(u.z, v.z), f(u.w, v.w));
  }
  int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (t < n - n4 * 4) y[n4 * 4 + t] = f(a[n4 * 4 + t], b[n4 * 4 + t]);
}

template <typename F>
__global__ void binaryKernelScalar(const float* a, const float* b, float* y, int64_t n, F f) {
  HGP_GRID_LOOP(i, n) y[i] = f(a[i], b[i]);
}

/// 16-bit storage (mixed precision): computed in float, rounded on store; eight elements per
/// 16-byte load when `vec` (aligned pointers), the < 8 leftover ones by the first threads.
template <typename T, typename F>
__global__ void unaryKernelHalf(const T* x, T* y, int64_t n, bool vec, F f) {
  constexpr int N = Pack16B<T>::kN;
  int64_t nv = vec ? n / N : 0;
  HGP_GRID_LOOP(q, nv) {
    Pack16B<T> v;
    v.raw = reinterpret_cast<const uint4*>(x)[q];
#pragma unroll
    for (int k = 0; k < N; ++k) v.e[k] = fromFloat<T>(f(toFloat(v.e[k])));
    reinterpret_cast<uint4*>(y)[q] = v.raw;
  }
  HGP_GRID_LOOP(i, n - nv * N) y[nv * N + i] = fromFloat<T>(f(toFloat(x[nv * N + i])));
}

template <typename T, typename F>
__global__ void binaryKernelHalf(const T* a, const T* b, T* y, int64_t n, bool vec, F f) {
  constexpr int N = Pack16B<T>::kN;
  int64_t nv = vec ? n / N : 0;
  HGP_GRID_LOOP(q, nv) {
    Pack16B<T> u, v;
    u.raw = reinterpret_cast<const uint4*>(a)[q];
    v.raw = reinterpret_cast<const uint4*>(b)[q];
#pragma unroll
    for (int k = 0; k < N; ++k) u.e[k] = fromFloat<T>(f(toFloat(u.e[k]), toFloat(v.e[k])));
    reinterpret_cast<uint4*>(y)[q] = u.raw;
  }
  HGP_GRID_LOOP(i, n - nv * N) {
    int64_t j = nv * N + i;
    y[j] = fromFloat<T>(f(toFloat(a[j]), toFloat(b[j])));
  }
}

template <typename F> Status unaryMap(CudaArgs& a, F f) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkFloat(a, a.in[0], "X"));
  HGP_TRY(checkDType(a, a.out[0], a.in[0].dtype, "Y"));
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "Y"));
  if (a.in[0].dtype != DType::F32) {
    int64_t n = a.in[0].numel();
    return dispatchFloat(a, a.in[0].dtype, [&](auto t) {
      using T = decltype(t);
      bool vec = aligned16({a.in[0].data, a.out[0].data});
      unaryKernelHalf<<<blocksFor(a, vec ? (n + 7) / 8 : n), kBlock, 0, a.stream>>>(
          a.in[0].as<T>(), a.out[0].as<T>(), n, vec, f);
      return checkLaunch(a, "unaryKernelHalf");
    });
  }
  const float* x = a.in[0].f32();
  float* y = a.out[0].f32();
  int64_t n = a.in[0].numel();
  if (aligned16({x, y}))
    unaryKernel<<<blocksFor(a, (n + 3) / 4), kBlock, 0, a.stream>>>(x, y, n, f);
  else
    unaryKernelScalar<<<blocksFor(a, n), kBlock, 0, a.stream>>>(x, y, n, f);
  return checkLaunch(a, "unaryKernel");
}

/// dX[i] = f(dY[i], saved[i]).
template <typename F> Status gradMap(CudaArgs& a, F f) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  HGP_TRY(checkFloat(a, a.in[0], "dY"));
  HGP_TRY(checkDType(a, a.in[1], a.in[0].dtype, "saved tensor"));
  HGP_TRY(checkDType(a, a.out[0], a.in[0].dtype, "dX"));
  HGP_TRY(checkShape(a, a.in[1], *a.in[0].shape, "saved tensor"));
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "dX"));
  if (a.in[0].dtype != DType::F32) {
    int64_t n = a.in[0].numel();
    return dispatchFloat(a, a.in[0].dtype, [&](auto t) {
      using T = decltype(t);
      bool vec = aligned16({a.in[0].data, a.in[1].data, a.out[0].data});
      binaryKernelHalf<<<blocksFor(a, vec ? (n + 7) / 8 : n), kBlock, 0, a.stream>>>(
          a.in[0].as<T>(), a.in[1].as<T>(), a.out[0].as<T>(), n, vec, f);
      return checkLaunch(a, "gradKernelHalf");
    });
  }
  const float *dy = a.in[0].f32(), *s = a.in[1].f32();
  float* dx = a.out[0].f32();
  int64_t n = a.in[0].numel();
  if (aligned16({dy, s, dx}))
    binaryKernel<<<blocksFor(a, (n + 3) / 4), kBlock, 0, a.stream>>>(dy, s, dx, n, f);
  else
    binaryKernelScalar<<<blocksFor(a, n), kBlock, 0, a.stream>>>(dy, s, dx, n, f);
  return checkLaunch(a, "gradKernel");
}

float leakyAlpha(const CudaArgs& a) {
  return float(a.attrs().getFloat("alpha", 0.01));
}

/// Clip's bounds; an absent bound is infinite.
void clipBounds(const CudaArgs& a, float& lo, float& hi) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  lo = a.attrs().has("min") ? float(a.attrs().getFloat("min")) : -inf;
  hi = a.attrs().has("max") ? float(a.attrs().getFloat("max")) : inf;
}

void hardSigmoidParams(const CudaArgs& a, float& alpha, float& beta) {
  alpha = float(a.attrs().getFloat("alpha", 0.2));
  beta = float(a.attrs().getFloat("beta", 0.5));
}

// Functors (extended lambdas would need --extended-lambda).
struct ReluF {
  __device__ float operator()(float x) const { return x > 0.f ? x : (isnan(x) ? x : 0.f); }
};
struct LeakyReluF {
  float alpha;
  __device__ float operator()(float x) const { return x > 0.f ? x : x * alpha; }
};
struct ClipF {
  float lo, hi;
  __device__ float operator()(float x) const { return x < lo ? lo : (x > hi ? hi : x); }
};
struct SigmoidF { // the generated fused kernels' sigm() (compiler/codegen/FusedKernelSource.cpp)
  __device__ float operator()(float x) const { return __fdiv_rn(1.f, __fadd_rn(1.f, expf(-x))); }
};
struct TanhF {
  __device__ float operator()(float x) const { return tanhf(x); }
};
struct HardSigmoidF {
  float alpha, beta;
  __device__ float operator()(float x) const {
    float v = __fadd_rn(__fmul_rn(alpha, x), beta);
    return v < 0.f ? 0.f : (v > 1.f ? 1.f : v);
  }
};
struct NegF {
  __device__ float operator()(float x) const { return -x; }
};
struct ScaleF {
  float alpha;
  __device__ float operator()(float x) const { return alpha * x; }
};

struct ReluBwdF {
  __device__ float operator()(float dy, float y) const { return y > 0.f ? dy : 0.f; }
};
struct LeakyReluBwdF {
  float alpha;
  __device__ float operator()(float dy, float x) const { return x > 0.f ? dy : dy * alpha; }
};
struct ClipBwdF {
  float lo, hi;
  __device__ float operator()(float dy, float x) const { return (x > lo && x < hi) ? dy : 0.f; }
};
struct SigmoidBwdF {
  __device__ float operator()(float dy, float y) const {
    return __fmul_rn(__fmul_rn(dy, y), __fsub_rn(1.f, y));
  }
};
struct TanhBwdF {
  __device__ float operator()(float dy, float y) const {
    return __fmul_rn(dy, __fsub_rn(1.f, __fmul_rn(y, y)));
  }
};
struct HardSigmoidBwdF {
  float alpha, beta;
  __device__ float operator()(float dy, float x) const {
    float v = __fadd_rn(__fmul_rn(alpha, x), beta);
    return (v > 0.f && v < 1.f) ? alpha * dy : 0.f;
  }
};

// GELU in both of torch.nn.GELU's forms, and its derivative (ActivationOps.cpp on the CPU). The
// normal CDF is 0.5 erfc(-x/sqrt 2), not 0.5 (1 + erf(x/sqrt 2)): for negative x the latter
// cancels (at x = -3, 1 + erf is 0.0027 and an ulp of erf is 2e-5 of it), and CUDA's erff and
// glibc's erff then differ by 5e-5 relative.
constexpr float kGeluBeta = 0.7978845608028654f, kGeluKappa = 0.044715f; // sqrt(2/pi)
struct GeluF {
  bool tanhForm;
  __device__ float operator()(float x) const {
    if (tanhForm) return 0.5f * x * (1.f + tanhf(kGeluBeta * (x + kGeluKappa * x * x * x)));
    return 0.5f * x * erfcf(-x * 0.70710678118654752f);
  }
};
struct GeluBwdF {
  bool tanhForm;
  __device__ float operator()(float dy, float x) const {
    if (tanhForm) {
      float t = tanhf(kGeluBeta * (x + kGeluKappa * x * x * x));
      float dinner = kGeluBeta * (1.f + 3.f * kGeluKappa * x * x);
      return dy * (0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * dinner);
    }
    float cdf = 0.5f * erfcf(-x * 0.70710678118654752f);
    float pdf = expf(-0.5f * x * x) * 0.3989422804014327f;
    return dy * (cdf + x * pdf);
  }
};
struct ErfF {
  __device__ float operator()(float x) const { return erff(x); }
};
struct ExpF {
  __device__ float operator()(float x) const { return expf(x); }
};
struct LogF {
  __device__ float operator()(float x) const { return logf(x); }
};
struct SqrtF {
  __device__ float operator()(float x) const { return sqrtf(x); }
};
struct ReciprocalF {
  __device__ float operator()(float x) const { return 1.f / x; }
};

bool geluTanh(const CudaArgs& a) {
  return a.attrs().getString("approximate", "none") == "tanh";
}

} // namespace

Status execGelu(CudaArgs& a) {
  return unaryMap(a, GeluF{geluTanh(a)});
}

Status execGeluBwd(CudaArgs& a) {
  return gradMap(a, GeluBwdF{geluTanh(a)});
}

Status execErf(CudaArgs& a) {
  return unaryMap(a, ErfF{});
}

Status execExp(CudaArgs& a) {
  return unaryMap(a, ExpF{});
}

Status execLog(CudaArgs& a) {
  return unaryMap(a, LogF{});
}

Status execSqrt(CudaArgs& a) {
  return unaryMap(a, SqrtF{});
}

Status execReciprocal(CudaArgs& a) {
  return unaryMap(a, ReciprocalF{});
}

Status execRelu(CudaArgs& a) {
  return unaryMap(a, ReluF{});
}

Status execLeakyRelu(CudaArgs& a) {
  return unaryMap(a, LeakyReluF{leakyAlpha(a)});
}

Status execClip(CudaArgs& a) {
  float lo, hi;
  clipBounds(a, lo, hi);
  if (lo > hi) return a.fail("Clip min is greater than max");
  return unaryMap(a, ClipF{lo, hi});
}

Status execSigmoid(CudaArgs& a) {
  return unaryMap(a, SigmoidF{});
}

Status execTanh(CudaArgs& a) {
  return unaryMap(a, TanhF{});
}

Status execHardSigmoid(CudaArgs& a) {
  float alpha, beta;
  hardSigmoidParams(a, alpha, beta);
  return unaryMap(a, HardSigmoidF{alpha, beta});
}

Status execHardSwish(CudaArgs& a) {
  return unaryMap(a, HardSwishF{});
}

Status execSilu(CudaArgs& a) {
  return unaryMap(a, SiluF{});
}

Status execNeg(CudaArgs& a) {
  return unaryMap(a, NegF{});
}

Status execScale(CudaArgs& a) {
  if (!a.attrs().has("alpha")) return a.fail("Scale needs attribute 'alpha'");
  return unaryMap(a, ScaleF{float(a.attrs().getFloat("alpha"))});
}

Status execReluBwd(CudaArgs& a) {
  return gradMap(a, ReluBwdF{});
}

Status execLeakyReluBwd(CudaArgs& a) {
  return gradMap(a, LeakyReluBwdF{leakyAlpha(a)});
}

Status execClipBwd(CudaArgs& a) {
  float lo, hi;
  clipBounds(a, lo, hi);
  if (lo > hi) return a.fail("Clip min is greater than max");
  return gradMap(a, ClipBwdF{lo, hi});
}

Status execSigmoidBwd(CudaArgs& a) {
  return gradMap(a, SigmoidBwdF{});
}

Status execTanhBwd(CudaArgs& a) {
  return gradMap(a, TanhBwdF{});
}

Status execHardSigmoidBwd(CudaArgs& a) {
  float alpha, beta;
  hardSigmoidParams(a, alpha, beta);
  return gradMap(a, HardSigmoidBwdF{alpha, beta});
}

Status execHardSwishBwd(CudaArgs& a) {
  return gradMap(a, HardSwishBwdF{});
}

Status execSiluBwd(CudaArgs& a) {
  return gradMap(a, SiluBwdF{});
}

} // namespace hgp::cuda
