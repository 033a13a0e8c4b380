// Gemm.h - the CPU backend's single-precision matrix product.
//
// C = alpha * op(A) * op(B) + beta * C, row-major, with leading dimensions. Cache-blocked and
// split over the thread pool along M and N; the inner kernel is a plain loop that the compiler
// vectorizes. It is the workhorse of the CPU convolutions (im2col) and of Gemm/MatMul.
#pragma once

#include <cstdint>

namespace hgp::cpu {

void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

} // namespace hgp::cpu
