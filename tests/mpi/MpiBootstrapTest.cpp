// MpiBootstrapTest.cpp - the MPI broadcast of the NCCL id (runtime/runner/MpiBootstrap.h) under
// a real mpirun, without a GPU.
//
// Run without arguments it is the driver: it starts itself as 2 ranks with
// `mpirun --oversubscribe -np 2 SELF rank ...` (plus --allow-run-as-root as root) and checks
// what the ranks print. It exits 77 (skipped) when there is no mpirun on PATH (or in $MPIRUN).
//
//  1. delivery: rank 0 draws 128 random bytes (fresh every run), broadcasts them through
//     MpiBootstrap, and both ranks print the byte count and a digest. Both ranks must report,
//     with the same digest, so the test cannot pass on bytes that never travelled (rank 1 starts
//     with none, and a constant would not match a fresh draw).
//  2. mismatch: the ranks claim 3 ranks; MpiBootstrap::start must refuse with a usage error
//     that names both sizes, and mpirun must fail.
//  3. abort: rank 0 calls MpiBootstrap::abort(5) while rank 1 waits in a broadcast rank 0 never
//     starts; mpirun must end with a non-zero code within seconds, not hang until the timeout.
#include "runtime/runner/MpiBootstrap.h"
#include "runtime/runner/Distributed.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <regex>
#include <string>

namespace {

using hgp::MpiBootstrap;

std::string hex64(uint64_t x) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

/// FNV-1a, 64 bits.
uint64_t digest(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

int rankMain(int argc, char** argv) {
  int expectRanks = -1, failRank = -1;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--expect-ranks")) expectRanks = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--fail-rank")) failRank = std::atoi(argv[i + 1]);
  }
  auto env = hgp::detectRankEnv("");
  if (!env) {
    std::printf("rank ?: %s\n", env.status().toString().c_str());
    return hgp::exitCodeFor(env.status().code());
  }
  if (!env->idOverMpi) {
    std::printf("rank %d: detectRankEnv did not choose the MPI broadcast (launcher %s)\n",
                env->rank, env->launcher.c_str());
    return 1;
  }
  auto mpi =
      MpiBootstrap::start(env->launcher, env->rank, expectRanks > 0 ? expectRanks : env->ranks);
  if (!mpi) {
    std::printf("rank %d: %s\n", env->rank, mpi.status().toString().c_str());
    std::fflush(stdout);
    return hgp::exitCodeFor(mpi.status().code());
  }
  std::string bytes;
  if (env->rank == 0) {
    std::random_device rd;
    for (int i = 0; i < 128; ++i) bytes += char(rd() & 0xff);
  }
  if (hgp::Status st = (*mpi)->broadcast(bytes); !st) {
    std::printf("rank %d: %s\n", env->rank, st.toString().c_str());
    return hgp::exitCodeFor(st.code());
  }
  std::printf("rank %d of %d: %s %zu bytes, digest %s, over %s\n", env->rank, env->ranks,
              env->rank == 0 ? "sent" : "received", bytes.size(), hex64(digest(bytes)).c_str(),
              (*mpi)->library().c_str());
  std::fflush(stdout);
  if (failRank >= 0) {
    if (env->rank == failRank) (*mpi)->abort(5);
    std::string more = "never completed";
    hgp::Status st = (*mpi)->broadcast(more); // the failed rank never starts this one
    std::printf("rank %d: the second broadcast returned (%s)\n", env->rank, st.toString().c_str());
    return 1;
  }
  if (hgp::Status st = (*mpi)->finalize(); !st) {
    std::printf("rank %d: %s\n", env->rank, st.toString().c_str());
    return hgp::exitCodeFor(st.code());
  }
  return 0;
}

std::string findMpirun() {
  if (const char* m = std::getenv("MPIRUN"); m && *m) return access(m, X_OK) == 0 ? m : "";
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string cand = p.substr(start, end - start) + "/mpirun";
    if (end > start && access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return "";
}

struct Result {
  int code = -1;
  std::string out;
  double seconds = 0;
};

Result runCommand(const std::string& cmd) {
  Result r;
  auto t0 = std::chrono::steady_clock::now();
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
  int status = pclose(f);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

int failures = 0;
void check(bool ok, const std::string& what, const Result& r) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  if (!ok) {
    ++failures;
    std::printf("--- mpirun exit %d after %.1f s, output:\n%s---\n", r.code, r.seconds,
                r.out.c_str());
  }
}

int driverMain(const char* self) {
  std::string mpirun = findMpirun();
  if (mpirun.empty()) {
    std::printf("skipped: no mpirun on PATH (install openmpi-bin, or set MPIRUN)\n");
    return 77;
  }
  std::string base = "timeout -k 5 120 " + mpirun + (geteuid() == 0 ? " --allow-run-as-root" : "") +
                     " --oversubscribe -np 2 " + self + " rank";
  std::printf("using %s\n", mpirun.c_str());

  Result r = runCommand(base);
  std::smatch m0, m1;
  static const std::regex sent(
      R"(rank 0 of 2: sent (\d+) bytes, digest ([0-9a-f]{16}), over (.*))");
  static const std::regex got(R"(rank 1 of 2: received (\d+) bytes, digest ([0-9a-f]{16}))");
  bool have0 = std::regex_search(r.out, m0, sent), have1 = std::regex_search(r.out, m1, got);
  check(r.code == 0, "2 ranks exit 0", r);
  check(have0 && have1, "both ranks report", r);
  if (have0 && have1) {
    check(m0[1] == "128" && m1[1] == "128", "128 bytes on both ranks", r);
    check(m0[2] == m1[2], "rank 1's digest " + m1[2].str() + " equals rank 0's " + m0[2].str(), r);
    check(m0[2] != hex64(digest(std::string(128, '\0'))), "the bytes are not all zero", r);
    std::printf("library: %s\n", m0[3].str().c_str());
  }

  r = runCommand(base + " --expect-ranks 3");
  check(r.code != 0 && r.out.find("usage error") != std::string::npos &&
            r.out.find("of 2, but the launcher's environment says rank") != std::string::npos,
        "a size that disagrees with MPI's is a usage error naming both", r);

  r = runCommand(base + " --fail-rank 0");
  check(r.code != 0 && r.code != 124 && r.code != 137 && r.seconds < 60 &&
            r.out.find("the second broadcast returned") == std::string::npos,
        "a rank that aborts ends the job (mpirun exit " + std::to_string(r.code) + " after " +
            std::to_string(int(r.seconds + 0.5)) + " s)",
        r);
  std::printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}

} // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && !std::strcmp(argv[1], "rank")) return rankMain(argc, argv);
  if (std::getenv("OMPI_COMM_WORLD_RANK") || std::getenv("PMI_RANK")) {
    std::printf("run me without mpirun: I start mpirun myself\n");
    return 2;
  }
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = '\0';
  return driverMain(self);
}
