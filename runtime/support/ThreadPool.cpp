#include "runtime/support/ThreadPool.h"

#include <algorithm>
#include <cstdlib>

namespace hgp {

namespace {
thread_local bool tInsideJob = false;
}

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool([] {
    const char* env = std::getenv("HGP_THREADS");
    return env ? unsigned(std::max(1, std::atoi(env))) : 0u;
  }());
  return pool;
}

void ThreadPool::workerLoop() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || (job_ && generation_ != seen); });
    if (stop_) return;
    seen = generation_;
    while (nextChunk_ < numChunks_) {
      int64_t c = nextChunk_++;
      const auto* fn = job_;
      int64_t b = c * jobChunk_, e = std::min(jobN_, b + jobChunk_);
      lock.unlock();
      tInsideJob = true;
      (*fn)(b, e);
      tInsideJob = false;
      lock.lock();
      if (--pending_ == 0) done_.notify_all();
    }
  }
}

void ThreadPool::parallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t maxChunks = (n + grain - 1) / grain;
  int64_t chunks = std::min<int64_t>(maxChunks, int64_t(size()) * 4);
  if (chunks <= 1 || workers_.empty() || tInsideJob) {
    fn(0, n);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  // Only one job at a time; a second caller from another thread waits its turn.
  done_.wait(lock, [&] { return job_ == nullptr; });
  job_ = &fn;
  jobN_ = n;
  jobChunk_ = (n + chunks - 1) / chunks;
  numChunks_ = (n + jobChunk_ - 1) / jobChunk_;
  nextChunk_ = 0;
  pending_ = numChunks_;
  ++generation_;
  wake_.notify_all();
  while (nextChunk_ < numChunks_) {
    int64_t c = nextChunk_++;
    int64_t b = c * jobChunk_, e = std::min(jobN_, b + jobChunk_);
    lock.unlock();
    tInsideJob = true;
    fn(b, e);
    tInsideJob = false;
    lock.lock();
    --pending_;
  }
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
  done_.notify_all();
}

} // namespace hgp
