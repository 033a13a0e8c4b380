// ActivationOps.cpp - CPU executors for the one-input elementwise ops and their gradients.
//
// Forward ops map X to Y; gradients map (dY, saved) to dX, where `saved` is Y for Relu, Sigmoid
// and Tanh and X for the others. The gradients at the kinks follow PyTorch: ReLU passes where
// y > 0, hardtanh (Clip) and hardsigmoid pass strictly inside their linear range.
#include "runtime/cpu/ActivationMath.h"
#include "runtime/cpu/KernelUtil.h"

#include <cmath>
#include <limits>

namespace hgp::cpu {

namespace {

template <typename F> Status unaryMap(KernelArgs& a, F f) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32(a, a.in[0], "X"));
  HGP_TRY(checkF32(a, a.out[0], "Y"));
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "Y"));
  const float* x = a.in[0].f32();
  float* y = a.out[0].f32();
  parallelElementwise(a.in[0].numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = f(x[i]);
  });
  return Status::ok();
}

/// dX[i] = f(dY[i], saved[i]).
template <typename F> Status gradMap(KernelArgs& a, F f) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  for (const auto& v : a.in) HGP_TRY(checkF32(a, v, "operand"));
  HGP_TRY(checkF32(a, a.out[0], "dX"));
  HGP_TRY(checkShape(a, a.in[1], *a.in[0].shape, "saved tensor"));
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "dX"));
  const float *dy = a.in[0].f32(), *s = a.in[1].f32();
  float* dx = a.out[0].f32();
  parallelElementwise(a.in[0].numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dx[i] = f(dy[i], s[i]);
  });
  return Status::ok();
}

float leakyAlpha(const KernelArgs& a) {
  return float(a.attrs().getFloat("alpha", 0.01));
}

/// Clip's bounds; an absent bound is infinite.
void clipBounds(const KernelArgs& a, float& lo, float& hi) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  lo = a.attrs().has("min") ? float(a.attrs().getFloat("min")) : -inf;
  hi = a.attrs().has("max") ? float(a.attrs().getFloat("max")) : inf;
}

/// PyTorch's tanh form of GELU and its derivative (aten's GeluBackward with approximate=tanh).
constexpr float kBeta = 0.7978845608028654f, kKappa = 0.044715f; // sqrt(2/pi)
float geluTanh(float x) {
  return 0.5f * x * (1.f + std::tanh(kBeta * (x + kKappa * x * x * x)));
}
float geluTanhGrad(float x) {
  float inner = kBeta * (x + kKappa * x * x * x), t = std::tanh(inner);
  float dinner = kBeta * (1.f + 3.f * kKappa * x * x);
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * dinner;
}

void hardSigmoidParams(const KernelArgs& a, float& alpha, float& beta) {
  alpha = float(a.attrs().getFloat("alpha", 0.2));
  beta = float(a.attrs().getFloat("beta", 0.5));
}

} // namespace

Status execRelu(KernelArgs& a) {
  return unaryMap(a, reluOf);
}

Status execLeakyRelu(KernelArgs& a) {
  float alpha = leakyAlpha(a);
  return unaryMap(a, [alpha](float x) { return x > 0.f ? x : x * alpha; });
}

Status execClip(KernelArgs& a) {
  float lo, hi;
  clipBounds(a, lo, hi);
  if (lo > hi) return a.fail("Clip min is greater than max");
  return unaryMap(a, [lo, hi](float x) { return x < lo ? lo : (x > hi ? hi : x); });
}

Status execSigmoid(KernelArgs& a) {
  return unaryMap(a, [](float x) { return 1.f / (1.f + std::exp(-x)); });
}

Status execTanh(KernelArgs& a) {
  return unaryMap(a, [](float x) { return std::tanh(x); });
}

Status execHardSigmoid(KernelArgs& a) {
  float alpha, beta;
  hardSigmoidParams(a, alpha, beta);
  return unaryMap(a, [alpha, beta](float x) {
    float v = alpha * x + beta;
    return v < 0.f ? 0.f : (v > 1.f ? 1.f : v);
  });
}

Status execHardSwish(KernelArgs& a) {
  return unaryMap(a, hardSwishOf);
}

Status execSilu(KernelArgs& a) {
  return unaryMap(a, siluOf);
}

Status execNeg(KernelArgs& a) {
  return unaryMap(a, [](float x) { return -x; });
}

Status execScale(KernelArgs& a) {
  if (!a.attrs().has("alpha")) return a.fail("Scale needs attribute 'alpha'");
  float alpha = float(a.attrs().getFloat("alpha"));
  return unaryMap(a, [alpha](float x) { return alpha * x; });
}

Status execGelu(KernelArgs& a) {
  if (a.attrs().getString("approximate", "none") == "tanh")
    return unaryMap(a, [](float x) { return geluTanh(x); });
  return unaryMap(a, [](float x) { return 0.5f * x * std::erfc(-x * float(M_SQRT1_2)); });
}

Status execErf(KernelArgs& a) {
  return unaryMap(a, [](float x) { return std::erf(x); });
}

Status execExp(KernelArgs& a) {
  return unaryMap(a, [](float x) { return std::exp(x); });
}

Status execLog(KernelArgs& a) {
  return unaryMap(a, [](float x) { return std::log(x); });
}

Status execSqrt(KernelArgs& a) {
  return unaryMap(a, [](float x) { return std::sqrt(x); });
}

Status execReciprocal(KernelArgs& a) {
  return unaryMap(a, [](float x) { return 1.f / x; });
}

Status execGeluBwd(KernelArgs& a) {
  if (a.attrs().getString("approximate", "none") == "tanh")
    return gradMap(a, [](float dy, float x) { return dy * geluTanhGrad(x); });
  // d/dx x Phi(x) = Phi(x) + x phi(x).
  return gradMap(a, [](float dy, float x) {
    float cdf = 0.5f * std::erfc(-x * float(M_SQRT1_2)); // no cancellation for x < 0
    float pdf = std::exp(-0.5f * x * x) * 0.3989422804014327f; // 1 / sqrt(2 pi)
    return dy * (cdf + x * pdf);
  });
}

Status execReluBwd(KernelArgs& a) {
  return gradMap(a, [](float dy, float y) { return y > 0.f ? dy : 0.f; });
}

Status execLeakyReluBwd(KernelArgs& a) {
  float alpha = leakyAlpha(a);
  return gradMap(a, [alpha](float dy, float x) { return x > 0.f ? dy : dy * alpha; });
}

Status execClipBwd(KernelArgs& a) {
  float lo, hi;
  clipBounds(a, lo, hi);
  if (lo > hi) return a.fail("Clip min is greater than max");
  return gradMap(a, [lo, hi](float dy, float x) { return (x > lo && x < hi) ? dy : 0.f; });
}

Status execSigmoidBwd(KernelArgs& a) {
  return gradMap(a, [](float dy, float y) { return dy * y * (1.f - y); });
}

Status execTanhBwd(KernelArgs& a) {
  return gradMap(a, [](float dy, float y) { return dy * (1.f - y * y); });
}

Status execHardSigmoidBwd(KernelArgs& a) {
  float alpha, beta;
  hardSigmoidParams(a, alpha, beta);
  return gradMap(a, [alpha, beta](float dy, float x) {
    float v = alpha * x + beta;
    return (v > 0.f && v < 1.f) ? alpha * dy : 0.f;
  });
}

Status execHardSwishBwd(KernelArgs& a) {
  return gradMap(a, hardSwishBwdOf);
}

Status execSiluBwd(KernelArgs& a) {
  return gradMap(a, siluBwdOf);
}

} // namespace hgp::cpu
