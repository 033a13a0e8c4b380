// ControlOps.cpp - CPU executors for training control: CheckFinite, CounterIncrement,
// LrSchedule and MetricsLog.
//
// CounterIncrement and MetricsLog update state in place (their result shares storage with
// input 0), so each reads what it needs before writing.
#include "runtime/cpu/KernelUtil.h"

#include <atomic>
#include <cmath>
#include <numbers>

namespace hgp::cpu {

Status execCheckFinite(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, SIZE_MAX, 1, 1));
  for (const auto& v : a.in) HGP_TRY(checkF32(a, v, "operand"));
  HGP_TRY(checkScalar(a, a.out[0], DType::F32, "ok"));
  std::atomic<bool> finite{true};
  for (const auto& v : a.in) {
    const float* x = v.f32();
    parallelElementwise(v.numel(), [&](int64_t b, int64_t e) {
      bool all = true;
      for (int64_t i = b; i < e; ++i) all &= std::isfinite(x[i]);
      if (!all) finite = false;
    });
  }
  a.out[0].f32()[0] = finite ? 1.f : 0.f;
  return Status::ok();
}

Status execCounterIncrement(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 2, 1, 1));
  HGP_TRY(checkScalar(a, a.in[0], DType::I64, "counter"));
  HGP_TRY(checkScalar(a, a.out[0], DType::I64, "counter"));
  if (a.in.size() == 2) HGP_TRY(checkScalar(a, a.in[1], DType::F32, "ok"));
  int64_t c = a.in[0].as<int64_t>()[0];
  bool step = a.in.size() < 2 || a.in[1].f32()[0] != 0.f;
  a.out[0].as<int64_t>()[0] = step ? c + 1 : c;
  return Status::ok();
}

Status execLrSchedule(KernelArgs& a) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkScalar(a, a.in[0], DType::I64, "iter"));
  HGP_TRY(checkScalar(a, a.out[0], DType::F32, "lr"));
  int64_t iter = a.in[0].as<int64_t>()[0];
  if (iter < 0) return a.fail("the iteration counter is negative");
  const AttrMap& at = a.attrs();
  double base = at.getFloat("base_lr", 0.0), gamma = at.getFloat("gamma", 0.1);
  std::string kind = at.getString("kind", "constant");
  double lr;
  if (kind == "constant") {
    lr = base;
  } else if (kind == "step") {
    int64_t stepSize = at.getInt("step_size", 0);
    if (stepSize < 1) return a.fail("the step schedule needs step_size >= 1");
    lr = base * std::pow(gamma, double(iter / stepSize));
  } else if (kind == "multistep") {
    int64_t passed = 0;
    for (int64_t m : at.getInts("milestones")) passed += m <= iter;
    lr = base * std::pow(gamma, double(passed));
  } else if (kind == "cosine") {
    int64_t tMax = at.getInt("t_max", 0);
    if (tMax < 1) return a.fail("the cosine schedule needs t_max >= 1");
    double etaMin = at.getFloat("eta_min", 0.0);
    double t = double(std::min(iter, tMax)) / double(tMax);
    lr = etaMin + (base - etaMin) * (1 + std::cos(std::numbers::pi * t)) / 2;
  } else {
    return a.fail("unknown schedule '" + kind + "'");
  }
  // torch.optim.lr_scheduler.LinearLR's closed form, start_factor = warmup_factor.
  int64_t warmup = at.getInt("warmup_steps", 0);
  if (warmup < 0) return a.fail("warmup_steps must be >= 0");
  if (iter < warmup) {
    double f = at.getFloat("warmup_factor", 1.0 / 3.0);
    lr *= f + (1 - f) * double(iter) / double(warmup);
  }
  a.out[0].f32()[0] = float(lr);
  return Status::ok();
}

Status execMetricsLog(KernelArgs& a) {
  HGP_TRY(checkArity(a, 6, 6, 1, 1));
  const TensorView& ring = a.in[0];
  HGP_TRY(checkF32(a, ring, "ring"));
  if (ring.rank() != 2 || ring.dim(1) != 4) return a.fail("the metrics ring must be f32[K,4]");
  HGP_TRY(checkF32(a, a.out[0], "ring'"));
  HGP_TRY(checkShape(a, a.out[0], *ring.shape, "ring'"));
  HGP_TRY(checkScalar(a, a.in[1], DType::I64, "iter"));
  for (size_t i = 2; i < 6; ++i) HGP_TRY(checkScalar(a, a.in[i], DType::F32, "metric"));
  int64_t iter = a.in[1].as<int64_t>()[0];
  if (iter < 0) return a.fail("the iteration counter is negative");
  float row[4] = {a.in[2].f32()[0], a.in[3].f32()[0], a.in[4].f32()[0], a.in[5].f32()[0]};
  copyBytes(a.out[0], ring); // a no-op when the result shares the ring's storage
  float* dst = a.out[0].f32() + (iter % ring.dim(0)) * 4;
  for (int j = 0; j < 4; ++j) dst[j] = row[j];
  return Status::ok();
}

Status execLossScaleUpdate(KernelArgs& a) {
  HGP_TRY(checkArity(a, 3, 3, 2, 2));
  HGP_TRY(checkScalar(a, a.in[0], DType::F32, "scale"));
  HGP_TRY(checkScalar(a, a.in[1], DType::I64, "good"));
  HGP_TRY(checkScalar(a, a.in[2], DType::F32, "ok"));
  HGP_TRY(checkScalar(a, a.out[0], DType::F32, "scale"));
  HGP_TRY(checkScalar(a, a.out[1], DType::I64, "good"));
  float scale = a.in[0].f32()[0];
  int64_t good = a.in[1].as<int64_t>()[0];
  if (a.in[2].f32()[0] == 0.f) {
    scale = scale * float(a.attrs().getFloat("backoff_factor", 0.5));
    good = 0;
  } else if (++good >= a.attrs().getInt("growth_interval", 2000)) {
    scale = scale * float(a.attrs().getFloat("growth_factor", 2.0));
    good = 0;
  }
  a.out[0].f32()[0] = scale;
  a.out[1].as<int64_t>()[0] = good;
  return Status::ok();
}

} // namespace hgp::cpu
