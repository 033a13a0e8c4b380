#include "runtime/runner/Distributed.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace hgp {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

Expected<int> envInt(const char* name) {
  const char* v = env(name);
  char* end = nullptr;
  long x = v ? std::strtol(v, &end, 10) : -1;
  if (!v || *end || x < 0 || x > 1 << 20)
    return Status(ErrorCode::Usage,
                  std::string("the environment variable ") + name +
                      (v ? " is not a rank number: '" + std::string(v) + "'" : " is not set"));
  return int(x);
}

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string idPath(const RankEnv& e) {
  std::string name = "hgpc-nccl-id";
  if (!e.jobKey.empty()) {
    name += '-';
    for (char c : e.jobKey) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  }
  return (std::filesystem::path(e.rendezvous) / name).string();
}

} // namespace

Expected<RankEnv> detectRankEnv(const std::string& rendezvousFlag) {
  RankEnv e;
  if (env("HGPC_RANK")) {
    e.launcher = "hgpc";
    HGP_ASSIGN_OR_RETURN(e.rank, envInt("HGPC_RANK"));
    HGP_ASSIGN_OR_RETURN(e.ranks, envInt("HGPC_RANKS"));
    HGP_ASSIGN_OR_RETURN(e.localRank, envInt("HGPC_LOCAL_RANK"));
    if (const char* d = env("HGPC_RENDEZVOUS")) e.rendezvous = d;
  } else if (env("OMPI_COMM_WORLD_RANK")) {
    e.launcher = "openmpi";
    HGP_ASSIGN_OR_RETURN(e.rank, envInt("OMPI_COMM_WORLD_RANK"));
    HGP_ASSIGN_OR_RETURN(e.ranks, envInt("OMPI_COMM_WORLD_SIZE"));
    HGP_ASSIGN_OR_RETURN(e.localRank, envInt("OMPI_COMM_WORLD_LOCAL_RANK"));
  } else if (env("PMI_RANK")) {
    e.launcher = "pmi";
    HGP_ASSIGN_OR_RETURN(e.rank, envInt("PMI_RANK"));
    HGP_ASSIGN_OR_RETURN(e.ranks, envInt("PMI_SIZE"));
    e.localRank = e.rank;
    for (const char* local : {"MPI_LOCALRANKID", "PMI_LOCAL_RANK"})
      if (env(local)) {
        HGP_ASSIGN_OR_RETURN(e.localRank, envInt(local));
        break;
      }
  }
  for (const char* key : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "PMI_JOBID", "SLURM_JOB_ID"})
    if (const char* v = env(key)) {
      e.jobKey = v;
      break;
    }
  if (!rendezvousFlag.empty()) e.rendezvous = rendezvousFlag;
  if (e.ranks < 1 || e.rank >= e.ranks)
    return Status(ErrorCode::Usage, "the launcher says rank " + std::to_string(e.rank) + " of " +
                                        std::to_string(e.ranks));
  if (e.ranks > 1 && e.rendezvous.empty() && (e.launcher == "openmpi" || e.launcher == "pmi"))
    e.idOverMpi = true;
  else if (e.ranks > 1 && e.rendezvous.empty())
    return Status(ErrorCode::Usage, "this is rank " + std::to_string(e.rank) + " of " +
                                        std::to_string(e.ranks) + " (launched by " + e.launcher +
                                        "); give --rendezvous DIR, a directory every rank can read "
                                        "(on several machines: a shared file system)");
  return e;
}

Status shareThroughFile(const RankEnv& e, std::string& id, double timeoutSeconds) {
  std::string path = idPath(e);
  if (e.rank == 0) {
    std::error_code ec;
    std::filesystem::create_directories(e.rendezvous, ec);
    std::string tmp = path + ".tmp." + std::to_string(getpid());
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(id.data(), std::streamsize(id.size()));
      if (!out.flush())
        return Status(ErrorCode::Io, "cannot write the rendezvous file '" + tmp + "'");
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      return Status(ErrorCode::Io,
                    "cannot create the rendezvous file '" + path + "': " + std::strerror(errno));
    return Status::ok();
  }
  // Files from an earlier launch are older than this process; a minute of slack covers clock
  // differences between machines sharing the file system.
  std::time_t started = std::time(nullptr) - 60;
  int64_t deadline = nowMs() + int64_t(timeoutSeconds * 1000);
  for (;;) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && st.st_mtime >= started) {
      std::ifstream in(path, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      id = ss.str();
      return Status::ok();
    }
    if (nowMs() > deadline)
      return Status(ErrorCode::PeerFailed, "rank " + std::to_string(e.rank) + " waited " +
                                               std::to_string(int(timeoutSeconds)) +
                                               " s for rank 0's NCCL id in '" + path +
                                               "'; did rank 0 start, and is the directory shared?");
    usleep(50 * 1000);
  }
}

std::string perRankPath(const std::string& path, const RankEnv& e) {
  if (e.ranks <= 1 || path.empty()) return path;
  std::filesystem::path p(path);
  std::string tag = ".rank" + std::to_string(e.rank);
  return (p.parent_path() / (p.stem().string() + tag + p.extension().string())).string();
}

void removeRendezvousFile(const RankEnv& e) {
  if (e.rank == 0 && e.ranks > 1 && !e.rendezvous.empty()) std::remove(idPath(e).c_str());
}

Watchdog::Watchdog(Backend& backend, int rank, double timeoutSeconds)
    : backend_(backend), rank_(rank), timeout_(timeoutSeconds), lastBeat_(nowMs()) {
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void Watchdog::beat() {
  lastBeat_ = nowMs();
}

void Watchdog::loop() {
  while (!stop_) {
    usleep(200 * 1000);
    if (stop_) return;
    Status st = backend_.collectiveError();
    if (!st) fail(st.message() + " (another rank probably failed)");
    double idle = double(nowMs() - lastBeat_) / 1000;
    if (idle > timeout_)
      fail("no step completed for " + std::to_string(int(idle)) + " s (--timeout " +
           std::to_string(int(timeout_)) + "); another rank probably failed or stopped");
  }
}

void Watchdog::fail(const std::string& why) {
  std::fprintf(stderr, "error: rank %d: %s; stopping this rank (the last checkpoint is kept)\n",
               rank_, why.c_str());
  std::fflush(stderr);
  backend_.abortCollectives();
  std::_Exit(exitCodeFor(ErrorCode::PeerFailed));
}

} // namespace hgp
