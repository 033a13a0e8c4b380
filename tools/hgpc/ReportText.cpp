// ReportText.cpp - the fixed-width tables of `hgpc compare` and `hgpc explore` (Report.h).
#include "tools/hgpc/Report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace hgp {

namespace {

std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string ms(double seconds) { return format("%.3f", seconds * 1e3); }

/// The group `name` of `groups`, or nullptr.
const ReportGroup* find(const std::vector<ReportGroup>& groups, const std::string& name) {
  for (const ReportGroup& g : groups)
    if (g.name == name) return &g;
  return nullptr;
}

/// Every group name of `which` over the models, by total time, largest first.
std::vector<std::string> groupNames(const std::vector<ConfigReport>& models,
                                    std::vector<ReportGroup> ConfigReport::*which) {
  std::map<std::string, double> total;
  std::vector<std::string> order;
  for (const ConfigReport& m : models)
    for (const ReportGroup& g : m.*which) {
      if (!total.count(g.name)) order.push_back(g.name);
      total[g.name] += g.seconds;
    }
  std::stable_sort(order.begin(), order.end(),
                   [&](const std::string& a, const std::string& b) { return total[a] > total[b]; });
  return order;
}

} // namespace

void printCompareTable(const std::vector<ConfigReport>& models, std::ostream& os) {
  if (models.empty()) return;
  const ConfigReport& first = models.front();
  os << format("compare %zu models, batch %lld, precision %s, target %s\n", models.size(),
               (long long)first.batch, first.precision.c_str(), first.target.c_str());
  size_t w = 12;
  for (const ConfigReport& m : models) w = std::max(w, m.model.size() + 2);
  int width = int(w);
  auto row = [&](const std::string& label, auto cell, const std::string& tail = "") {
    os << format("%-30s", label.c_str());
    for (const ConfigReport& m : models)
      os << format("%*s", width, m.error.empty() ? cell(m).c_str() : "-");
    os << (tail.empty() ? "" : "  " + tail) << "\n";
  };
  row("", [](const ConfigReport& m) { return m.model; });
  row("parameters", [](const ConfigReport& m) { return humanCount(double(m.parameters)); });
  row("FLOPs per step", [](const ConfigReport& m) { return humanCount(m.flops); });
  row("bytes moved per step", [](const ConfigReport& m) { return humanBytes(m.bytesMoved); });
  row("peak memory (plan arena)", [](const ConfigReport& m) { return humanBytes(double(m.arenaBytes())); });
  row("  weights and state", [](const ConfigReport& m) { return humanBytes(double(m.persistentBytes)); });
  row("  activations, gradients", [](const ConfigReport& m) { return humanBytes(double(m.transientBytes)); });
  row(format("fits %s (%s)", first.target.c_str(), humanBytes(double(first.memoryLimitBytes)).c_str()),
      [](const ConfigReport& m) { return std::string(m.fits ? "yes" : "NO"); });
  row("predicted step (ms)", [](const ConfigReport& m) { return ms(m.stepSeconds); });
  row("predicted images/s", [](const ConfigReport& m) { return format("%.0f", m.imagesPerSecond()); });
  // Per op family and per phase: each model's time and share, and the cheaper model.
  auto breakdown = [&](const char* title, std::vector<ReportGroup> ConfigReport::*which) {
    os << title << "\n";
    for (const std::string& name : groupNames(models, which)) {
      const ConfigReport* cheapest = nullptr;
      double least = 0, most = 0;
      for (const ConfigReport& m : models) {
        if (!m.error.empty()) continue;
        const ReportGroup* g = find(m.*which, name);
        double s = g ? g->seconds : 0;
        if (!cheapest || s < least) cheapest = &m, least = s;
        most = std::max(most, s);
      }
      // Within 5% (or a microsecond) of each other: neither is cheaper; the cheaper side lists
      // every model within that of the least.
      auto near = [&](double s) { return s - least <= std::max(1e-6, 0.05 * most); };
      std::string verdict;
      if (cheapest && models.size() > 1 && near(most)) verdict = "about equal";
      else if (cheapest && models.size() > 1)
        for (const ConfigReport& m : models) {
          const ReportGroup* g = m.error.empty() ? find(m.*which, name) : nullptr;
          if (m.error.empty() && near(g ? g->seconds : 0))
            verdict += (verdict.empty() ? "cheaper: " : ", ") + m.model;
        }
      row("  " + name,
          [&](const ConfigReport& m) {
            const ReportGroup* g = find(m.*which, name);
            double s = g ? g->seconds : 0;
            return format("%s %3.0f%%", ms(s).c_str(),
                          m.serialSeconds > 0 ? 100 * s / m.serialSeconds : 0.0);
          },
          verdict);
    }
  };
  breakdown("time per op family (ms, share of the one-stream step)", &ConfigReport::families);
  breakdown("time per phase (ms, share of the one-stream step)", &ConfigReport::phases);
  for (const ConfigReport& m : models)
    if (!m.error.empty()) os << "error: " << m.model << ": " << m.error << "\n";
}

