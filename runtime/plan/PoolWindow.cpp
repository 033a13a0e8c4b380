#include "runtime/plan/PoolWindow.h"

#include "runtime/plan/ShapeAttrs.h"
#include "runtime/plan/Window.h"

namespace hgp {

namespace {

Status bad(const std::string& m) {
  return Status(ErrorCode::Internal, m);
}

} // namespace

Expected<PoolWindow> readPoolWindow(const AttrMap& attrs, const Shape& x, const Shape& y) {
  size_t rank = x.size();
  if (rank < 3 || rank > 5 || y.size() != rank || y[0] != x[0] || y[1] != x[1])
    return bad("pooling shapes " + shapeToString(x) + " -> " + shapeToString(y) + " do not fit");
  size_t r = rank - 2, lead = 3 - r;
  std::vector<int64_t> k, s, p, d(r, 1);
  HGP_TRY(readIntList(attrs, "kernel_shape", r, k));
  HGP_TRY(readIntList(attrs, "strides", r, s));
  HGP_TRY(readIntList(attrs, "pads", 2 * r, p));
  if (attrs.has("dilations")) HGP_TRY(readIntList(attrs, "dilations", r, d));
  bool ceil = attrs.getInt("ceil_mode", 0) != 0;
  PoolWindow w;
  w.planes = x[0] * x[1];
  w.countIncludePad = attrs.getInt("count_include_pad", 0) != 0;
  for (size_t i = 0; i < r; ++i) {
    if (k[i] < 1 || s[i] < 1 || d[i] < 1 || p[i] < 0 || p[r + i] < 0)
      return bad("kernel, strides and dilations must be positive and pads non-negative");
    if (y[2 + i] != windowOutputSize(x[2 + i], k[i], s[i], p[i], p[r + i], d[i], ceil))
      return bad("output " + shapeToString(y) + " is not the pooled shape of " + shapeToString(x));
    w.in[lead + i] = x[2 + i];
    w.out[lead + i] = y[2 + i];
    w.kernel[lead + i] = k[i];
    w.stride[lead + i] = s[i];
    w.padBegin[lead + i] = p[i];
    w.padEnd[lead + i] = p[r + i];
    w.dilation[lead + i] = d[i];
  }
  return w;
}

} // namespace hgp
