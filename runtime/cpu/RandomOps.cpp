// RandomOps.cpp - CPU executors for Dropout and its gradient, Bernoulli and RandomNormal.
//
// Element i is kept when dropoutUniform(seed, key, iter, i) >= ratio (compared in float) and is
// then scaled by 1/(1-ratio). The mask is a pure function of (seed, key, iter, i), so the
// gradient recomputes it and every backend draws the same one.
#include "runtime/cpu/KernelUtil.h"

#include <cmath>

namespace hgp::cpu {

namespace {

/// y = x * mask * scale; the identity when `iter` is absent or ratio is 0.
Status applyDropout(KernelArgs& a, const TensorView* iter) {
  HGP_TRY(checkF32(a, a.in[0], "input"));
  HGP_TRY(checkF32(a, a.out[0], "result"));
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "result"));
  double ratio = a.attrs().getFloat("ratio", 0.5);
  if (!(ratio >= 0 && ratio < 1)) return a.fail("dropout ratio must be in [0, 1)");
  if (!iter || ratio == 0) {
    copyBytes(a.out[0], a.in[0]);
    return Status::ok();
  }
  HGP_TRY(checkScalar(a, *iter, DType::I64, "iter"));
  uint64_t seed = uint64_t(a.attrs().getInt("seed", 0)), key = uint64_t(a.attrs().getInt("key", 0));
  uint64_t it = uint64_t(iter->as<int64_t>()[0]);
  float threshold = float(ratio), scale = float(1.0 / (1.0 - ratio));
  const float* x = a.in[0].f32();
  float* y = a.out[0].f32();
  parallelElementwise(a.in[0].numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      y[i] = dropoutUniform(seed, key, it, uint64_t(i)) >= threshold ? x[i] * scale : 0.f;
  });
  return Status::ok();
}

} // namespace

Status execDropout(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 2, 1, 1));
  return applyDropout(a, a.in.size() == 2 ? &a.in[1] : nullptr);
}

Status execDropoutBwd(KernelArgs& a) {
  HGP_TRY(checkArity(a, 2, 2, 1, 1));
  return applyDropout(a, &a.in[1]);
}

Status execBernoulli(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 2, 1, 1));
  HGP_TRY(checkF32(a, a.out[0], "result"));
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "result"));
  double p = a.attrs().getFloat("p", -1);
  if (!(p >= 0 && p <= 1)) return a.fail("Bernoulli p must be in [0, 1]");
  float* y = a.out[0].f32();
  int64_t n = a.out[0].numel();
  if (a.in.size() < 2) { // no counter: the expectation
    for (int64_t i = 0; i < n; ++i) y[i] = float(p);
    return Status::ok();
  }
  HGP_TRY(checkScalar(a, a.in[1], DType::I64, "iter"));
  uint64_t seed = uint64_t(a.attrs().getInt("seed", 0)), key = uint64_t(a.attrs().getInt("key", 0));
  uint64_t it = uint64_t(a.in[1].as<int64_t>()[0]);
  float threshold = float(p);
  parallelElementwise(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      y[i] = dropoutUniform(seed, key, it, uint64_t(i)) < threshold ? 1.f : 0.f;
  });
  return Status::ok();
}

Status execRandomNormal(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 2, 1, 1));
  HGP_TRY(checkF32(a, a.out[0], "result"));
  HGP_TRY(checkShape(a, a.out[0], *a.in[0].shape, "result"));
  double mean = a.attrs().getFloat("mean", 0.0), scale = a.attrs().getFloat("scale", 1.0);
  float* y = a.out[0].f32();
  int64_t n = a.out[0].numel();
  if (a.in.size() < 2) { // no counter: the expectation
    for (int64_t i = 0; i < n; ++i) y[i] = float(mean);
    return Status::ok();
  }
  HGP_TRY(checkScalar(a, a.in[1], DType::I64, "iter"));
  uint64_t seed = uint64_t(a.attrs().getInt("seed", 0)), key = uint64_t(a.attrs().getInt("key", 0));
  uint64_t it = uint64_t(a.in[1].as<int64_t>()[0]);
  uint64_t k = seed ^ (key * 0x9E3779B97F4A7C15ull);
  parallelElementwise(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      uint32_t ctr[4] = {uint32_t(uint64_t(i)), uint32_t(uint64_t(i) >> 32), uint32_t(it),
                         uint32_t(it >> 32)};
      uint32_t r[4];
      philox4x32(ctr, uint32_t(k), uint32_t(k >> 32), r);
      double u1 = double((r[0] >> 8) + 1) / 16777216.0, u2 = double(r[1] >> 8) / 16777216.0;
      double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      y[i] = float(mean + scale * z);
    }
  });
  return Status::ok();
}

} // namespace hgp::cpu
