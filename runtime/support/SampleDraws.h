// SampleDraws.h - the counter-based random numbers of data augmentation, on the host and the GPU.
//
// Every random choice of the input pipeline (a crop box, a flip) derives from the data seed, the
// epoch and the sample's index (docs/data.md), through SplitMix64 keyed by the three. The runner's
// decoders draw them on the CPU (runtime/runner/ImageTransform.h), and with --data-on-device the
// DeviceBatch op (runtime/plan/OpList.def) draws them on the device, inside the captured step.
// Both use this one definition, so the same sample in the same epoch gets the same crop and flip
// either way, bit for bit: the arithmetic is 64-bit integers, one exact int-to-double conversion
// and one multiplication by a power of two.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define HGP_HOST_DEVICE __host__ __device__
#else
#define HGP_HOST_DEVICE
#endif

namespace hgp {

/// Uniform doubles in [0, 1) from SplitMix64, seeded by (seed, epoch, index).
struct SampleDraws {
  uint64_t state;

  HGP_HOST_DEVICE SampleDraws(uint64_t seed, int64_t epoch, int64_t index) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull;
    s ^= (uint64_t(epoch) + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull;
    s ^= (uint64_t(index) + 0x2545F4914F6CDD1Dull) * 0x94D049BB133111EBull;
    state = s;
  }
  HGP_HOST_DEVICE double uniform() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return double((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
  }
};

/// torch.randint(lo, hi) from one uniform draw `u`: lo + floor(u * (hi - lo)), at most hi - 1.
HGP_HOST_DEVICE inline int64_t drawInteger(double u, int64_t lo, int64_t hi) {
  int64_t k = int64_t(floor(u * double(hi - lo)));
  return lo + (k < hi - lo - 1 ? k : hi - lo - 1);
}

} // namespace hgp
