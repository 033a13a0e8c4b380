// CollectiveOps.cpp - CPU executors for collectives. The CPU backend is one rank, and over one
// rank both the mean and the sum of a tensor are the tensor itself, so AllReduce copies.
#include "runtime/cpu/KernelUtil.h"

#include <cstring>

namespace hgp::cpu {

Status execAllReduce(KernelArgs& a) {
  if (a.in.empty() || a.in.size() != a.out.size())
    return a.fail("an all-reduce needs one result per operand");
  for (size_t i = 0; i < a.in.size(); ++i) {
    HGP_TRY(checkF32(a, a.in[i], "operand"));
    if (*a.in[i].shape != *a.out[i].shape) return a.fail("result shape differs from its operand");
    if (a.out[i].data != a.in[i].data)
      std::memmove(a.out[i].data, a.in[i].data, size_t(a.in[i].numel()) * sizeof(float));
  }
  return Status::ok();
}

} // namespace hgp::cpu
