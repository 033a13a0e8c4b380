// ThreadPool.h - a fixed pool of worker threads with a blocking parallel-for.
//
// The CPU reference backend parallelizes its heavy loops (GEMM tiles, im2col, per-channel
// reductions) with parallelFor. It is a plain std::thread pool rather than OpenMP so that the
// generated executable links it statically and runs on any Linux machine.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hgp {

class ThreadPool {
public:
  /// Starts `threads` workers; 0 means one per hardware thread. The calling thread also works.
  explicit ThreadPool(unsigned threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Runs fn(begin, end) over [0, n) in contiguous chunks of at least `grain` items, on all
  /// workers and the caller, and returns when every chunk is done. Nested calls run serially.
  void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  unsigned size() const { return unsigned(workers_.size()) + 1; }

  /// The process-wide pool, sized from HGP_THREADS or the hardware.
  static ThreadPool& global();

private:
  void workerLoop();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t jobN_ = 0, jobChunk_ = 0, nextChunk_ = 0, numChunks_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

/// Shorthand for ThreadPool::global().parallelFor.
inline void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  ThreadPool::global().parallelFor(n, grain, fn);
}

} // namespace hgp
