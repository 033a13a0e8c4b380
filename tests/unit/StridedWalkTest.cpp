// StridedWalkTest.cpp - the 32-bit strided walk of the CUDA data-movement kernels
// (runtime/cuda/StridedWalk.h), run on the host: FastDiv against plain division, and a walk
// over every element of a shape against the 64-bit row-major decomposition the general kernels
// use (DeviceUtil.cuh's stridedOffset), on the shapes of a channel shuffle, a channel slice, a
// negative-step slice and a broadcast, started at every element and at strided starts.
#include "runtime/cuda/StridedWalk.h"

#include <gtest/gtest.h>

#include <random>

namespace hgp::cuda {
namespace {

int64_t plainOffset(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                    int64_t base, int64_t i) {
  int64_t off = base;
  for (size_t k = shape.size(); k-- > 0;) {
    off += (i % shape[k]) * strides[k];
    i /= shape[k];
  }
  return off;
}

TEST(StridedWalk, FastDivIsDivision) {
  std::mt19937 rng(7);
  std::vector<uint32_t> divisors = {1, 2, 3, 5, 6, 7, 58, 116, 232, 464, 784, 3136, 12544,
                                    65535, 65536, 65537, (1u << 30) + 1, (1u << 31) - 1};
  for (int k = 0; k < 200; ++k) divisors.push_back(1 + rng() % ((1u << 31) - 1));
  for (int k = 0; k < 200; ++k) divisors.push_back(1 + rng() % 5000);
  std::vector<uint32_t> ns = {0, 1, 2, (1u << 31) - 1, (1u << 31) - 2, (1u << 30), 12345678};
  for (int k = 0; k < 2000; ++k) ns.push_back(rng() % (1u << 31));
  for (uint32_t d : divisors) {
    FastDiv f(d);
    for (uint32_t n : ns) ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
    for (uint32_t q : {1u, 2u, 1000u})
      for (int e = -1; e <= 1; ++e) { // around multiples of d
        uint64_t n = uint64_t(q) * d + uint64_t(int64_t(e));
        if (n < (1u << 31)) {
          ASSERT_EQ(f.div(uint32_t(n)), uint32_t(n / d)) << n << " / " << d;
        }
      }
  }
}

void expectWalk(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                int64_t base) {
  StridedDims d;
  ASSERT_TRUE(fitsStrided32(shape, strides, base, d));
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  // From every start of a run of 8 (how the kernels start), walking to the run's end.
  for (int64_t i0 = 0; i0 < n; i0 += 8) {
    StridedWalk w;
    w.start(d, uint32_t(i0));
    for (int64_t i = i0; i < std::min(n, i0 + 8); ++i) {
      ASSERT_EQ(int64_t(w.off), plainOffset(shape, strides, base, i)) << "element " << i;
      w.next(d);
    }
  }
  // One walk over all of it.
  StridedWalk w;
  w.start(d, 0);
  for (int64_t i = 0; i < n; ++i, w.next(d))
    ASSERT_EQ(int64_t(w.off), plainOffset(shape, strides, base, i)) << "element " << i;
}

TEST(StridedWalk, WalksLikeTheRowMajorDecomposition) {
  // ShuffleNet's channel shuffle in channels-last, merged: [pixels, C/2, 2] from [pixels, 2, C/2].
  expectWalk({3 * 7 * 7, 58, 2}, {116, 1, 58}, 0);
  // A channel slice of a channels-last map: [pixels, 58] out of rows of 116, from channel 58.
  expectWalk({2 * 5 * 5, 58}, {116, 1}, 58);
  // A reversed slice (negative step), and a broadcast (stride 0) of [4,1,3] to [4,5,3].
  expectWalk({6, 9}, {-9, -1}, 53);
  expectWalk({4, 5, 3}, {3, 0, 1}, 0);
  // Eight dims, all slots, with a size-1 dim and a transposition.
  expectWalk({2, 3, 1, 2, 3, 2, 2, 3}, {1, 2, 6, 6, 12, 36, 72, 144}, 0);
  // One dim, and one element.
  expectWalk({1000}, {1}, 5);
  expectWalk({1}, {1}, 0);
}

TEST(StridedWalk, RefusesWhatDoesNotFitIn31Bits) {
  StridedDims d;
  EXPECT_FALSE(fitsStrided32({int64_t(1) << 31}, {1}, 0, d));   // the count
  EXPECT_FALSE(fitsStrided32({1 << 16, 1 << 15}, {1, 1 << 16}, 0, d)); // 2^31 elements
  EXPECT_FALSE(fitsStrided32({2, 3}, {int64_t(1) << 30, 1}, 1 << 30, d)); // an offset
  EXPECT_FALSE(fitsStrided32({4}, {-1}, 2, d)); // below zero
  EXPECT_FALSE(fitsStrided32({1, 1, 1, 1, 1, 1, 1, 1, 1}, std::vector<int64_t>(9, 1), 0, d));
  EXPECT_TRUE(fitsStrided32({1 << 15, 1 << 15}, {1 << 15, 1}, 0, d)); // 2^30, offsets too
}

} // namespace
} // namespace hgp::cuda
