// Nccl.h - NCCL, loaded at run time, and the communicator of a data-parallel run.
//
// NCCL is the only transport hgpc uses between GPUs (docs/distributed.md). Like cuDNN and cuBLAS
// (CudaLibraries.h) it is not linked: Nccl.cpp defines the functions of Nccl.def as stubs that
// dlopen libnccl.so.2 on first use, and loadNccl() is called only when a run has more than one
// rank, so single-GPU executables never need the library.
//
// A Communicator is one rank's membership in the run: rank 0 makes the NCCL unique id, the
// runner's rendezvous (BackendOptions::shareUniqueId) hands it to the other ranks, and every rank
// joins with ncclCommInitRank on its own device. AllReduce executors enqueue on it (also inside
// stream capture: NCCL >= 2.9 supports CUDA graphs). asyncError() and abort() are for the
// runner's watchdog: a failed peer surfaces as an asynchronous error, and aborting makes blocked
// collectives return instead of hanging.
#pragma once

#include "runtime/support/Status.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

namespace hgp::cuda {

/// Loads libnccl.so.2 (once) and checks its version (2.13 or later: ncclAvg and ncclGetLastError).
Status loadNccl();

Status ncclError(ncclResult_t e, const char* call, const char* file, int line);

class Communicator {
public:
  /// Joins the run as `rank` of `ranks` on the current device. `share` publishes the unique id
  /// (rank 0) or fetches it (the others).
  static Expected<std::unique_ptr<Communicator>>
  create(int rank, int ranks, const std::function<Status(std::string& id)>& share);
  ~Communicator();

  ncclComm_t comm() const { return comm_; }
  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  /// An error NCCL reported asynchronously (a peer failed, a network error), or ok. Safe to call
  /// from another thread.
  Status asyncError();
  /// Aborts the communicator: collectives in flight return and the comm is unusable. Safe to
  /// call from another thread while the main thread waits on the GPU.
  void abort();

private:
  Communicator() = default;
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, ranks_ = 1;
  std::atomic<bool> aborted_{false};
};

} // namespace hgp::cuda

#define HGP_NCCL_TRY(call)                                                                         \
  do {                                                                                             \
    ncclResult_t _hgp_e = (call);                                                                  \
    if (_hgp_e != ncclSuccess) return ::hgp::cuda::ncclError(_hgp_e, #call, __FILE__, __LINE__);   \
  } while (0)
