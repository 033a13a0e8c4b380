// InputStaging.h - how a batch reaches the device while the previous step computes.
//
// Runs alternate between two slots, and every input tensor of the plan has a pinned staging
// buffer and a device buffer per slot (slot 0's device buffer is the tensor's place in the plan,
// slot 1's lies in one extra allocation). A run on slot s computes on the device buffers of s and,
// on a copy stream forked from the main stream inside its graph, copies staging s^1 to device
// s^1: the next batch, which the runner prefetch()ed before the run, moves while this step
// computes. write() instead stages and copies at once, before the next run. An event recorded
// after each copy out of a staging buffer lets the host refill it without waiting for anything
// else. InputStaging owns the buffers, the copy stream and the events, and frees them (after
// waiting for the copy stream) when it goes.
#pragma once

#include "runtime/cuda/DeviceLane.h"
#include "runtime/support/ThreadPool.h"

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace hgp::cuda {

/// The number of input slots runs alternate between.
constexpr int kSlots = 2;

class InputStaging {
public:
  InputStaging() = default;
  InputStaging(const InputStaging&) = delete;
  InputStaging& operator=(const InputStaging&) = delete;
  ~InputStaging();

  /// Creates the copy stream and the events.
  Status init();
  /// Pinned staging buffers and slot 1's device buffers for every Input tensor of `plan`;
  /// `address(t)` is tensor t's place in the plan (slot 0's device buffer).
  Status allocate(const Plan& plan, const std::function<uint8_t*(int)>& address);

  bool isInput(int tensor) const { return staging_.count(tensor) != 0; }
  /// The device buffer of input `tensor` in `slot`.
  uint8_t* deviceInput(int tensor, int slot) const { return deviceIn_.at(tensor)[size_t(slot)]; }
  /// Bytes of slot 1's device buffers.
  size_t spareBytes() const { return spareBytes_; }

  /// Backend::write of an input: waits for the last copy out of slot `slot`'s staging buffer,
  /// stages `src` there and copies it to the slot's device buffer on `stream`.
  Status write(int tensor, const void* src, size_t bytes, int slot, cudaStream_t stream);
  /// Backend::prefetch: stages `src` in slot `slot`'s staging buffer once its last copy is done.
  Status prefetch(int tensor, const void* src, size_t bytes, int slot);

  /// The start of a run: forks the copy stream from `main` and copies the staging buffers of
  /// slot `next` to its device buffers for `inputs`. `capturing`: inside a stream capture (the
  /// staging event is then recorded as an external event node, which the host can wait for).
  Status forkCopies(const Plan& plan, const std::vector<int>& inputs, int next, cudaStream_t main,
                    bool capturing);
  /// Recorded on the main stream where the copies fork; other lanes wait for it too.
  cudaEvent_t forkEvent() const { return fork_; }
  /// The end of a run: `main` waits for the copies.
  Status joinCopies(cudaStream_t main);

private:
  /// Host-to-pinned copy; several threads for large batches.
  void copyToStaging(void* dst, const void* src, size_t bytes);

  std::map<int, std::array<void*, kSlots>> staging_;
  std::map<int, std::array<uint8_t*, kSlots>> deviceIn_; ///< Each input's device buffer per slot.
  DeviceMemory spare_;                                   ///< Slot 1's device inputs.
  size_t spareBytes_ = 0;
  cudaStream_t copyStream_ = nullptr;
  /// Recorded after the last copy out of each staging buffer; fork_/join_ bracket the copy stream.
  cudaEvent_t stagingRead_[kSlots] = {nullptr, nullptr}, fork_ = nullptr, join_ = nullptr;
  std::unique_ptr<ThreadPool> copyPool_;
};

} // namespace hgp::cuda
