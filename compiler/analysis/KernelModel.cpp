#include "compiler/analysis/KernelModel.h"

#include "compiler/analysis/StepWork.h"

#include <algorithm>
#include <cmath>

namespace hgp {

int blocksPerSm(const Target& t, const LaunchShape& k) {
  int warps = (k.threads + 31) / 32;
  // Registers are allocated per warp in units of 256.
  int64_t regsPerWarp = (int64_t(k.regs) * 32 + 255) / 256 * 256;
  int64_t byThreads = t.maxThreadsPerSm / std::max(1, warps * 32);
  int64_t byRegs = regsPerWarp > 0 ? t.regsPerSm / (regsPerWarp * warps) : t.maxBlocksPerSm;
  int64_t bySmem = k.smem > 0 ? t.smemPerSm / k.smem : t.maxBlocksPerSm;
  return int(std::max<int64_t>(0, std::min({int64_t(t.maxBlocksPerSm), byThreads, byRegs, bySmem})));
}

double waves(const Target& t, const LaunchShape& k) {
  int per = blocksPerSm(t, k);
  return per > 0 ? double(k.blocks) / (double(per) * t.sms) : INFINITY;
}

double gpuShare(const Target& t, const LaunchShape& k) {
  int per = blocksPerSm(t, k);
  if (per == 0) return 1.0;
  // Fewer blocks than SMs leave whole SMs idle; otherwise the block scheduler spreads the blocks
  // over every SM, and what counts is the room left on the busiest one.
  if (k.blocks < t.sms) return std::max(1e-6, double(k.blocks) / (double(t.sms) * per));
  return std::min(1.0, std::ceil(double(k.blocks) / t.sms) / per);
}

bool coResident(const Target& t, const std::vector<LaunchShape>& ks) {
  double threads = 0, regs = 0, smem = 0, blocks = 0;
  for (const LaunchShape& k : ks) {
    int per = blocksPerSm(t, k);
    if (per == 0) return false;
    // Blocks of this kernel on the busiest SM: spread evenly, at most its solo occupancy.
    double onSm = std::min<double>(per, std::ceil(double(k.blocks) / t.sms));
    int warps = (k.threads + 31) / 32;
    threads += onSm * warps * 32;
    regs += onSm * warps * double((int64_t(k.regs) * 32 + 255) / 256 * 256);
    smem += onSm * double(k.smem);
    blocks += onSm;
  }
  return threads <= t.maxThreadsPerSm && regs <= t.regsPerSm && smem <= double(t.smemPerSm) &&
         blocks <= t.maxBlocksPerSm;
}

double concurrentSeconds(const Target& t, const std::vector<LaunchShape>& ks,
                         const std::vector<double>& soloSeconds,
                         const std::vector<double>& bandwidthShares,
                         const std::vector<double>& launchSeconds) {
  double longest = 0, shared = 0, launches = 0;
  for (size_t i = 0; i < ks.size() && i < soloSeconds.size(); ++i) {
    double launch = i < launchSeconds.size() ? std::min(launchSeconds[i], soloSeconds[i]) : 0;
    double busy = soloSeconds[i] - launch;
    double share = gpuShare(t, ks[i]);
    if (i < bandwidthShares.size()) share = std::max(share, std::min(1.0, bandwidthShares[i]));
    longest = std::max(longest, busy);
    shared += busy * share;
    launches += launch;
  }
  return launches + std::max(longest, shared);
}

int64_t gemmTile(int64_t v) {
  int64_t t = 32;
  while (t < 128 && t < v) t *= 2;
  return t;
}

LaunchShape estimateLaunch(const Target& t, const Plan& plan, const PlanStep& step) {
  StepWork w = stepWork(plan, step);
  LaunchShape k;
  if (w.gemm) {
    // cuDNN's and cuBLAS's Hopper/Ampere implicit-GEMM kernels: output tiles of up to 128 x 128,
    // 256 threads, about 128 registers per thread and 64 KiB of staged operands per block.
    int64_t tm = gemmTile(w.m), tn = gemmTile(w.n);
    int64_t tiles = std::max<int64_t>(1, ((w.m + tm - 1) / tm) * ((w.n + tn - 1) / tn) * w.groups);
    k.blocks = tiles;
    k.threads = 256;
    k.regs = 128;
    k.smem = int64_t(64) << 10;
    // Too few output tiles to fill the GPU and a long reduction: the libraries split the
    // reduction across blocks (split-K), in chunks of at least 256 and up to the split that
    // fills one wave, choosing the split that wastes the least of the last wave: the fewest
    // waves per unit of reduction, ceil(waves) / s.
    int64_t capacity = int64_t(t.sms) * std::max(1, blocksPerSm(t, k));
    int64_t best = 1, fill = (capacity + tiles - 1) / tiles;
    double bestCost = double((tiles + capacity - 1) / capacity);
    for (int64_t split = 2; split <= fill && w.k / split >= 256; ++split) {
      double cost = double((tiles * split + capacity - 1) / capacity) / double(split);
      if (cost < bestCost - 1e-12) best = split, bestCost = cost;
    }
    k.blocks = tiles * best;
    k.splitK = best;
    return k;
  }
  // Grid-stride kernels: enough blocks of 256 threads to fill the GPU, at most one element per
  // thread (the executors' blocksFor()).
  int64_t elements = std::max<int64_t>(1, w.elements);
  k.threads = 256;
  k.regs = w.reduction ? 40 : 32;
  k.smem = w.reduction ? 2048 : 0;
  k.blocks = std::min<int64_t>((elements + 255) / 256, int64_t(t.sms) * 16);
  return k;
}

} // namespace hgp
