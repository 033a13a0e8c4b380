#include "runtime/plan/Layout.h"

#include <cstring>

namespace hgp {

Expected<Layout> layoutOf(OpKind op, const AttrMap& attrs) {
  if (!attrs.has("layout")) return Layout::NCHW;
  std::string s = attrs.getString("layout");
  if (s == "nchw") return Layout::NCHW;
  if (s != "nhwc")
    return Status(ErrorCode::InvalidModel, "unknown layout '" + s + "' (nchw or nhwc)");
  if (!opHas(op, OpFlag::ChannelsLast))
    return Status(ErrorCode::InvalidModel,
                  std::string(opName(op)) + " has no channels-last form (layout=\"nhwc\")");
  return Layout::NHWC;
}

Shape channelsLastShape(const Shape& s) {
  if (s.size() != 4) return s;
  return {s[0], s[2], s[3], s[1]};
}

Shape channelsFirstShape(const Shape& s) {
  if (s.size() != 4) return s;
  return {s[0], s[3], s[1], s[2]};
}

void permuteChannels(const void* src, void* dst, const Shape& shape, int64_t elemBytes, bool toLast) {
  // Channels-first [A, B, P] (P = C * D) to [A, P, B], or channels-last [A, P, D] (P = B * C) to
  // [A, D, P]: a batch of 2-D transposes.
  int64_t a = shape[0], rows = toLast ? shape[1] : shape[1] * shape[2],
          cols = toLast ? shape[2] * shape[3] : shape[3];
  auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  size_t e = size_t(elemBytes);
  for (int64_t n = 0; n < a; ++n) {
    const unsigned char* sp = s + size_t(n * rows * cols) * e;
    unsigned char* dp = d + size_t(n * rows * cols) * e;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        std::memcpy(dp + size_t(c * rows + r) * e, sp + size_t(r * cols + c) * e, e);
  }
}

} // namespace hgp
