// Distributed.h - the runner's side of data parallelism: who am I, how do the ranks meet, and
// what happens when one of them fails (docs/distributed.md).
//
// Ranks are processes, one per GPU. They are started either by the executable itself
// (`EXE --gpus N`, Launcher.h), which passes HGPC_RANK, HGPC_RANKS, HGPC_LOCAL_RANK and
// HGPC_RENDEZVOUS, or by an MPI launcher (`mpirun -np N EXE [--rendezvous DIR] ...`), whose
// environment says the rank (OpenMPI's OMPI_COMM_WORLD_*, or PMI_RANK/PMI_SIZE). Rank 0's NCCL
// id reaches the other ranks in one of two ways. With a rendezvous directory (always under
// --gpus; under mpirun when --rendezvous is given) it travels through a file every rank can read
// (the shared-file rendezvous), which needs no MPI library at all. Under mpirun without
// --rendezvous it is broadcast with MPI, through an MPI library loaded at run time
// (MpiBootstrap.h); MPI is never linked. After that, NCCL is the only transport.
//
// The watchdog turns a failed or stuck peer into an exit, not a hang: it polls the backend's
// asynchronous collective errors and the time since the last completed step, and on either it
// names the rank and the reason, aborts the collectives and exits with code 9 (peer failed).
#pragma once

#include "runtime/Backend.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace hgp {

struct RankEnv {
  int rank = 0, ranks = 1, localRank = 0;
  std::string launcher = "none"; ///< "none", "hgpc" (--gpus), "openmpi" or "pmi".
  std::string rendezvous;        ///< The directory the NCCL id is shared through, if any.
  /// More than one rank, started by an MPI launcher, and no rendezvous directory: the NCCL id is
  /// broadcast with MPI (MpiBootstrap).
  bool idOverMpi = false;
  std::string jobKey;            ///< A per-launch id from the launcher, to name the id file.
};

/// Reads the rank from the environment. `rendezvousFlag` (--rendezvous) overrides
/// HGPC_RENDEZVOUS; an MPI launch of more than one rank without one sets idOverMpi. Errors are
/// usage errors.
Expected<RankEnv> detectRankEnv(const std::string& rendezvousFlag);

/// The shared-file rendezvous: rank 0 writes `id` atomically to a file in env.rendezvous; the
/// other ranks wait for it (ignoring files older than this process by more than a minute, left
/// by an earlier run) for at most `timeoutSeconds` and read it into `id`.
Status shareThroughFile(const RankEnv& env, std::string& id, double timeoutSeconds);
/// Removes rank 0's id file once every rank has joined (rank 0 only; others do nothing).
void removeRendezvousFile(const RankEnv& env);

/// The file a rank writes for a per-process output such as --trace or --profile: `path` itself
/// with one rank, else "rankR" inserted before the extension (trace.json -> trace.rank1.json,
/// records -> records.rank1), so that the ranks of one run do not overwrite each other's file.
std::string perRankPath(const std::string& path, const RankEnv& env);

class Watchdog {
public:
  /// Starts watching: every 200 ms, the backend's collective error; and whether beat() was
  /// called within the last `timeoutSeconds`.
  Watchdog(Backend& backend, int rank, double timeoutSeconds);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Progress was made (a step or an evaluation batch completed on the host side).
  void beat();

private:
  void loop();
  [[noreturn]] void fail(const std::string& why);

  Backend& backend_;
  int rank_;
  double timeout_;
  std::atomic<int64_t> lastBeat_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

} // namespace hgp
