#include "runtime/cpu/Gemm.h"

#include "runtime/cpu/KernelUtil.h"

#include "runtime/support/ThreadPool.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace hgp::cpu {

namespace {

constexpr int64_t MR = 6, NR = 16;   // register tile
constexpr int64_t KC = 256, MC = 64; // cache blocks
constexpr int64_t NC = 256;

inline float elemA(const float* a, int64_t lda, bool t, int64_t i, int64_t p) {
  return t ? a[p * lda + i] : a[i * lda + p];
}
inline float elemB(const float* b, int64_t ldb, bool t, int64_t p, int64_t j) {
  return t ? b[j * ldb + p] : b[p * ldb + j];
}

/// Packs rows [i0, i0+mc) x cols [p0, p0+kc) of op(A) into MR-row panels, k-major.
void packA(const float* a, int64_t lda, bool t, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
           float* out) {
  for (int64_t ib = 0; ib < mc; ib += MR) {
    int64_t rows = std::min(MR, mc - ib);
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t r = 0; r < rows; ++r) out[p * MR + r] = elemA(a, lda, t, i0 + ib + r, p0 + p);
      for (int64_t r = rows; r < MR; ++r) out[p * MR + r] = 0.f;
    }
    out += kc * MR;
  }
}

/// Packs rows [p0, p0+kc) x cols [j0, j0+nc) of op(B) into NR-column panels, k-major.
void packB(const float* b, int64_t ldb, bool t, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
           float* out) {
  for (int64_t jb = 0; jb < nc; jb += NR) {
    int64_t cols = std::min(NR, nc - jb);
    for (int64_t p = 0; p < kc; ++p) {
      float* o = out + p * NR;
      if (!t && cols == NR) {
        std::memcpy(o, b + (p0 + p) * ldb + j0 + jb, NR * sizeof(float));
      } else {
        for (int64_t c = 0; c < cols; ++c) o[c] = elemB(b, ldb, t, p0 + p, j0 + jb + c);
        for (int64_t c = cols; c < NR; ++c) o[c] = 0.f;
      }
    }
    out += kc * NR;
  }
}

/// Eight floats, loaded and stored unaligned; GCC maps arithmetic on it to one AVX register (or
/// two SSE registers in the default clone).
typedef float Vec8 __attribute__((vector_size(32), aligned(4)));
static_assert(NR == 16, "the micro-kernel holds a row of the register tile in two Vec8");

/// acc[MR][NR] = sum_p ap[p][:] outer bp[p][:]. Each accumulator element adds its products in
/// order of p, one multiply and one add each (no FMA), so every clone gives the same bits.
__attribute__((target_clones("avx2", "default"))) void
microKernel(int64_t kc, const float* ap, const float* bp, float acc[MR][NR]) {
  Vec8 c[MR][2] = {};
  for (int64_t p = 0; p < kc; ++p) {
    Vec8 b0, b1;
    std::memcpy(&b0, bp + p * NR, sizeof b0);
    std::memcpy(&b1, bp + p * NR + 8, sizeof b1);
    for (int64_t r = 0; r < MR; ++r) {
      Vec8 a = Vec8{} + ap[p * MR + r];
      c[r][0] += a * b0;
      c[r][1] += a * b1;
    }
  }
  std::memcpy(acc, c, sizeof c);
}

} // namespace

void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  // Scale C by beta first, so every k block below simply accumulates.
  parallelFor(m, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      float* row = c + i * ldc;
      if (beta == 0.f)
        std::fill(row, row + n, 0.f);
      else if (beta != 1.f)
        for (int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
  });
  if (k <= 0 || alpha == 0.f) return;

  int64_t mTiles = (m + MC - 1) / MC, nTiles = (n + NC - 1) / NC;
  for (int64_t p0 = 0; p0 < k; p0 += KC) {
    int64_t kc = std::min(KC, k - p0);
    parallelFor(mTiles * nTiles, 1, [&](int64_t t0, int64_t t1) {
      // Both packed panels live in the thread's GEMM scratch: A's first, then B's.
      size_t aSize = size_t(((MC + MR - 1) / MR) * MR * kc);
      float* ap = threadScratch(Scratch::Gemm, aSize + size_t(((NC + NR - 1) / NR) * NR * kc));
      float* bp = ap + aSize;
      int64_t packedN = -1;
      for (int64_t t = t0; t < t1; ++t) {
        int64_t mi = t % mTiles, nj = t / mTiles;
        int64_t i0 = mi * MC, mc = std::min(MC, m - i0);
        int64_t j0 = nj * NC, nc = std::min(NC, n - j0);
        if (packedN != nj) {
          packB(b, ldb, transB, p0, kc, j0, nc, bp);
          packedN = nj;
        }
        packA(a, lda, transA, i0, mc, p0, kc, ap);
        for (int64_t ib = 0; ib < mc; ib += MR) {
          for (int64_t jb = 0; jb < nc; jb += NR) {
            float acc[MR][NR];
            microKernel(kc, ap + (ib / MR) * kc * MR, bp + (jb / NR) * kc * NR, acc);
            int64_t rows = std::min(MR, mc - ib), cols = std::min(NR, nc - jb);
            for (int64_t r = 0; r < rows; ++r) {
              float* crow = c + (i0 + ib + r) * ldc + j0 + jb;
              for (int64_t j = 0; j < cols; ++j) crow[j] += alpha * acc[r][j];
            }
          }
        }
      }
    });
  }
}

} // namespace hgp::cpu
