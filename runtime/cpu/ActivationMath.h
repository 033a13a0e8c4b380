// ActivationMath.h - the float formulas of the activations that a BatchNorm can absorb, shared
// by their own CPU executors (ActivationOps.cpp) and the fused BatchNorm (NormOps.cpp), so that a
// fused and an unfused graph compute the same values on the CPU. The formulas are PyTorch's.
#pragma once

#include <cmath>

namespace hgp::cpu {

/// Relu as execRelu computes it (NaN passes through).
inline float reluOf(float x) {
  return x > 0.f ? x : (std::isnan(x) ? x : 0.f);
}

/// SiLU: x / (1 + e^-x).
inline float siluOf(float x) {
  return x / (1.f + std::exp(-x));
}

/// SiLU's gradient: dy * s * (1 + x * (1 - s)), s = sigmoid(x).
inline float siluBwdOf(float dy, float x) {
  float s = 1.f / (1.f + std::exp(-x));
  return dy * s * (1.f + x * (1.f - s));
}

/// HardSwish, PyTorch's form: x * min(max(x + 3, 0), 6) / 6.
inline float hardSwishOf(float x) {
  float r = x + 3.f;
  r = r < 0.f ? 0.f : (r > 6.f ? 6.f : r);
  return x * r / 6.f;
}

/// HardSwish's gradient: 0 below -3, dy above 3, dy * (x/3 + 1/2) in between.
inline float hardSwishBwdOf(float dy, float x) {
  if (x < -3.f) return 0.f;
  if (x <= 3.f) return dy * (x / 3.f + 0.5f);
  return dy;
}

} // namespace hgp::cpu
