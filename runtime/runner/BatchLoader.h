// BatchLoader.h - batches from a Dataset, prepared on a background thread.
//
// A loader thread fills the next batches while the current step runs (two in flight), so the
// backend does not wait for the host to decode and convert data. The order is deterministic:
// with shuffling, epoch e uses a permutation drawn from (seed, e) by a portable generator, so a
// resumed run sees exactly the batches the uninterrupted run would have. Training drops the
// last partial batch (every step has the compiled batch size); evaluation pads it and reports
// how many rows are real. Data parallelism (docs/distributed.md): with `ranks` > 1, batch k of
// rank r is rows (k * ranks + r) * batch ... + batch of the epoch's order, so the ranks read
// disjoint shards whose union, step by step, is the global batch a single process with batch
// `batch * ranks` would read. Batches are recycled: fresh memory costs a page fault per 4 KiB, which
// on a large batch (77 MB for ResNet at 224x224, batch 128) takes longer than the GPU step.
#pragma once

#include "runtime/runner/Dataset.h"
#include "runtime/support/ThreadPool.h"

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace hgp {

struct Batch {
  int64_t epoch = 0, index = 0; ///< Which epoch, and which batch within it.
  int64_t valid = 0;            ///< Real rows (the rest repeat the last real sample).
  std::vector<float> images;
  std::vector<int64_t> labels;
  /// For a --pixels u8 plan (Dataset::givesPixels), instead of `images`: 8-bit N x H x W x C
  /// pixels and a flip flag per row.
  std::vector<uint8_t> pixels, flips;
  /// For --data-on-device (DeviceData.h), instead of pixels: the rows' sample indices.
  std::vector<int64_t> rows;
  /// Not ok when a sample could not be read (a corrupt image under --bad-images fail).
  Status status;
};

class BatchLoader {
public:
  /// `dropLast`: training mode (full batches only). Starts producing at (epoch, index). This
  /// loader reads rank `rank`'s shard of `ranks` (training mode only). `threads` fill a batch
  /// of decoded images (Dataset::decodes) together; 0 means all cores but one. With
  /// `residentLabels` (--data-on-device, the data set's labels) a batch holds only its rows'
  /// sample indices (Batch::rows) and labels: the device gathers the pixels itself.
  BatchLoader(const Dataset& data, int64_t batch, bool shuffle, uint64_t seed, bool dropLast,
              int64_t epoch = 0, int64_t index = 0, int rank = 0, int ranks = 1,
              unsigned threads = 0, const std::vector<int64_t>* residentLabels = nullptr);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  int64_t batchesPerEpoch() const { return perEpoch_; }
  /// The next batch, in order; blocks until it is ready.
  std::unique_ptr<Batch> next();
  /// Hands a batch back for reuse once its contents have been consumed.
  void recycle(std::unique_ptr<Batch> b);

private:
  void produce();
  /// Fills batch `index` of `epoch`, from `order` or, for streamed data, from `stream`.
  void fill(Batch& b, int64_t epoch, int64_t index, const std::vector<int64_t>& order,
            SampleStream* stream);

  const Dataset& data_;
  int64_t batch_, perEpoch_;
  bool shuffle_, dropLast_;
  uint64_t seed_;
  int64_t epoch_, index_;
  int rank_, ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Batch>> ready_, free_;
  std::unique_ptr<ThreadPool> pool_; ///< Fills large batches in parallel.
  std::vector<int64_t> streamIds_;   ///< The batch's samples, from a SampleStream.
  const std::vector<int64_t>* resident_ = nullptr;
  bool stop_ = false;
  std::thread thread_;
};

/// The sample order of one epoch: the identity, or a Fisher-Yates shuffle seeded by (seed, epoch)
/// with SplitMix64, which gives the same order on every platform.
std::vector<int64_t> epochOrder(int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

} // namespace hgp
