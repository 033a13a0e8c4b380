// ReduceOps.cpp - CPU executors for ReduceMean and ReduceSum.
//
// Sums accumulate in double. The reduced dims are walked with strides 0 in the output, so one
// loop serves every axis set; empty `axes` copies X unchanged.
#include "runtime/cpu/KernelUtil.h"

namespace hgp::cpu {

namespace {

Status reduce(KernelArgs& a, bool mean) {
  HGP_TRY(checkArity(a, 1, 1, 1, 1));
  HGP_TRY(checkF32(a, a.in[0], "X"));
  HGP_TRY(checkF32(a, a.out[0], "Y"));
  const Shape& x = *a.in[0].shape;
  const AttrValue* axesAttr = a.attrs().find("axes");
  if (!axesAttr || !std::holds_alternative<std::vector<int64_t>>(*axesAttr))
    return a.fail("attribute 'axes' is missing or not an integer list");
  const auto& axes = std::get<std::vector<int64_t>>(*axesAttr);
  bool keep = a.attrs().getInt("keepdims", 1) != 0;
  Shape kept = x, y; // kept: X's shape with the reduced dims set to 1
  std::vector<bool> reduced(x.size(), false);
  int64_t prev = -1;
  for (int64_t ax : axes) {
    if (ax <= prev || ax >= int64_t(x.size()))
      return a.fail("axes must be sorted, unique and in range");
    kept[size_t(ax)] = 1;
    reduced[size_t(ax)] = true;
    prev = ax;
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (!reduced[i])
      y.push_back(x[i]);
    else if (keep)
      y.push_back(1);
  }
  HGP_TRY(checkShape(a, a.out[0], y, "Y"));
  const float* xp = a.in[0].f32();
  float* yp = a.out[0].f32();
  if (axes.empty()) {
    copyBytes(a.out[0], a.in[0]);
    return Status::ok();
  }
  int64_t nOut = numElements(kept), count = a.in[0].numel() / nOut;
  std::vector<double> acc(size_t(nOut), 0.0);
  // Walk X in order; the output offset follows with stride 0 along the reduced dims.
  forEachStrided(x, broadcastStrides(kept, x), 0,
                 [&](int64_t i, int64_t off) { acc[size_t(off)] += xp[i]; });
  for (int64_t j = 0; j < nOut; ++j)
    yp[j] = float(mean ? acc[size_t(j)] / double(count) : acc[size_t(j)]);
  return Status::ok();
}

} // namespace

Status execReduceMean(KernelArgs& a) {
  return reduce(a, /*mean=*/true);
}
Status execReduceSum(KernelArgs& a) {
  return reduce(a, /*mean=*/false);
}

} // namespace hgp::cpu
