#include "tools/hgpc/Explore.h"

#include "tools/hgpc/Measure.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace hgp {

namespace {

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  for (size_t b = 0, e; b <= s.size(); b = e + 1) {
    e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    if (e > b) out.push_back(s.substr(b, e - b));
  }
  return out;
}

Expected<std::vector<int64_t>> parseBatches(const std::string& s) {
  std::vector<int64_t> out;
  for (const std::string& item : splitList(s)) {
    char* end = nullptr;
    long long v = std::strtoll(item.c_str(), &end, 10);
    if (!end || *end || v < 1 || v > (1 << 20))
      return Status(ErrorCode::Usage, "--batch: '" + item + "' is not a batch size (1 to 1048576) or 'auto'");
    out.push_back(v);
  }
  if (out.empty()) return Status(ErrorCode::Usage, "--batch: no batch sizes in '" + s + "'");
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Status writeHtml(const std::string& path, auto write) {
  std::ofstream f(path);
  if (!f) return Status(ErrorCode::Io, "--html: cannot write " + path);
  write(f);
  f.close();
  if (!f) return Status(ErrorCode::Io, "--html: writing " + path + " failed");
  return Status::ok();
}

/// The memory limit in bytes: --memory-limit, the device's free memory with --measure, or the
/// target's memory.
Expected<int64_t> memoryLimit(const ExploreArgs& a, const Target& t) {
  if (a.memoryLimitGiB < 0) return Status(ErrorCode::Usage, "--memory-limit must be positive");
  if (a.memoryLimitGiB > 0) return int64_t(a.memoryLimitGiB * double(int64_t(1) << 30));
  if (a.measure) {
    Expected<DeviceMemory> m = localDeviceMemory();
    if (!m) return Status(ErrorCode::Device, "--measure needs a GPU: " + m.status().message());
    return m->freeBytes;
  }
  return t.memoryBytes;
}

} // namespace

Status runCompare(const ExploreArgs& a, std::ostream& os) {
  if (a.models.size() < 2) return Status(ErrorCode::Usage, "compare needs two or more models");
  HGP_ASSIGN_OR_RETURN(Target target, resolveTarget(a.target));
  HGP_ASSIGN_OR_RETURN(int64_t limit, memoryLimit(a, target));
  std::vector<ConfigReport> reports;
  for (const std::string& m : a.models) {
    CompileOptions o = a.base;
    o.modelPath = m;
    HGP_ASSIGN_OR_RETURN(ConfigReport r, reportConfiguration(o, target, limit));
    reports.push_back(std::move(r));
  }
  if (a.json) writeReportJson("compare", reports, {}, os);
  else printCompareTable(reports, os);
  if (!a.html.empty())
    HGP_TRY(writeHtml(a.html, [&](std::ostream& f) { writeCompareHtml(reports, f); }));
  for (const ConfigReport& r : reports)
    if (!r.error.empty()) return Status(ErrorCode::InvalidModel, r.model + ": " + r.error);
  return Status::ok();
}

