#include "runtime/runner/Progress.h"

#include <cstdio>
#include <unistd.h>

namespace hgp {

namespace {
std::string clock(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "--:--";
  int64_t s = int64_t(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(s / 3600),
                               (long long)(s / 60 % 60), (long long)(s % 60));
  else std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)(s / 60), (long long)(s % 60));
  return buf;
}
} // namespace

Progress::Progress(ProgressMode mode, int64_t totalSteps) : mode_(mode), total_(totalSteps) {
  if (mode_ == ProgressMode::Auto) mode_ = isatty(STDERR_FILENO) ? ProgressMode::Bar : ProgressMode::Plain;
  start_ = lastPrint_ = std::chrono::steady_clock::now();
}

void Progress::update(int64_t step, int64_t epoch, double loss, double ips) {
  if (mode_ == ProgressMode::None) return;
  auto now = std::chrono::steady_clock::now();
  double elapsed = std::chrono::duration<double>(now - start_).count();
  double eta = step > 0 ? elapsed / double(step) * double(total_ - step) : -1;
  if (mode_ == ProgressMode::Bar) {
    if (std::chrono::duration<double>(now - lastPrint_).count() < 0.1 && step < total_) return;
    lastPrint_ = now;
    constexpr int kWidth = 24;
    int filled = total_ > 0 ? int(kWidth * step / total_) : 0;
    std::string bar(size_t(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r[%s] step %lld/%lld  epoch %lld  loss %.4f  %.0f img/s  ETA %s\x1b[K",
                 bar.c_str(), (long long)step, (long long)total_, (long long)epoch + 1, loss, ips,
                 clock(eta).c_str());
    live_ = true;
    return;
  }
  bool due = std::chrono::duration<double>(now - lastPrint_).count() >= 10 ||
             (total_ >= 20 && step * 20 / total_ != lastPlainStep_ * 20 / total_) ||
             step == total_;
  if (!due) return;
  lastPrint_ = now;
  lastPlainStep_ = step;
  std::fprintf(stderr, "step %lld/%lld  epoch %lld  loss %.4f  %.0f img/s  elapsed %s  ETA %s\n",
               (long long)step, (long long)total_, (long long)epoch + 1, loss, ips,
               clock(elapsed).c_str(), clock(eta).c_str());
}

void Progress::note(const std::string& message) {
  if (live_) std::fprintf(stderr, "\r\x1b[K");
  std::fprintf(stderr, "%s\n", message.c_str());
}

void Progress::finish() {
  if (live_) std::fprintf(stderr, "\n");
  live_ = false;
}

} // namespace hgp
