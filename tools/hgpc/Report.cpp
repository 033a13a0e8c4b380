#include "tools/hgpc/Report.h"

#include "compiler/schedule/StreamSchedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

namespace hgp {

namespace {

bool startsWith(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

bool isBackward(const std::string& loc) {
  return loc.size() >= 4 && (loc.compare(loc.size() - 4, 4, "/bwd") == 0 ||
                             loc.find("/bwd/") != std::string::npos);
}

/// The phase of a step, from the source location the passes give it.
std::string phaseOf(const std::string& loc) {
  if (loc.empty()) return "other";
  if (isBackward(loc)) return "backward";
  if (startsWith(loc, "optimizer") || startsWith(loc, "iter") || startsWith(loc, "metrics"))
    return "optimizer";
  if (startsWith(loc, "allreduce")) return "communication";
  if (startsWith(loc, "layout") || startsWith(loc, "cast")) return "conversions";
  return "forward";
}

/// The model layer a step belongs to: its forward node's name ("/layer1/layer1.0/conv1/Conv"
/// without the leading "/" and without the backward's "/bwd"), or the first word of a location
/// the passes made ("optimizer", "loss", "layout", ...).
std::string layerOf(const std::string& loc) {
  if (loc.empty()) return "(no source)";
  if (!startsWith(loc, "/")) return loc.substr(0, loc.find('/'));
  std::string l = loc.substr(1);
  size_t b = l.find("/bwd");
  if (b != std::string::npos) l = l.substr(0, b);
  return l.empty() ? "(model)" : l;
}

/// The stage of a layer: the first `depth` components of its name.
std::string stageOf(const std::string& layer, int depth) {
  size_t at = 0;
  for (int i = 0; i < depth; ++i) {
    at = layer.find('/', at == 0 && i == 0 ? 0 : at + 1);
    if (at == std::string::npos) return layer;
  }
  return layer.substr(0, at);
}

void add(std::vector<ReportGroup>& groups, std::map<std::string, size_t>& index,
         const std::string& name, const StepCost& c, double resultBytes) {
  auto [it, fresh] = index.emplace(name, groups.size());
  if (fresh) groups.push_back({name});
  ReportGroup& g = groups[it->second];
  g.seconds += c.seconds;
  g.flops += c.flops;
  g.resultBytes += resultBytes;
  ++g.steps;
}

void fillGroups(ConfigReport& r, const Plan& plan, const PlanProgram& program,
                const ProgramCost& cost) {
  // Stages: the first name component, or the first two where one first component holds most
  // of the model's steps (torchvision's VGG, AlexNet and MobileNet put the body under
  // "features").
  std::map<std::string, int> top;
  int modelSteps = 0, largest = 0;
  for (const PlanStep& s : program.steps)
    if (startsWith(s.loc, "/")) largest = std::max(largest, ++top[stageOf(layerOf(s.loc), 1)]), ++modelSteps;
  int depth = 2 * largest > modelSteps ? 2 : 1;
  std::map<std::string, size_t> fam, ph, st, ly;
  for (size_t i = 0; i < program.steps.size(); ++i) {
    const PlanStep& s = program.steps[i];
    const StepCost& c = cost.steps[i];
    double written = 0;
    for (int t : s.outputs) written += double(plan.tensors[size_t(t)].bytes());
    std::string layer = layerOf(s.loc);
    add(r.families, fam, opTraits(s.op).family, c, written);
    add(r.phases, ph, phaseOf(s.loc), c, written);
    add(r.stages, st, startsWith(s.loc, "/") ? stageOf(layer, depth) : layer, c, written);
    add(r.layers, ly, layer, c, written);
  }
  std::stable_sort(r.families.begin(), r.families.end(),
                   [](const ReportGroup& a, const ReportGroup& b) { return a.seconds > b.seconds; });
}

} // namespace

std::optional<double> ConfigReport::predictionError() const {
  if (!measured || !measured->ran || measured->stepSeconds <= 0) return std::nullopt;
  return (stepSeconds - measured->stepSeconds) / measured->stepSeconds;
}

Expected<ConfigReport> reportConfiguration(CompileOptions o, const Target& target,
                                           int64_t memoryLimitBytes) {
  ConfigReport r;
  r.path = o.modelPath;
  r.model = std::filesystem::path(o.modelPath).stem().string();
  r.batch = o.batch;
  r.precision = precisionName(o.precision);
  r.target = target.name;
  r.memoryLimitBytes = memoryLimitBytes;
  o.target = target.name;
  o.kernels = CompileOptions::Kernels::Off; // the analyses need no machine code
  o.log = nullptr;
  Expected<Compilation> c = compileModel(o);
  if (!c) {
    ErrorCode code = c.status().code();
    // What every configuration would share ends the command; anything else is this one's.
    if (code == ErrorCode::Usage || code == ErrorCode::Io) return c.status();
    r.error = c.status().message();
    return r;
  }
  const Plan& plan = c->emitted.plan;
  const PlanProgram* program = plan.findProgram("train");
  if (!program) return Status(ErrorCode::Internal, "the plan has no train program");
  r.batch = plan.meta.getInt("batch", o.batch);
  r.parameters = plan.meta.getInt("parameters", 0);
  r.persistentBytes = plan.persistentBytes;
  r.transientBytes = plan.transientBytes;
  r.fits = r.neededBytes() <= memoryLimitBytes;
  ProgramCost cost = programCost(target, plan, *program, o.precision, o.slicing.cal);
  StreamSchedule sched = scheduleStreams(target, plan, *program, cost, o.maxStreams);
  r.stepSeconds = sched.sharedSeconds;
  r.serialSeconds = cost.serialSeconds;
  r.streams = sched.streams;
  for (const StepCost& s : cost.steps) r.flops += s.flops, r.bytesMoved += s.bytes;
  fillGroups(r, plan, *program, cost);
  return r;
}

Expected<int64_t> largestFittingBatch(const CompileOptions& options, const Target& target,
                                      int64_t memoryLimitBytes, std::vector<ConfigReport>& known,
                                      int64_t maxBatch) {
  std::map<int64_t, bool> fits;
  for (const ConfigReport& r : known)
    if (r.precision == precisionName(options.precision) && r.error.empty()) fits[r.batch] = r.fits;
  auto test = [&](int64_t b) -> Expected<bool> {
    if (auto it = fits.find(b); it != fits.end()) return it->second;
    CompileOptions o = options;
    o.batch = b;
    HGP_ASSIGN_OR_RETURN(ConfigReport r, reportConfiguration(o, target, memoryLimitBytes));
    if (!r.error.empty())
      return Status(ErrorCode::InvalidModel, "batch " + std::to_string(b) + ": " + r.error);
    known.push_back(r);
    return fits[b] = r.fits;
  };
  // Powers of two up from the largest known fit, then bisection between the last that fits and
  // the first that does not, in steps of 8 above 8.
  int64_t lo = 0, hi = 0;
  for (const auto& [b, f] : fits) {
    if (f) lo = std::max(lo, b);
    else if (hi == 0 || b < hi) hi = b;
  }
  if (hi != 0 && hi <= lo) hi = 0; // not monotonic: trust the larger fit and search above it
  if (lo == 0) {
    HGP_ASSIGN_OR_RETURN(bool one, test(1));
    if (!one) return int64_t(0);
    lo = 1;
  }
  while (hi == 0) {
    if (lo >= maxBatch) return lo;
    int64_t next = std::min(lo * 2, maxBatch);
    HGP_ASSIGN_OR_RETURN(bool f, test(next));
    if (f) lo = next;
    else hi = next;
  }
  auto step = [](int64_t b) { return b >= 16 ? int64_t(8) : int64_t(1); };
  while (hi - lo > step(lo)) {
    int64_t mid = lo + (hi - lo) / 2;
    mid -= mid % step(mid);
    if (mid <= lo) break;
    HGP_ASSIGN_OR_RETURN(bool f, test(mid));
    if (f) lo = mid;
    else hi = mid;
  }
  return lo;
}

std::optional<double> meanAbsoluteError(const std::vector<ConfigReport>& configs) {
  double sum = 0;
  int n = 0;
  for (const ConfigReport& r : configs)
    if (std::optional<double> e = r.predictionError()) sum += std::fabs(*e), ++n;
  if (n == 0) return std::nullopt;
  return sum / n;
}

int bestFitting(const std::vector<ConfigReport>& configs) {
  int best = -1;
  for (size_t i = 0; i < configs.size(); ++i) {
    const ConfigReport& r = configs[i];
    if (!r.error.empty() || !r.fits) continue;
    if (r.measured && !r.measured->ran) continue; // it did not run where it was measured
    auto speed = [](const ConfigReport& c) {
      return c.measured && c.measured->ran ? double(c.batch) / c.measured->stepSeconds
                                           : c.imagesPerSecond();
    };
    if (best < 0 || speed(r) > speed(configs[size_t(best)])) best = int(i);
  }
  return best;
}

std::string humanCount(double v) {
  const char* units[] = {"", " K", " M", " G", " T", " P"};
  int u = 0;
  while (std::fabs(v) >= 1000 && u < 5) v /= 1000, ++u;
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f%s" : "%.2f%s", v, units[u]);
  return buf;
}

std::string humanBytes(double bytes) {
  char buf[64];
  if (bytes >= double(int64_t(10) << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1 << 30));
  else if (bytes >= double(10 << 20)) std::snprintf(buf, sizeof buf, "%.0f MiB", bytes / (1 << 20));
  else std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / (1 << 20));
  return buf;
}

} // namespace hgp
