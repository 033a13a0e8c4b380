// ReduceOps.cpp - CPU executors for ReduceMean, ReduceSum and ReduceMax.
//
// Sums accumulate in double; a maximum lets NaN win, as torch.amax does. The reduced dims are walked with strides 0 in the output, so one
// loop serves every axis set; empty `axes` copies X unchanged.
#include "runtime/cpu/KernelUtil.h"

#include <cmath>

namespace hgp::cpu {

namespace {

enum class Kind { Sum, Mean, Max };

Status reduce(KernelArgs& a, Kind kind) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32(a, a.in[0], "X"));
  HGP_TRY(checkF32(a, a.out[0], "Y"));
  const Shape& x = *a.in[0].shape;
  Expected<ReduceAxes> ax = readReduceAxes(a.attrs(), x);
  if (!ax) return inStep(a, ax.status());
  const std::vector<bool>& reduced = ax->reduced;
  HGP_TRY(checkShape(a, a.out[0], ax->result, "Y"));
  const float* xp = a.in[0].f32();
  float* yp = a.out[0].f32();
  if (ax->none) {
    copyBytes(a.out[0], a.in[0]);
    return Status::ok();
  }
  int64_t nOut = numElements(ax->result), count = a.in[0].numel() / nOut;
  // Split X's dims into kept and reduced ones (with X's strides), each list coalesced.
  std::vector<int64_t> xs = stridesOf(x);
  Shape keptShape, redShape;
  std::vector<int64_t> keptStrides, redStrides;
  for (size_t d = 0; d < x.size(); ++d) {
    (reduced[d] ? redShape : keptShape).push_back(x[d]);
    (reduced[d] ? redStrides : keptStrides).push_back(xs[d]);
  }
  coalesceDims(keptShape, {&keptStrides});
  coalesceDims(redShape, {&redStrides});
  // Each output sums its reduced elements in row-major order; outputs run in parallel.
  parallelFor(nOut, std::max<int64_t>(1, kElementwiseGrain / count), [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      int64_t base = 0, rem = j;
      for (int64_t d = int64_t(keptShape.size()) - 1; d >= 0; --d) {
        base += rem % keptShape[size_t(d)] * keptStrides[size_t(d)];
        rem /= keptShape[size_t(d)];
      }
      if (kind == Kind::Max) {
        float m = -INFINITY;
        forEachStrided(redShape, redStrides, base, [&](int64_t, int64_t off) {
          float v = xp[off];
          if (v != v || v > m) m = m != m ? m : v;
        });
        yp[j] = m;
        continue;
      }
      double sum = 0;
      if (redShape.size() == 1) {
        for (int64_t i = 0; i < redShape[0]; ++i) sum += xp[base + i * redStrides[0]];
      } else {
        forEachStrided(redShape, redStrides, base, [&](int64_t, int64_t off) { sum += xp[off]; });
      }
      yp[j] = float(kind == Kind::Mean ? sum / double(count) : sum);
    }
  });
  return Status::ok();
}

} // namespace

Status execReduceMean(KernelArgs& a) {
  return reduce(a, Kind::Mean);
}
Status execReduceSum(KernelArgs& a) {
  return reduce(a, Kind::Sum);
}
Status execReduceMax(KernelArgs& a) {
  return reduce(a, Kind::Max);
}

} // namespace hgp::cpu
