// Layout.h - the channels-last (NHWC) convention of the plan schema.
//
// Tensors are row-major and their shapes are physical. An op whose attribute map has
// layout="nhwc" stores every rank-4 operand and result channels-last: the tensor's shape is the
// NCHW shape the op's definition speaks of, permuted by (0, 2, 3, 1), so an activation is
// [N, H, W, C] and a convolution filter [K, R, S, C]. Operands of other ranks (a BatchNorm's
// per-channel scale, a convolution's bias) are unchanged. Without the attribute, or with
// layout="nchw", nothing changes. Elementwise ops need no attribute: they see the physical shapes
// of their operands, which agree.
//
// The attribute is written by the layout pass (passes/LayoutNhwc.cpp, docs/layout.md), only on
// the ops whose OpList.def entry has ChannelsLast, which is also what the shape rules and the
// backends accept.
// The shape rules and the CPU reference apply it generically: permute the rank-4 operands to
// NCHW, run the NCHW rule or executor, permute the rank-4 results back. The CUDA executors read
// it and run channels-last kernels (cuDNN's NHWC convolutions, the NHWC BatchNorm and pooling
// kernels), which is the point: the tensor cores want channels-last data.
#pragma once

#include "runtime/plan/Attr.h"
#include "runtime/plan/OpKind.h"
#include "runtime/plan/Types.h"

namespace hgp {

enum class Layout : uint8_t { NCHW, NHWC };

/// The op's layout attribute: NCHW when absent; an InvalidModel error for an unknown spelling
/// or for layout="nhwc" on an op that does not accept it.
Expected<Layout> layoutOf(OpKind op, const AttrMap& attrs);

/// The channels-last shape of an NCHW shape, [N, C, H, W] -> [N, H, W, C]; other ranks unchanged.
Shape channelsLastShape(const Shape& nchw);
/// The inverse, [N, H, W, C] -> [N, C, H, W]; other ranks unchanged.
Shape channelsFirstShape(const Shape& nhwc);

/// Copies an [A, B, C, D] tensor of `elemBytes`-byte elements into [A, C, D, B] order
/// (channels-first to channels-last) or, with `toLast` false, [A, B, C, D] into [A, D, B, C]
/// (channels-last to channels-first). `shape` is the source's shape.
void permuteChannels(const void* src, void* dst, const Shape& shape, int64_t elemBytes, bool toLast);

} // namespace hgp
