// KernelUtil.h - checks and loops the CPU executors share (internal to runtime/cpu).
//
// Every executor starts by checking what it received: operand counts, dtypes and shapes. The
// compiler's shape rules already guarantee these, so a failed check means a bug or a corrupted
// plan, and the executor returns ErrorCode::Internal instead of reading out of bounds. The loop
// helpers keep the executors short: a parallel elementwise loop, and an odometer over a strided
// view that the data-movement ops use to copy elements of any size.
#pragma once

#include "runtime/cpu/CpuKernel.h"
#include "runtime/support/ThreadPool.h"

#include <cstring>
#include <string>
#include <vector>

namespace hgp::cpu {

/// Fails unless the step has between minIn and maxIn inputs and minOut and maxOut outputs.
Status checkArity(const KernelArgs& a, size_t minIn, size_t maxIn, size_t minOut, size_t maxOut);

/// Fails unless `v` is float32. `what` names the operand in the message.
Status checkF32(const KernelArgs& a, const TensorView& v, const char* what);

/// Fails unless `v` has exactly the shape `want`.
Status checkShape(const KernelArgs& a, const TensorView& v, const Shape& want, const char* what);

/// Fails unless `v` is a scalar (numel 1) of dtype `t`.
Status checkScalar(const KernelArgs& a, const TensorView& v, DType t, const char* what);

/// A BadData error naming the step: the data (not the model or hgpc) is wrong.
Status badData(const KernelArgs& a, const std::string& msg);

/// Reads an integer list attribute that must have exactly `n` entries into `out`.
Status readInts(const KernelArgs& a, const char* name, size_t n, std::vector<int64_t>& out);

/// `s` with the step named in front, as fail() names it, for the errors of the readers in
/// runtime/plan (ShapeAttrs.h, PoolWindow.h), which know no step.
inline Status inStep(const KernelArgs& a, const Status& s) {
  return s ? s : a.fail(s.message());
}

/// A shape as a string, for messages.
inline std::string str(const Shape& s) {
  return shapeToString(s);
}

/// Elements per parallel chunk for cheap elementwise loops.
constexpr int64_t kElementwiseGrain = 1 << 15;

/// Runs fn(begin, end) over [0, n) in parallel chunks sized for elementwise work.
template <typename Fn> void parallelElementwise(int64_t n, Fn&& fn) {
  parallelFor(n, kElementwiseGrain, [&](int64_t b, int64_t e) { fn(b, e); });
}

/// Calls fn(i, off) for every element of `shape` in row-major order, where i counts elements
/// and off = base + sum(index[d] * strides[d]).
template <typename Fn>
void forEachStrided(const Shape& shape, const std::vector<int64_t>& strides, int64_t base,
                    Fn&& fn) {
  int64_t r = int64_t(shape.size());
  if (r == 0) {
    fn(int64_t(0), base);
    return;
  }
  int64_t inner = shape[size_t(r - 1)], innerStride = strides[size_t(r - 1)];
  int64_t rows = numElements(shape) / inner;
  std::vector<int64_t> idx(size_t(r), 0);
  int64_t off = base, i = 0;
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t j = 0; j < inner; ++j) fn(i++, off + j * innerStride);
    for (int64_t d = r - 2; d >= 0; --d) {
      if (++idx[size_t(d)] < shape[size_t(d)]) {
        off += strides[size_t(d)];
        break;
      }
      off -= strides[size_t(d)] * (shape[size_t(d)] - 1);
      idx[size_t(d)] = 0;
    }
  }
}

/// Copies numElements(shape) elements of `elemSize` bytes into contiguous `dst`; element i
/// comes from src + (base + sum(index[d] * srcStrides[d])) * elemSize. Strides are in elements
/// and may be zero (broadcast) or negative.
void stridedCopy(void* dst, const void* src, Shape shape, std::vector<int64_t> srcStrides,
                 int64_t base, int64_t elemSize);

/// Scratch buffers that executors reuse from call to call. Fresh pages from the OS are slow to
/// fault in, and an im2col matrix can be tens of megabytes, so each thread keeps its buffers.
enum class Scratch { Columns, Partials, Gemm };

/// A buffer of at least `n` floats, owned by the calling thread, contents unspecified. It stays
/// valid until the same thread asks for the same slot again.
float* threadScratch(Scratch slot, size_t n);

/// Copies a whole tensor unless source and destination are the same bytes.
inline void copyBytes(const TensorView& dst, const TensorView& src) {
  if (dst.data != src.data)
    std::memmove(dst.data, src.data, size_t(src.numel() * dtypeSize(src.dtype)));
}

} // namespace hgp::cpu
