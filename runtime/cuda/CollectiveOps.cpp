// CollectiveOps.cpp - CUDA executors for collectives: AllReduce through NCCL.
//
// One step is one bucket. Its tensors are reduced as one NCCL group (ncclGroupStart, one
// ncclAllReduce per tensor, ncclGroupEnd), which NCCL fuses into one launch; the group is
// enqueued on the step's stream like a kernel, so it is captured into the iteration's CUDA graph.
// ncclAvg divides by the rank count on the device, so a mean loss stays a mean over the global
// batch. Out-of-place (result and operand have their own bytes in the memory plan) and in-place
// both work. Without a communicator (one rank) the step is the identity.
//
// With a communication stream (CudaContext::commStream), the group runs there: an event forks it
// from the step's stream (so everything before the step is done), another marks its end, and the
// backend joins that event into the compute stream before the first launch that reads a result.
// The memory plan keeps the operands' bytes untouched until then (passes/MemoryPlan.cpp), so the
// compute in between overlaps the communication. The events are created on the eager first run
// and recorded (in capture: turned into graph edges) on every run.
#include "runtime/cuda/CudaKernel.h"
#include "runtime/cuda/Nccl.h"

namespace hgp::cuda {

namespace {
struct CollectiveState final : StepState {
  cudaEvent_t fork = nullptr, done = nullptr;
  ~CollectiveState() override {
    if (fork) cudaEventDestroy(fork);
    if (done) cudaEventDestroy(done);
  }
};
} // namespace

Status joinCollectives(CudaContext& ctx, cudaStream_t stream,
                       const std::vector<const void*>* reads) {
  auto& pending = ctx.pendingCollectives;
  for (size_t i = 0; i < pending.size();) {
    bool join = !reads;
    for (const void* r : reads ? *reads : std::vector<const void*>{})
      for (const void* o : pending[i].first) join |= r == o;
    if (!join) {
      ++i;
      continue;
    }
    HGP_CUDA_TRY(cudaStreamWaitEvent(stream, pending[i].second, 0));
    pending.erase(pending.begin() + long(i));
  }
  return Status::ok();
}

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
  cudaStream_t stream = a.stream;
  CollectiveState* st = nullptr;
  if (a.ctx.commStream) {
    st = &a.stateAs<CollectiveState>();
    if (!st->fork) {
      if (a.ctx.capturing) return a.fail("the collective's events must exist before capture");
      HGP_CUDA_TRY(cudaEventCreateWithFlags(&st->fork, cudaEventDisableTiming));
      HGP_CUDA_TRY(cudaEventCreateWithFlags(&st->done, cudaEventDisableTiming));
    }
    HGP_CUDA_TRY(cudaEventRecord(st->fork, a.stream));
    HGP_CUDA_TRY(cudaStreamWaitEvent(a.ctx.commStream, st->fork, 0));
    stream = a.ctx.commStream;
  }
  HGP_NCCL_TRY(ncclGroupStart());
  for (size_t i = 0; i < a.in.size(); ++i) {
    ncclResult_t r = ncclAllReduce(a.in[i].data, a.out[i].data, size_t(a.in[i].numel()), ncclFloat,
                                   op, a.ctx.comm->comm(), stream);
    if (r != ncclSuccess) {
      (void)ncclGroupEnd();
      return ncclError(r, "ncclAllReduce", __FILE__, __LINE__);
    }
  }
  HGP_NCCL_TRY(ncclGroupEnd());
  if (st) {
    HGP_CUDA_TRY(cudaEventRecord(st->done, stream));
    std::vector<const void*> results;
    for (const DeviceTensor& o : a.out) results.push_back(o.data);
    a.ctx.pendingCollectives.push_back({std::move(results), st->done});
  }
  return Status::ok();
}

} // namespace hgp::cuda
