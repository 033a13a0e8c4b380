// Launcher.h - `EXE --gpus N`: one process per local GPU, started by the executable itself.
//
// Processes rather than threads: every rank is then exactly the process an MPI launcher would
// start (one code path for both launches), each has its own CUDA context, allocator and NCCL
// state, and a rank that crashes, runs out of memory or is killed is a process the parent sees
// exit. The parent re-executes /proc/self/exe N times with HGPC_RANK, HGPC_RANKS,
// HGPC_LOCAL_RANK and HGPC_RENDEZVOUS (a fresh temporary directory for the shared-file
// rendezvous) in the environment, forwards SIGINT and SIGTERM, and when a rank exits with an
// error it names the rank, stops the others (SIGTERM, then SIGKILL after 10 s) and exits with
// that rank's exit code (9, peer failed, when the rank died of a signal). Children die with the
// parent (PR_SET_PDEATHSIG).
#pragma once

#include <string>
#include <vector>

namespace hgp {

/// Runs `args` (argv without the program name and without --gpus) as `gpus` ranks of
/// `exe`; returns the exit code for the parent process.
int launchLocalRanks(const std::string& exe, const std::vector<std::string>& args, int gpus);

/// argv[1..] without `--gpus N` / `--gpus=N`.
std::vector<std::string> argsWithoutGpus(int argc, char** argv);

} // namespace hgp
