#include "runtime/runner/Launcher.h"

#include "runtime/support/Status.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace hgp {

namespace {

std::vector<pid_t> gChildren;

void forward(int sig) {
  for (pid_t p : gChildren)
    if (p > 0) kill(p, sig);
}

std::string describeStatus(int status) {
  if (WIFEXITED(status)) {
    int code = WEXITSTATUS(status);
    return "exit code " + std::to_string(code) + " (" + errorCodeName(ErrorCode(code)) + ")";
  }
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

} // namespace

std::vector<std::string> argsWithoutGpus(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--gpus") {
      ++i;
      continue;
    }
    if (a.rfind("--gpus=", 0) == 0) continue;
    out.push_back(a);
  }
  return out;
}

int launchLocalRanks(const std::string& exe, const std::vector<std::string>& args, int gpus) {
  char dirTemplate[] = "/tmp/hgpc-rendezvous-XXXXXX";
  if (!mkdtemp(dirTemplate)) {
    std::fprintf(stderr, "error: i/o error: cannot create a rendezvous directory in /tmp: %s\n",
                 std::strerror(errno));
    return exitCodeFor(ErrorCode::Io);
  }
  std::string dir = dirTemplate;
  struct sigaction sa {};
  sa.sa_handler = forward;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  pid_t parent = getpid();
  gChildren.assign(size_t(gpus), -1);
  for (int r = 0; r < gpus; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      std::fprintf(stderr, "error: device error: cannot start rank %d: %s\n", r,
                   std::strerror(errno));
      forward(SIGKILL);
      while (wait(nullptr) > 0) {
      }
      return exitCodeFor(ErrorCode::Device);
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(exitCodeFor(ErrorCode::PeerFailed));
      setenv("HGPC_RANK", std::to_string(r).c_str(), 1);
      setenv("HGPC_RANKS", std::to_string(gpus).c_str(), 1);
      setenv("HGPC_LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("HGPC_RENDEZVOUS", dir.c_str(), 1);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(exe.c_str()));
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(exe.c_str(), argv.data());
      std::fprintf(stderr, "error: cannot start rank %d (%s): %s\n", r, exe.c_str(),
                   std::strerror(errno));
      _exit(exitCodeFor(ErrorCode::Device));
    }
    gChildren[size_t(r)] = pid;
  }
  int result = 0, running = gpus;
  bool stopping = false;
  int graceTicks = 0;
  while (running > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, stopping ? WNOHANG : 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pid == 0) { // stopping, nobody exited yet: wait up to 10 s, then kill
      usleep(100 * 1000);
      if (++graceTicks == 100) forward(SIGKILL);
      continue;
    }
    int rank = -1;
    for (int r = 0; r < gpus; ++r)
      if (gChildren[size_t(r)] == pid) rank = r, gChildren[size_t(r)] = -1;
    if (rank < 0) continue;
    --running;
    bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (failed && !stopping) {
      std::fprintf(stderr, "error: rank %d of %d failed (%s); stopping the other ranks\n", rank,
                   gpus, describeStatus(status).c_str());
      result = WIFEXITED(status) ? WEXITSTATUS(status) : exitCodeFor(ErrorCode::PeerFailed);
      stopping = true;
      forward(SIGTERM);
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return result;
}

} // namespace hgp
