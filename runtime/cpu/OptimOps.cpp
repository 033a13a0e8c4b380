// OptimOps.cpp - CPU executors for the optimizer updates: SgdUpdate and AdamUpdate.
//
// Both follow torch 1.13's single-tensor (foreach=False) code: hyper-parameter arithmetic on
// Python floats happens in double, and each tensor op is one float operation per element, in
// torch's order, with its scalar argument rounded to float (as TensorIterator does). Results
// overwrite P and the state buffers in place; each element is read before it is written, so the
// aliasing is safe. When ok is 0 nothing changes. With grad_scale=1 the last input is the fp16 loss
// scale s, and every gradient element is first multiplied by 1 / s (exact for the powers of two
// that loss scaling uses).
#include "runtime/cpu/KernelUtil.h"

#include <cmath>

namespace hgp::cpu {

namespace {

/// Checks P, G, lr, ok and step, and that every extra state input and every result is f32 of
/// P's shape.
Status checkOptimOperands(const KernelArgs& a, size_t inputs) {
  const TensorView& p = a.in[0];
  HGP_TRY(checkF32(a, p, "parameter"));
  HGP_TRY(checkF32(a, a.in[1], "gradient"));
  HGP_TRY(checkShape(a, a.in[1], *p.shape, "gradient"));
  HGP_TRY(checkScalar(a, a.in[2], DType::F32, "lr"));
  HGP_TRY(checkScalar(a, a.in[3], DType::F32, "ok"));
  HGP_TRY(checkScalar(a, a.in[4], DType::I64, "step"));
  if (inputs < a.in.size()) HGP_TRY(checkScalar(a, a.in.back(), DType::F32, "loss scale"));
  for (size_t i = 5; i < inputs; ++i) {
    HGP_TRY(checkF32(a, a.in[i], "state"));
    HGP_TRY(checkShape(a, a.in[i], *p.shape, "state"));
  }
  for (const auto& v : a.out) {
    HGP_TRY(checkF32(a, v, "result"));
    HGP_TRY(checkShape(a, v, *p.shape, "result"));
  }
  return Status::ok();
}

/// ok == 0: the results keep their inputs' values (copied when they are separate buffers).
bool skipped(const KernelArgs& a, const std::vector<size_t>& stateInputs) {
  if (a.in[3].f32()[0] != 0.f) return false;
  for (size_t o = 0; o < a.out.size(); ++o) copyBytes(a.out[o], a.in[stateInputs[o]]);
  return true;
}

/// The inputs other than the loss scale (grad_scale=1 appends it).
size_t updateInputs(const KernelArgs& a) {
  return a.in.size() - (a.attrs().getInt("grad_scale", 0) ? 1 : 0);
}

/// 1 / the loss scale, or 1 without loss scaling.
float gradFactor(const KernelArgs& a) {
  return a.attrs().getInt("grad_scale", 0) ? 1.f / a.in.back().f32()[0] : 1.f;
}

} // namespace

Status execSgdUpdate(KernelArgs& a) {
  HGP_TRY(checkArity(a, 5, 7, 1, 2));
  size_t inputs = updateInputs(a);
  HGP_TRY(checkOptimOperands(a, inputs));
  double momentum = a.attrs().getFloat("momentum", 0.0);
  double dampening = a.attrs().getFloat("dampening", 0.0);
  double weightDecay = a.attrs().getFloat("weight_decay", 0.0);
  bool nesterov = a.attrs().getInt("nesterov", 0) != 0;
  bool hasBuf = momentum != 0;
  if (inputs != (hasBuf ? 6u : 5u) || a.out.size() != (hasBuf ? 2u : 1u))
    return a.fail("SGD takes a momentum buffer exactly when momentum is nonzero");
  if (skipped(a, {0, 5})) return Status::ok();
  const float* g = a.in[1].f32();
  const float* p = a.in[0].f32();
  const float* buf = hasBuf ? a.in[5].f32() : nullptr;
  float* pOut = a.out[0].f32();
  float* bufOut = hasBuf ? a.out[1].f32() : nullptr;
  bool first = a.in[4].as<int64_t>()[0] == 0;
  // Scalars as TensorIterator sees them: Python floats rounded to the tensor's dtype.
  const float wd = float(weightDecay), mom = float(momentum), damp1 = float(1 - dampening);
  const float negLr = float(-double(a.in[2].f32()[0]));
  const float unscale = gradFactor(a);
  const bool scaled = unscale != 1.f;
  parallelElementwise(a.in[0].numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float pi = p[i];
      float d = scaled ? g[i] * unscale : g[i];
      if (weightDecay != 0) d = d + wd * pi; // d_p = d_p.add(param, alpha=wd)
      if (hasBuf) {
        // buf = clone(d_p) on the first step, else buf.mul_(momentum).add_(d_p, alpha=1-damp).
        float bi = first ? d : buf[i] * mom + damp1 * d;
        bufOut[i] = bi;
        d = nesterov ? d + mom * bi : bi;
      }
      pOut[i] = pi + negLr * d; // param.add_(d_p, alpha=-lr)
    }
  });
  return Status::ok();
}

