#include "runtime/cuda/InputStaging.h"

#include <algorithm>
#include <cstring>

namespace hgp::cuda {

InputStaging::~InputStaging() {
  // Statuses are dropped: nothing can be reported from here, and the rest must still be freed.
  if (copyStream_) (void)cudaStreamSynchronize(copyStream_);
  for (auto& [t, slots] : staging_)
    for (void* s : slots)
      if (s) (void)cudaFreeHost(s);
  for (cudaEvent_t e : {stagingRead_[0], stagingRead_[1], fork_, join_})
    if (e) (void)cudaEventDestroy(e);
  if (copyStream_) (void)cudaStreamDestroy(copyStream_);
}

Status InputStaging::init() {
  HGP_CUDA_TRY(cudaStreamCreateWithFlags(&copyStream_, cudaStreamNonBlocking));
  for (cudaEvent_t* ev : {&stagingRead_[0], &stagingRead_[1], &fork_, &join_})
    HGP_CUDA_TRY(cudaEventCreateWithFlags(ev, cudaEventDisableTiming));
  return Status::ok();
}

Status InputStaging::allocate(const Plan& plan, const std::function<uint8_t*(int)>& address) {
  size_t spare = 0;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    if (plan.tensors[i].role != TensorRole::Input) continue;
    auto& slots = staging_[int(i)];
    slots.fill(nullptr);
    for (int s = 0; s < kSlots; ++s)
      HGP_CUDA_TRY(
          cudaHostAlloc(&slots[size_t(s)], size_t(plan.tensors[i].bytes()), cudaHostAllocDefault));
    spare += (size_t(plan.tensors[i].bytes()) + 255) / 256 * 256;
  }
  // Slot 1's device copy of every input, in one allocation.
  HGP_ASSIGN_OR_RETURN(spare_, allocateDevice(std::max<size_t>(spare, 256)));
  spareBytes_ = spare;
  spare = 0;
  for (auto& [t, slots] : staging_) {
    deviceIn_[t] = {address(t), static_cast<uint8_t*>(spare_.get()) + spare};
    spare += (size_t(plan.tensors[size_t(t)].bytes()) + 255) / 256 * 256;
  }
  return Status::ok();
}

Status InputStaging::write(int tensor, const void* src, size_t bytes, int slot,
                           cudaStream_t stream) {
  size_t s = size_t(slot);
  HGP_CUDA_TRY(cudaEventSynchronize(stagingRead_[s]));
  void* staged = staging_.at(tensor)[s];
  copyToStaging(staged, src, bytes);
  HGP_CUDA_TRY(
      cudaMemcpyAsync(deviceIn_.at(tensor)[s], staged, bytes, cudaMemcpyHostToDevice, stream));
  HGP_CUDA_TRY(cudaEventRecord(stagingRead_[s], stream));
  return Status::ok();
}

Status InputStaging::prefetch(int tensor, const void* src, size_t bytes, int slot) {
  size_t s = size_t(slot);
  HGP_CUDA_TRY(cudaEventSynchronize(stagingRead_[s]));
  copyToStaging(staging_.at(tensor)[s], src, bytes);
  return Status::ok();
}

Status InputStaging::forkCopies(const Plan& plan, const std::vector<int>& inputs, int next,
                                cudaStream_t main, bool capturing) {
  size_t n = size_t(next);
  HGP_CUDA_TRY(cudaEventRecord(fork_, main));
  HGP_CUDA_TRY(cudaStreamWaitEvent(copyStream_, fork_, 0));
  for (int t : inputs)
    HGP_CUDA_TRY(cudaMemcpyAsync(deviceIn_.at(t)[n], staging_.at(t)[n],
                                 size_t(plan.tensors[size_t(t)].bytes()), cudaMemcpyHostToDevice,
                                 copyStream_));
  HGP_CUDA_TRY(cudaEventRecordWithFlags(stagingRead_[n], copyStream_,
                                        capturing ? cudaEventRecordExternal : 0));
  HGP_CUDA_TRY(cudaEventRecord(join_, copyStream_));
  return Status::ok();
}

Status InputStaging::joinCopies(cudaStream_t main) {
  HGP_CUDA_TRY(cudaStreamWaitEvent(main, join_, 0));
  return Status::ok();
}

void InputStaging::copyToStaging(void* dst, const void* src, size_t bytes) {
  // One thread's memcpy (about 10 GB/s) would take longer than a GPU step for large batches.
  constexpr size_t kChunk = size_t(4) << 20;
  if (bytes < 2 * kChunk) {
    std::memcpy(dst, src, bytes);
    return;
  }
  if (!copyPool_) copyPool_ = std::make_unique<ThreadPool>(4);
  copyPool_->parallelFor(int64_t((bytes + kChunk - 1) / kChunk), 1, [&](int64_t b, int64_t e) {
    size_t from = size_t(b) * kChunk, to = std::min(bytes, size_t(e) * kChunk);
    std::memcpy(static_cast<uint8_t*>(dst) + from, static_cast<const uint8_t*>(src) + from,
                to - from);
  });
}

} // namespace hgp::cuda
