// CollectiveOps.cpp - CUDA executors for collectives: AllReduce through NCCL.
//
// One step is one bucket. Its tensors are reduced as one NCCL group (ncclGroupStart, one
// ncclAllReduce per tensor, ncclGroupEnd), which NCCL fuses into one launch; the group is
// enqueued on the step's stream like a kernel, so it is captured into the iteration's CUDA graph.
// ncclAvg divides by the rank count on the device, so a mean loss stays a mean over the global
// batch. Out-of-place (result and operand have their own bytes in the memory plan) and in-place
// both work. Without a communicator (one rank) the step is the identity.
//
// The step runs on its own lane: hgpc compile's stream schedule puts every collective on a stream
// of its own (compiler/schedule/StreamSchedule.h), whose waits make it start once its gradients
// are final and make its readers wait for it, so the rest of the backward pass overlaps the
// communication. The memory plan keeps a bucket's operands untouched until its first reader.
#include "runtime/cuda/CudaKernel.h"
#include "runtime/cuda/Nccl.h"

namespace hgp::cuda {

Status execAllReduce(CudaArgs& a) {
  if (a.in.empty() || a.in.size() != a.out.size())
    return a.fail("an all-reduce needs one result per operand");
  for (size_t i = 0; i < a.in.size(); ++i)
    if (a.in[i].dtype != DType::F32 || a.out[i].numel() != a.in[i].numel())
      return a.fail("all-reduce operands must be f32 and match their results");
  std::string reduce = a.attrs().getString("reduce", "avg");
  if (reduce != "avg" && reduce != "sum") return a.fail("unknown reduction '" + reduce + "'");
  if (!a.ctx.comm || a.ctx.comm->ranks() == 1) {
    for (size_t i = 0; i < a.in.size(); ++i)
      if (a.out[i].data != a.in[i].data)
        HGP_CUDA_TRY(cudaMemcpyAsync(a.out[i].data, a.in[i].data, size_t(a.in[i].numel()) * 4,
                                     cudaMemcpyDeviceToDevice, a.stream));
    return Status::ok();
  }
  ncclRedOp_t op = reduce == "avg" ? ncclAvg : ncclSum;
  HGP_NCCL_TRY(ncclGroupStart());
  for (size_t i = 0; i < a.in.size(); ++i) {
    ncclResult_t r = ncclAllReduce(a.in[i].data, a.out[i].data, size_t(a.in[i].numel()), ncclFloat,
                                   op, a.ctx.comm->comm(), a.stream);
    if (r != ncclSuccess) {
      (void)ncclGroupEnd();
      return ncclError(r, "ncclAllReduce", __FILE__, __LINE__);
    }
  }
  HGP_NCCL_TRY(ncclGroupEnd());
  return Status::ok();
}

} // namespace hgp::cuda
