// Window.h - the output size of a sliding-window op (convolution, pooling) along one dim.
//
// Part of the ops' semantics, so it lives with the plan schema: the compiler's shape rules, the
// CPU executors and the CUDA executors all use this one definition.
#pragma once

#include <cstdint>

namespace hgp {

/// Output positions along a dim of size `in` padded by `padBegin`/`padEnd`, for a window of
/// `kernel` elements spaced `dilation` apart moving by `stride`. With `ceilMode` a last partial
/// window counts, except (PyTorch's rule, ONNX's since opset 19) one that would start in the
/// trailing padding. 0 when the window does not fit at all.
inline int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t padBegin,
                                int64_t padEnd, int64_t dilation, bool ceilMode) {
  int64_t span = in + padBegin + padEnd - dilation * (kernel - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceilMode && (out - 1) * stride >= in + padBegin) --out;
  return out;
}

} // namespace hgp
