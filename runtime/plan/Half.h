// Half.h - bf16 and IEEE fp16 storage: conversion to and from float32 on the host.
//
// Mixed-precision plans (docs/precision.md) store activations and their gradients in 16 bits and
// compute in float32. Every narrowing rounds to nearest, ties to even, as CUDA's __float2bfloat16
// and __float2half do; NaN stays NaN and values past the largest finite number become infinity.
// The CPU backend stores 16-bit tensors with these functions, so it stays the oracle for the GPU.
#pragma once

#include "runtime/plan/Types.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace hgp {

/// Whether `t` is a 16-bit float storage type (bf16 or f16).
inline bool isHalfDType(DType t) {
  return t == DType::BF16 || t == DType::F16;
}

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// bf16 -> float32 (exact).
inline float bf16ToFloat(uint16_t h) {
  return bitsFloat(uint32_t(h) << 16);
}

/// float32 -> bf16, round to nearest even.
inline uint16_t floatToBf16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u); // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
}

/// IEEE binary16 -> float32 (exact).
inline float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) { // zero or subnormal: mant * 2^-24
    float v = float(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return bitsFloat(sign | 0x7f800000u | (mant << 13));
  return bitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

/// float32 -> IEEE binary16, round to nearest even; overflow gives infinity.
inline uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return uint16_t(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u); // >= 65520 rounds to infinity
  if (ax < 0x38800000u) { // below 2^-14: a subnormal (or zero) in units of 2^-24
    float units = std::nearbyint(bitsFloat(ax) * 16777216.0f); // exact scaling; RNE
    return uint16_t(sign | uint16_t(units));
  }
  ax += 0xfffu + ((ax >> 13) & 1u);
  return uint16_t(sign | uint16_t((ax - 0x38000000u) >> 13));
}

/// Reads element i of 16-bit storage of dtype `t` as float.
inline float loadHalf(DType t, const uint16_t* p, int64_t i) {
  return t == DType::BF16 ? bf16ToFloat(p[i]) : halfToFloat(p[i]);
}
/// Rounds `v` to dtype `t` and stores it as element i.
inline void storeHalf(DType t, uint16_t* p, int64_t i, float v) {
  p[i] = t == DType::BF16 ? floatToBf16(v) : floatToHalf(v);
}

/// `v` rounded to dtype `t` and widened back: the value a tensor of dtype `t` holds after storing
/// `v` (the identity for f32).
inline float roundedAs(DType t, float v) {
  if (t == DType::BF16) return bf16ToFloat(floatToBf16(v));
  if (t == DType::F16) return halfToFloat(floatToHalf(v));
  return v;
}

} // namespace hgp
