#include "runtime/cpu/CpuKernel.h"

namespace hgp::cpu {

Status KernelArgs::fail(const std::string& msg) const {
  return Status(ErrorCode::Internal,
                std::string("cpu ") + opName(step.op) + " '" + step.loc + "': " + msg);
}

void philox4x32(uint32_t counter[4], uint32_t key0, uint32_t key1, uint32_t out[4]) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(kMul0) * c0, p1 = uint64_t(kMul1) * c2;
    uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    uint32_t n0 = hi1 ^ c1 ^ key0, n2 = hi0 ^ c3 ^ key1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    key0 += kW0;
    key1 += kW1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

float dropoutUniform(uint64_t seed, uint64_t key, uint64_t iter, uint64_t index) {
  // One Philox call yields four draws: elements 4q..4q+3 share counter q.
  uint32_t ctr[4] = {uint32_t(index >> 2), uint32_t(index >> 34), uint32_t(iter),
                     uint32_t(iter >> 32)};
  uint64_t k = seed ^ (key * 0x9E3779B97F4A7C15ull);
  uint32_t out[4];
  philox4x32(ctr, uint32_t(k), uint32_t(k >> 32), out);
  return float(out[index & 3] >> 8) * (1.0f / 16777216.0f);
}

} // namespace hgp::cpu
