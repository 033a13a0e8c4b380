// PoolWindow.h - the window of a pooling op (MaxPool, AveragePool and their gradients), read from
// its attributes and checked against its shapes, for both backends.
//
// Part of the ops' semantics (runtime/plan/OpList.def), like Window.h's output size: the CPU
// executors (runtime/cpu/PoolOps.cpp) and the CUDA executors (runtime/cuda/PoolOps.cu, which also
// checks that the geometry fits its 32-bit index arithmetic) read the same attributes the same
// way. Spatial dims are right-aligned in three slots: a 1-D or 2-D window gets leading unit dims
// (size 1, kernel 1, stride 1, no padding), so that executors loop over three dims always.
#pragma once

#include "runtime/plan/Attr.h"
#include "runtime/plan/Types.h"

namespace hgp {

struct PoolWindow {
  int64_t planes = 0; ///< N * C.
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, padBegin[3] = {0, 0, 0}, padEnd[3] = {0, 0, 0};
  int64_t dilation[3] = {1, 1, 1};
  bool countIncludePad = false;
};

/// Reads kernel_shape, strides, pads (all begins, then all ends), dilations (optional, 1 by
/// default), ceil_mode and count_include_pad, and checks that `y` is the pooled shape of `x`
/// (NCHW, rank 3 to 5). The error is Internal; its message says what does not fit, and the
/// executor names its step in front of it.
Expected<PoolWindow> readPoolWindow(const AttrMap& attrs, const Shape& x, const Shape& y);

} // namespace hgp
