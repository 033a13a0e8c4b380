#include "tools/hgpc/Measure.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <csignal>
#include <filesystem>
#include <sys/wait.h>
#include <unistd.h>

namespace hgp {

namespace {

/// Runs `argv` with stdout and stderr into `log`; the exit status, -1 when it did not start or
/// was killed, -2 when it ran past `timeoutSeconds` (it is then killed).
int runLogged(const std::vector<std::string>& argv, const std::string& log, int timeoutSeconds) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    FILE* f = std::freopen(log.c_str(), "w", stdout);
    if (!f || dup2(fileno(stdout), 2) < 0) _exit(127);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  for (int waited = 0;; ++waited) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0) return -1;
    if (waited >= timeoutSeconds * 10) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -2;
    }
    usleep(100 * 1000);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// The last non-empty line of a file, for failure messages.
std::string lastLine(const std::string& path) {
  std::ifstream f(path);
  std::string line, last;
  while (std::getline(f, line))
    if (!line.empty()) last = line;
  return last.size() > 300 ? last.substr(0, 300) + "..." : last;
}

/// images_per_s of every training row of a metrics file, one per window.
std::vector<double> windows(const std::string& path) {
  std::ifstream f(path);
  std::vector<double> w;
  std::string line;
  const std::string key = "\"images_per_s\": ";
  while (std::getline(f, line)) {
    if (line.find("\"eval\"") != std::string::npos) continue;
    size_t at = line.find(key);
    if (at == std::string::npos) continue;
    double v = std::strtod(line.c_str() + at + key.size(), nullptr);
    if (v > 0 && (w.empty() || w.back() != v)) w.push_back(v);
  }
  return w;
}

} // namespace

Measurement measureConfiguration(CompileOptions o, const MeasureOptions& m) {
  Measurement r;
  auto failed = [&r](std::string why) {
    r.failure = std::move(why);
    return r;
  };
  std::string tag = precisionName(o.precision) + ("-b" + std::to_string(o.batch));
  std::string exe = m.workDir + "/" + tag, metrics = exe + ".jsonl", log = exe + ".log";
  o.kernels = CompileOptions::Kernels::Required;
  o.train.metricsRing = m.every;
  o.log = nullptr;
  Expected<Compilation> c = compileModel(o);
  if (!c) return failed("compile: " + c.status().message());
  Expected<Bundle> bundle = bundleCompilation(*c, o);
  if (!bundle) return failed("bundle: " + bundle.status().message());
  if (Status st = writeExecutable(m.runner, *bundle, exe); !st)
    return failed("write: " + st.message());
  int rc = runLogged({exe, "--data", "synthetic", "--steps", std::to_string(m.steps), "--device",
                      "cuda", "--hold-batch", "--metrics", metrics, "--progress", "none"},
                     log, m.timeoutSeconds);
  std::error_code ec;
  std::filesystem::remove(exe, ec); // the executables carry the weights: one at a time on disk
  if (rc == -2) return failed("timed out after " + std::to_string(m.timeoutSeconds) + " s");
  if (rc == 8) return failed("out of memory: " + lastLine(log));
  if (rc != 0) return failed("exit " + std::to_string(rc) + ": " + lastLine(log));
  std::vector<double> w = windows(metrics);
  if (w.size() < 3) return failed("too few metrics windows to leave out the warm-up");
  std::vector<double> times;
  for (size_t i = 2; i < w.size(); ++i) times.push_back(double(o.batch) / w[i]);
  std::sort(times.begin(), times.end());
  size_t n = times.size();
  r.stepSeconds = n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  r.ran = true;
  return r;
}

} // namespace hgp
