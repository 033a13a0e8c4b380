#include "runtime/runner/BatchLoader.h"

#include <numeric>

namespace hgp {

std::vector<int64_t> epochOrder(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (!shuffle) return order;
  uint64_t s = seed * 0x9E3779B97F4A7C15ull ^ (uint64_t(epoch) + 0x632BE59BD9B4E019ull);
  auto next = [&] {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (int64_t i = n - 1; i > 0; --i) {
    // Unbiased bounded draw by rejection.
    uint64_t bound = uint64_t(i) + 1, limit = UINT64_MAX - UINT64_MAX % bound, r;
    do r = next();
    while (r >= limit);
    std::swap(order[size_t(i)], order[size_t(r % bound)]);
  }
  return order;
}

BatchLoader::BatchLoader(const Dataset& data, int64_t batch, bool shuffle, uint64_t seed,
                         bool dropLast, int64_t epoch, int64_t index, int rank, int ranks,
                         unsigned threads, const std::vector<int64_t>* residentLabels)
    : data_(data), batch_(batch), shuffle_(shuffle), dropLast_(dropLast), seed_(seed),
      epoch_(epoch), index_(index), rank_(dropLast && !data.shardedByRank() ? rank : 0),
      ranks_(dropLast && !data.shardedByRank() ? ranks : 1) {
  perEpoch_ = dropLast ? data.size() / (batch * ranks_) : (data.size() + batch - 1) / batch;
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  resident_ = residentLabels;
  if (data.decodes() && !resident_) {
    // Decoding images: the loader thread and threads - 1 workers.
    unsigned n = threads ? threads : std::max(1u, cores - 1);
    if (n > 1) pool_ = std::make_unique<ThreadPool>(n - 1);
  } else if (batch * numElements(data.sampleShape()) * int64_t(sizeof(float)) >= (int64_t(4) << 20)) {
    // Batches of a few megabytes or more are filled by several threads.
    pool_ = std::make_unique<ThreadPool>(std::min(4u, std::max(1u, cores / 2)));
  }
  if (perEpoch_ > 0) thread_ = std::thread([this] { produce(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BatchLoader::fill(Batch& b, int64_t epoch, int64_t index, const std::vector<int64_t>& order,
                       SampleStream* stream) {
  int64_t per = numElements(data_.sampleShape());
  b.epoch = epoch;
  b.index = index;
  const bool u8 = data_.givesPixels();
  if (resident_) {
    // --data-on-device: the indices and labels only.
    int64_t first = (index * ranks_ + rank_) * batch_;
    b.valid = std::min(batch_, data_.size() - first);
    b.rows.resize(size_t(batch_));
    b.labels.resize(size_t(batch_));
    for (int64_t r = 0; r < batch_; ++r) {
      int64_t sample = order[size_t(first + std::min(r, b.valid - 1))];
      b.rows[size_t(r)] = sample;
      b.labels[size_t(r)] = (*resident_)[size_t(sample)];
    }
    b.status = Status::ok();
    return;
  }
  if (u8) {
    b.pixels.resize(size_t(batch_ * per));
    b.flips.resize(size_t(batch_));
  } else {
    b.images.resize(size_t(batch_ * per));
  }
  b.labels.resize(size_t(batch_));
  int64_t first = (index * ranks_ + rank_) * batch_;
  b.valid = std::min(batch_, data_.size() - first);
  b.status = Status::ok();
  // A streamed source (tar shards) reads the batch's samples in its own order first.
  std::vector<int64_t>& ids = streamIds_;
  ids.clear();
  if (stream) {
    b.status = stream->next(b.valid, ids);
    if (b.status && int64_t(ids.size()) < b.valid)
      b.status = Status(ErrorCode::Internal, data_.describe() + " streamed fewer samples than it holds");
    if (!b.status) return;
  }
  std::mutex failMu;
  auto rows = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t sample = stream ? ids[size_t(std::min(r, b.valid - 1))]
                              : order[size_t(first + std::min(r, b.valid - 1))];
      Status st = u8 ? data_.getPixels(sample, epoch, b.pixels.data() + r * per, &b.flips[size_t(r)],
                                       &b.labels[size_t(r)])
                     : data_.get(sample, epoch, b.images.data() + r * per, &b.labels[size_t(r)]);
      if (!st) {
        std::lock_guard<std::mutex> lock(failMu);
        if (b.status) b.status = std::move(st);
      }
    }
  };
  if (pool_) pool_->parallelFor(batch_, 1, rows);
  else rows(0, batch_);
}

void BatchLoader::produce() {
  int64_t epoch = epoch_, index = index_;
  // Streamed data (tar shards) of this rank only: batch `index` starts at row index * batch.
  std::unique_ptr<SampleStream> stream = data_.stream(shuffle_, seed_, epoch, index * batch_);
  std::vector<int64_t> order;
  if (!stream) order = data_.order(shuffle_, seed_, epoch);
  for (;;) {
    std::unique_ptr<Batch> b;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        b = std::move(free_.front());
        free_.pop_front();
      }
    }
    if (!b) b = std::make_unique<Batch>();
    fill(*b, epoch, index, order, stream.get());
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || ready_.size() < 2; });
      if (stop_) return;
      ready_.push_back(std::move(b));
    }
    cv_.notify_all();
    if (++index == perEpoch_) {
      index = 0;
      stream = data_.stream(shuffle_, seed_, ++epoch, 0);
      if (!stream) order = data_.order(shuffle_, seed_, epoch);
    }
  }
}

void BatchLoader::recycle(std::unique_ptr<Batch> b) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(b));
}

std::unique_ptr<Batch> BatchLoader::next() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !ready_.empty(); });
  auto b = std::move(ready_.front());
  ready_.pop_front();
  lock.unlock();
  cv_.notify_all();
  return b;
}

} // namespace hgp