Status runExplore(const ExploreArgs& a, std::ostream& os) {
  if (a.models.size() != 1) return Status(ErrorCode::Usage, "explore takes one model");
  HGP_ASSIGN_OR_RETURN(Target target, resolveTarget(a.target));
  HGP_ASSIGN_OR_RETURN(int64_t limit, memoryLimit(a, target));
  bool autoBatches = a.batches == "auto";
  std::vector<int64_t> batches = {32, 64, 128, 256};
  if (!a.batches.empty() && !autoBatches) {
    HGP_ASSIGN_OR_RETURN(batches, parseBatches(a.batches));
  }
  std::vector<Precision> precisions = {a.base.precision};
  if (!a.precisions.empty()) precisions.clear();
  for (const std::string& name : splitList(a.precisions)) {
    Expected<Precision> p = parsePrecision(name);
    if (!p) return p.status();
    precisions.push_back(*p);
  }

  std::vector<ConfigReport> configs;
  std::vector<std::pair<std::string, int64_t>> largest;
  for (Precision p : precisions) {
    CompileOptions o = a.base;
    o.modelPath = a.models[0];
    o.precision = p;
    std::vector<ConfigReport> mine;
    if (!autoBatches)
      for (int64_t b : batches) {
        o.batch = b;
        HGP_ASSIGN_OR_RETURN(ConfigReport r, reportConfiguration(o, target, limit));
        mine.push_back(std::move(r));
      }
    std::vector<ConfigReport> searched = mine;
    HGP_ASSIGN_OR_RETURN(int64_t most, largestFittingBatch(o, target, limit, searched));
    largest.push_back({precisionName(p), most});
    if (autoBatches) {
      // Powers of two from 8 up to the largest that fits, and that one.
      for (const ConfigReport& r : searched)
        if (r.fits && (r.batch == most || (r.batch >= 8 && (r.batch & (r.batch - 1)) == 0)))
          mine.push_back(r);
      for (int64_t b = 8; b < most; b *= 2)
        if (std::none_of(mine.begin(), mine.end(), [&](const ConfigReport& r) { return r.batch == b; })) {
          o.batch = b;
          HGP_ASSIGN_OR_RETURN(ConfigReport r, reportConfiguration(o, target, limit));
          mine.push_back(std::move(r));
        }
      std::sort(mine.begin(), mine.end(),
                [](const ConfigReport& x, const ConfigReport& y) { return x.batch < y.batch; });
    }
    configs.insert(configs.end(), mine.begin(), mine.end());
  }

  if (a.measure) {
    MeasureOptions mo;
    mo.runner = a.runner;
    mo.steps = a.measureSteps;
    mo.every = std::max(1, std::min(16, a.measureSteps / 6));
    std::error_code ec;
    auto dir = std::filesystem::temp_directory_path(ec) / ("hgpc-explore-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status(ErrorCode::Io, "--measure: cannot make a scratch folder: " + ec.message());
    mo.workDir = dir.string();
    for (ConfigReport& r : configs) {
      if (!r.error.empty()) continue;
      if (!r.fits) {
        r.measured = Measurement{false, 0, "predicted not to fit the free device memory"};
        continue;
      }
      CompileOptions o = a.base;
      o.modelPath = a.models[0];
      HGP_ASSIGN_OR_RETURN(o.precision, parsePrecision(r.precision)); // a precisionName
      o.batch = r.batch;
      o.target = target.name;
      std::fprintf(stderr, "hgpc: measuring %s batch %lld\n", r.precision.c_str(), (long long)r.batch);
      r.measured = measureConfiguration(o, mo);
    }
    std::filesystem::remove_all(dir, ec);
  }

  if (a.json) writeReportJson("explore", configs, largest, os);
  else printExploreTable(configs, largest, os);
  if (!a.html.empty())
    HGP_TRY(writeHtml(a.html, [&](std::ostream& f) { writeExploreHtml(configs, largest, f); }));
  return Status::ok();
}

Expected<int64_t> autoBatch(const CompileOptions& base, double memoryLimitGiB, std::ostream& log) {
  HGP_ASSIGN_OR_RETURN(Target target, resolveTarget(base.target));
  int64_t limit = memoryLimitGiB > 0 ? int64_t(memoryLimitGiB * double(int64_t(1) << 30))
                                     : target.memoryBytes;
  std::vector<ConfigReport> searched;
  HGP_ASSIGN_OR_RETURN(int64_t b, largestFittingBatch(base, target, limit, searched));
  if (b == 0)
    return Status(ErrorCode::OutOfMemory, "--batch auto: not even batch 1 fits " + target.name +
                                              " (" + humanBytes(double(limit)) + ")");
  const ConfigReport* at = nullptr;
  for (const ConfigReport& r : searched)
    if (r.batch == b) at = &r;
  char line[512];
  std::snprintf(line, sizeof line,
                "hgpc: --batch auto: %lld, the largest batch whose plan (%s, plus %s for the "
                "runtime) fits %s (%s); %zu plans tried\n",
                (long long)b, at ? humanBytes(double(at->arenaBytes())).c_str() : "?",
                humanBytes(double(kRuntimeReserveBytes)).c_str(), humanBytes(double(limit)).c_str(),
                memoryLimitGiB > 0 ? "--memory-limit" : (target.name + "'s memory").c_str(),
                searched.size());
  log << line;
  return b;
}

} // namespace hgp