void printExploreTable(const std::vector<ConfigReport>& configs,
                       const std::vector<std::pair<std::string, int64_t>>& largestBatch,
                       std::ostream& os) {
  if (configs.empty()) return;
  const ConfigReport& first = configs.front();
  bool measured = false;
  for (const ConfigReport& r : configs) measured |= r.measured.has_value();
  os << format("explore %s on %s: memory limit %s (the plan's arena plus %s for the runtime must "
               "fit)\n",
               first.model.c_str(), first.target.c_str(),
               humanBytes(double(first.memoryLimitBytes)).c_str(),
               humanBytes(double(kRuntimeReserveBytes)).c_str());
  os << "  precision  batch   step_ms   images/s  peak_memory  fits";
  if (measured) os << "  measured_ms  measured_img/s   error";
  os << "\n";
  int best = bestFitting(configs);
  for (size_t i = 0; i < configs.size(); ++i) {
    const ConfigReport& r = configs[i];
    if (!r.error.empty()) {
      os << format("  %-9s %6lld  error: %s\n", r.precision.c_str(), (long long)r.batch, r.error.c_str());
      continue;
    }
    bool largest = false;
    for (const auto& [p, b] : largestBatch) largest |= p == r.precision && b == r.batch;
    os << format("  %-9s %6lld %9.3f %10.0f %12s  %-3s", r.precision.c_str(), (long long)r.batch,
                 r.stepSeconds * 1e3, r.imagesPerSecond(),
                 humanBytes(double(r.arenaBytes())).c_str(), r.fits ? "yes" : "no");
    if (measured) {
      if (!r.measured) os << format("  %11s  %14s  %6s", "-", "-", "-");
      else if (!r.measured->ran) os << "  not run: " << r.measured->failure;
      else
        os << format("  %11.3f  %14.0f  %+5.1f%%", r.measured->stepSeconds * 1e3,
                     double(r.batch) / r.measured->stepSeconds, 100 * *r.predictionError());
    }
    if (int(i) == best) os << "  <- best that fits";
    if (largest) os << "  <- largest batch that fits";
    os << "\n";
  }
  if (best >= 0) {
    const ConfigReport& b = configs[size_t(best)];
    bool m = b.measured && b.measured->ran;
    os << format("best that fits: %s batch %lld, %.0f images/s (%s)\n", b.precision.c_str(),
                 (long long)b.batch,
                 m ? double(b.batch) / b.measured->stepSeconds : b.imagesPerSecond(),
                 m ? "measured" : "predicted");
  } else if (measured && std::any_of(configs.begin(), configs.end(),
                                      [](const ConfigReport& r) { return r.fits; })) {
    os << "best that fits: none, no configuration that fits ran\n";
  } else {
    os << "best that fits: none of these configurations fits\n";
  }
  for (const auto& [p, b] : largestBatch) {
    if (b == 0) os << format("largest batch that fits (%s): none, not even batch 1\n", p.c_str());
    else os << format("largest batch that fits (%s): %lld\n", p.c_str(), (long long)b);
  }
  if (std::optional<double> mae = meanAbsoluteError(configs)) {
    int n = 0;
    for (const ConfigReport& r : configs) n += r.predictionError().has_value();
    os << format("mean absolute error of the predicted step time: %.1f%% over %d measured "
                 "configurations\n", 100 * *mae, n);
  }
}

} // namespace hgp
