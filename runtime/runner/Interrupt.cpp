#include "runtime/runner/Interrupt.h"

#include <csignal>

namespace hgp {

namespace {

volatile std::sig_atomic_t gSignal = 0;

void onSignal(int sig) {
  if (gSignal != 0) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  gSignal = sig;
}

std::string shellQuote(const std::string& w) {
  if (!w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-_./:,=+@%") == std::string::npos)
    return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

} // namespace

void installInterruptHandlers() {
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int pendingInterrupt() { return gSignal; }

int interruptExitCode(int sig) { return 128 + sig; }

std::string resumeCommand(const std::vector<std::string>& argv, const std::string& checkpoint,
                          const std::string& budget) {
  std::string cmd;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    bool drop = false;
    for (const char* f : {"--resume", "--steps", "--epochs"}) {
      std::string flag = f;
      if (a == flag) drop = true, ++i; // and its value
      else if (a.rfind(flag + "=", 0) == 0) drop = true;
      if (drop) break;
    }
    if (!drop) cmd += (cmd.empty() ? "" : " ") + shellQuote(a);
  }
  return cmd + " --resume " + shellQuote(checkpoint) + " " + budget;
}

} // namespace hgp
