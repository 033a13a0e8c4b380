#include "runtime/runner/MetricsLog.h"

#include <cerrno>
#include <cmath>
#include <cstring>

namespace hgp {

namespace {
std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
} // namespace

Expected<std::unique_ptr<MetricsLog>> MetricsLog::open(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return Status(ErrorCode::Io, "cannot write '" + path + "': " + std::strerror(errno));
  return std::unique_ptr<MetricsLog>(new MetricsLog(f));
}

MetricsLog::~MetricsLog() { std::fclose(f_); }

void MetricsLog::step(int64_t step, int64_t epoch, double loss, double lr, double ips, bool ok) {
  std::fprintf(f_, "{\"step\": %lld, \"epoch\": %lld, \"loss\": %s, \"lr\": %s, \"images_per_s\": %s, "
                   "\"ok\": %s}\n",
               (long long)step, (long long)epoch, num(loss).c_str(), num(lr).c_str(), num(ips).c_str(),
               ok ? "true" : "false");
  std::fflush(f_);
}

void MetricsLog::eval(int64_t step, int64_t epoch, double loss, double accuracy) {
  std::fprintf(f_, "{\"eval\": true, \"step\": %lld, \"epoch\": %lld, \"loss\": %s, \"accuracy\": %s}\n",
               (long long)step, (long long)epoch, num(loss).c_str(), num(accuracy).c_str());
  std::fflush(f_);
}

} // namespace hgp
