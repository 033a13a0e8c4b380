// Backend.h - what a backend offers the runner: load a plan, run its programs, move tensors.
//
// The CPU reference backend (runtime/cpu) and the CUDA backend implement this interface. Both
// execute the same plan; the CPU one ignores streams and is the oracle for every GPU test.
#pragma once

#include "runtime/plan/Plan.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

namespace hgp {

class Backend {
public:
  virtual ~Backend() = default;

  /// "cpu" or "cuda".
  virtual const char* name() const = 0;

  /// Allocates both storage regions and gives every persistent tensor its first value from
  /// its init rule. The plan and the data must outlive the backend.
  virtual Status load(const Plan& plan, const InitData& data) = 0;

  /// Runs one program ("forward", "train" or "eval") to completion.
  virtual Status run(const std::string& program) = 0;

  /// Copies a tensor's bytes out to host memory (`dst` holds tensor.bytes()).
  virtual Status read(int tensor, void* dst) = 0;
  /// Copies host bytes into a tensor.
  virtual Status write(int tensor, const void* src) = 0;

  /// Whether prefetch() is offered. A backend that offers it moves the next batch to the device
  /// while the current step computes.
  virtual bool supportsPrefetch() const { return false; }
  /// Like write() of an input tensor, but for the run after the next one: the next run copies
  /// these bytes to the device alongside its own work. The next run's own inputs must already be
  /// in place (written, or prefetched before the previous run).
  virtual Status prefetch(int tensor, const void* src) {
    (void)tensor, (void)src;
    return Status(ErrorCode::Internal, std::string(name()) + " does not prefetch");
  }

  /// Data parallelism: an error the collectives reported asynchronously (a peer rank failed),
  /// or ok. The runner's watchdog polls it from another thread.
  virtual Status collectiveError() { return Status::ok(); }
  /// Data parallelism: aborts the collectives so that nothing waits for a dead peer. Called
  /// from the watchdog thread, right before the process exits.
  virtual void abortCollectives() {}

  /// Device memory this backend holds (storage regions, scratch, staging), in bytes; 0 on the CPU.
  virtual int64_t deviceMemoryBytes() const { return 0; }
};

/// How a GPU backend should behave.
struct BackendOptions {
  int device = 0;
  /// Only deterministic algorithms: two runs give bit-identical results.
  bool deterministic = false;
  /// Execute every step op by op and never capture a CUDA graph (for tests comparing the two).
  bool eager = false;
  /// GPU: let a convolution with an epilogue (bias, Relu) run as one cuDNN fused graph where
  /// timing shows it faster than the convolution followed by hgpc's epilogue kernel.
  bool cudnnFusion = true;
  /// Where algorithm choices are remembered ("" = the default location).
  std::string tuningCache;
  /// Print what the backend chose and timed.
  bool verbose = false;
  /// GPU: after a program's graph is captured, run it once op by op with an event after each
  /// launch and append every launch's time to this file (tab-separated: program, launch, op,
  /// source location, ms). Off when empty.
  std::string opTimes;
  /// Data parallelism (docs/distributed.md): this process is rank `rank` of `ranks`. With more
  /// than one rank the backend joins an NCCL communicator; `shareUniqueId` publishes rank 0's
  /// id (rank 0 passes it in) or fetches it (the other ranks get it out).
  int rank = 0, ranks = 1;
  std::function<Status(std::string& id)> shareUniqueId;
  /// GPU: record one run of the train program (its third, so algorithms are chosen and the
  /// graph is captured) through CUPTI and write every kernel with its step, launch shape and
  /// time to this records file (runtime/profile/Records.h, docs/profiling.md). Off when empty.
  std::string profile;
  /// GPU: write that run as a Chrome trace (JSON) to this file. Off when empty.
  std::string trace;
};

/// The CPU reference backend.
std::unique_ptr<Backend> createCpuBackend();

/// The CUDA backend, or ErrorCode::Device saying why none is usable (no driver, no device, no
/// cuDNN or cuBLAS, or a build without CUDA).
Expected<std::unique_ptr<Backend>> createCudaBackend(const BackendOptions& options);

} // namespace hgp