Status execAdamUpdate(KernelArgs& a) {
  HGP_TRY(checkArity(a, 7, 8, 3, 3));
  if (updateInputs(a) != 7) return a.fail("Adam takes 7 inputs (8 with grad_scale=1)");
  HGP_TRY(checkOptimOperands(a, 7));
  if (skipped(a, {0, 5, 6})) return Status::ok();
  double beta1 = a.attrs().getFloat("beta1", 0.9), beta2 = a.attrs().getFloat("beta2", 0.999);
  double eps = a.attrs().getFloat("eps", 1e-8), weightDecay = a.attrs().getFloat("weight_decay", 0);
  bool decoupled = a.attrs().getInt("decoupled", 0) != 0;
  double lr = a.in[2].f32()[0];
  double t = double(a.in[4].as<int64_t>()[0] + 1);
  // Python-float arithmetic, in double.
  double biasCorrection1 = 1 - std::pow(beta1, t);
  double biasCorrection2 = 1 - std::pow(beta2, t);
  double stepSize = lr / biasCorrection1;
  double biasCorrection2Sqrt = std::sqrt(biasCorrection2);
  // The same values as the float scalars TensorIterator multiplies by.
  const float decay = float(1 - lr * weightDecay), wd = float(weightDecay);
  const float b1 = float(beta1), oneMinusB1 = float(1 - beta1);
  const float b2 = float(beta2), oneMinusB2 = float(1 - beta2);
  const float bc2Sqrt = float(biasCorrection2Sqrt), epsF = float(eps);
  const float negStepSize = float(-stepSize);
  const float unscale = gradFactor(a);
  const bool scaled = unscale != 1.f;
  const float* g = a.in[1].f32();
  const float *p = a.in[0].f32(), *m = a.in[5].f32(), *v = a.in[6].f32();
  float *pOut = a.out[0].f32(), *mOut = a.out[1].f32(), *vOut = a.out[2].f32();
  parallelElementwise(a.in[0].numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float pi = p[i], gi = scaled ? g[i] * unscale : g[i];
      if (decoupled)
        pi = pi * decay; // AdamW: param.mul_(1 - lr*wd)
      else if (weightDecay != 0)
        gi = gi + wd * pi;                          // grad = grad.add(param, alpha=wd)
      float mi = m[i] * b1 + oneMinusB1 * gi;       // exp_avg.mul_(b1).add_(g, 1-b1)
      float vi = v[i] * b2 + oneMinusB2 * gi * gi;  // exp_avg_sq.mul_(b2).addcmul_(g, g)
      float denom = std::sqrt(vi) / bc2Sqrt + epsF; // (sqrt(v) / bc2_sqrt).add_(eps)
      mOut[i] = mi;
      vOut[i] = vi;
      pOut[i] = pi + negStepSize * mi / denom; // param.addcdiv_(m, denom, -step)
    }
  });
  return Status::ok();
}

} // namespace hgp::cpu
