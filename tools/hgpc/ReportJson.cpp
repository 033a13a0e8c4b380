// ReportJson.cpp - `hgpc compare --json` and `hgpc explore --json` (Report.h). Numbers are in
// base units: seconds, bytes, FLOPs.
#include "tools/hgpc/Report.h"

#include <cmath>
#include <cstdio>

namespace hgp {

namespace {

std::string quote(const std::string& s) {
  std::string q = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') q += '\\', q += char(c);
    else if (c == '\n') q += "\\n";
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      q += buf;
    } else q += char(c);
  }
  return q + "\"";
}

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void groups(const char* key, const std::vector<ReportGroup>& gs, std::ostream& os) {
  os << ", " << quote(key) << ": [";
  for (size_t i = 0; i < gs.size(); ++i) {
    const ReportGroup& g = gs[i];
    os << (i ? ", " : "") << "{\"name\": " << quote(g.name) << ", \"seconds\": " << number(g.seconds)
       << ", \"flops\": " << number(g.flops) << ", \"result_bytes\": " << number(g.resultBytes)
       << ", \"steps\": " << g.steps << "}";
  }
  os << "]";
}

void config(const ConfigReport& r, int best, int index, const std::vector<std::pair<std::string, int64_t>>& largest,
            std::ostream& os) {
  os << "{\"model\": " << quote(r.model) << ", \"path\": " << quote(r.path)
     << ", \"batch\": " << r.batch << ", \"precision\": " << quote(r.precision)
     << ", \"target\": " << quote(r.target);
  if (!r.error.empty()) {
    os << ", \"error\": " << quote(r.error) << "}";
    return;
  }
  bool isLargest = false;
  for (const auto& [p, b] : largest) isLargest |= p == r.precision && b == r.batch;
  os << ", \"parameters\": " << r.parameters << ", \"flops\": " << number(r.flops)
     << ", \"bytes_moved\": " << number(r.bytesMoved)
     << ", \"persistent_bytes\": " << r.persistentBytes
     << ", \"transient_bytes\": " << r.transientBytes << ", \"arena_bytes\": " << r.arenaBytes()
     << ", \"needed_bytes\": " << r.neededBytes()
     << ", \"memory_limit_bytes\": " << r.memoryLimitBytes
     << ", \"fits\": " << (r.fits ? "true" : "false")
     << ", \"predicted_step_seconds\": " << number(r.stepSeconds)
     << ", \"predicted_serial_seconds\": " << number(r.serialSeconds)
     << ", \"predicted_images_per_second\": " << number(r.imagesPerSecond())
     << ", \"streams\": " << r.streams << ", \"best\": " << (best == index ? "true" : "false")
     << ", \"largest_fitting_batch\": " << (isLargest ? "true" : "false");
  if (r.measured) {
    os << ", \"measured\": {\"ran\": " << (r.measured->ran ? "true" : "false");
    if (r.measured->ran)
      os << ", \"step_seconds\": " << number(r.measured->stepSeconds)
         << ", \"images_per_second\": " << number(double(r.batch) / r.measured->stepSeconds)
         << ", \"error\": " << number(*r.predictionError());
    else os << ", \"failure\": " << quote(r.measured->failure);
    os << "}";
  }
  groups("families", r.families, os);
  groups("phases", r.phases, os);
  groups("stages", r.stages, os);
  groups("layers", r.layers, os);
  os << "}";
}

} // namespace

void writeReportJson(const std::string& command, const std::vector<ConfigReport>& configs,
                     const std::vector<std::pair<std::string, int64_t>>& largestBatch,
                     std::ostream& os) {
  int best = bestFitting(configs);
  os << "{\"command\": " << quote(command) << ", \"runtime_reserve_bytes\": " << kRuntimeReserveBytes
     << ",\n \"configurations\": [\n";
  for (size_t i = 0; i < configs.size(); ++i) {
    os << "  ";
    config(configs[i], best, int(i), largestBatch, os);
    os << (i + 1 < configs.size() ? ",\n" : "\n");
  }
  os << " ],\n \"largest_fitting_batch\": {";
  for (size_t i = 0; i < largestBatch.size(); ++i)
    os << (i ? ", " : "") << quote(largestBatch[i].first) << ": " << largestBatch[i].second;
  os << "}";
  if (std::optional<double> mae = meanAbsoluteError(configs))
    os << ",\n \"mean_absolute_error\": " << number(*mae);
  os << "\n}\n";
}

} // namespace hgp
