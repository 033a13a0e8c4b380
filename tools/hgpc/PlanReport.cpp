#include "tools/hgpc/PlanReport.h"

#include "compiler/schedule/StreamSchedule.h"
#include "runtime/plan/FusedProgram.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace hgp {

namespace {

/// The step's op as the report names it: the op, plus what fusion folded into it
/// (fuse-batch-norm: "+Relu", "+AddRelu" with a residual, "+ReluBwd" in the backward, "+Silu"
/// and "+SiluBwd", "+HardSwish" and "+HardSwishBwd", "+Sum"
/// for a folded gradient Sum, dy_parts=2; fuse-conv-bn: "+BnStats" on a convolution that sums
/// its result's channels, "(stats)" on the BatchNormTrain that reads those sums).
std::string stepLabel(const PlanStep& s) {
  std::string label = opName(s.op);
  std::string act = s.attrs.getString("activation", "none");
  const char* smooth = act == "silu" ? "+Silu" : act == "hardswish" ? "+HardSwish" : nullptr;
  if (s.op == OpKind::BatchNormBwd) {
    if (act == "relu") label += "+ReluBwd";
    if (smooth) label += std::string(smooth) + "Bwd";
    if (s.attrs.getInt("dy_parts", 1) == 2) label += "+Sum";
    return label;
  }
  // fuse-conv-bn: the convolution that emits the channel sums, the BatchNorm that takes them.
  if (s.op == OpKind::Conv && s.attrs.getInt("stats", 0)) label += "+BnStats";
  if (s.op == OpKind::BatchNormTrain && s.attrs.getInt("given_stats", 0)) label += "(stats)";
  if (smooth) return label + smooth;
  if (act != "relu") return label;
  if (s.op == OpKind::BatchNormTrain && s.inputs.size() % 2 == 0) return label + "+AddRelu";
  return label + "+Relu";
}

std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string where(const Plan& plan, const PlanStep& s) {
  if (s.outputs.empty()) return "-";
  const PlanTensor& t = plan.tensors[size_t(s.outputs[0])];
  return format("%c+%lld", t.storage == StorageClass::Persistent ? 'P' : 'T', (long long)t.offset);
}

/// What the step shares through views (compiler/analysis/Views.h), for the DOT labels: the
/// Concat results its results are written into, and the views it reads in place of a copy.
std::string viewNote(const Plan& plan, const PlanStep& s) {
  std::string note;
  auto add = [&](const char* what, const PlanTensor& t) {
    note += (note.empty() ? "" : "; ") + std::string(what) + plan.tensors[size_t(t.aliasOf)].name;
    if (t.pitched()) note += format(" (pitched %lld/%lld)", (long long)t.row, (long long)t.pitch);
  };
  for (int i : s.inputs)
    if (const PlanTensor& t = plan.tensors[size_t(i)]; t.alias == AliasKind::Part && t.pitched())
      add("reads a part of %", t);
  for (int o : s.outputs)
    if (const PlanTensor& t = plan.tensors[size_t(o)]; t.alias == AliasKind::Part) add("into %", t);
  for (int i : s.inputs)
    if (const PlanTensor& t = plan.tensors[size_t(i)]; t.alias == AliasKind::View)
      add("reads a view of %", t);
  return note;
}

/// The views among the tensors the program touches: how many, their bytes (no step copies them),
/// and the Concats written in place.
/// A copy's reason without the value and node names in it, so that alike reasons count together.
std::string reasonKind(const std::string& why) {
  std::string out, word;
  std::istringstream in(why);
  while (in >> word)
    if (word[0] != '%' && word[0] != '/') out += (out.empty() ? "" : " ") + word;
  return out;
}

void printViews(const Plan& plan, const PlanProgram& program, std::ostream& os) {
  std::set<int> touched;
  for (const PlanStep& s : program.steps) {
    touched.insert(s.inputs.begin(), s.inputs.end());
    touched.insert(s.outputs.begin(), s.outputs.end());
  }
  for (std::vector<int> todo(touched.begin(), touched.end()); !todo.empty();) {
    int t = todo.back();
    todo.pop_back();
    int of = plan.tensors[size_t(t)].aliasOf;
    if (of >= 0 && touched.insert(of).second) todo.push_back(of);
  }
  int views = 0, parts = 0, pitched = 0;
  double bytes = 0;
  std::set<int> concats;
  for (int t : touched) {
    const PlanTensor& pt = plan.tensors[size_t(t)];
    if (pt.alias == AliasKind::None) continue;
    (pt.alias == AliasKind::View ? views : parts) += 1;
    pitched += pt.pitched();
    bytes += double(pt.bytes());
    if (pt.alias == AliasKind::Part) concats.insert(pt.aliasOf);
  }
  if (views + parts == 0) return;
  os << format("views: %d tensors (%.3f MB) share bytes instead of being copied: %d Reshape, "
               "Slice or Split results; %d Concat operands written in place (%zu Concats)",
               views + parts, bytes / 1e6, views, parts, concats.size());
  // --strided-views: the channel ranges among them, and the copies that stayed, by reason.
  std::map<std::string, int> kept;
  for (const PlanStep& s : program.steps)
    if (s.attrs.has("copy")) ++kept[std::string(opName(s.op)) + ": " + reasonKind(s.attrs.getString("copy"))];
  if (pitched) os << format("; %d pitched (channel ranges)", pitched);
  os << "\n";
  for (const auto& [why, n] : kept) os << format("  copies kept: %d x %s\n", n, why.c_str());
}

/// The train (or forward) program with its costs and stream schedule.
struct Scheduled {
  const PlanProgram* program;
  ProgramCost cost;
  StreamSchedule sched;
  ProgramMeasurement measured; ///< present only with records of this program.
};

std::optional<Scheduled> schedule(const Plan& plan, const Target& target,
                                  Precision precision, int maxStreams,
                                  const CostCalibration& cal, const ProfileRecords* records) {
  const PlanProgram* program = plan.findProgram("train");
  if (!program) program = plan.findProgram("forward");
  if (!program) return std::nullopt;
  ProgramMeasurement measured;
  if (records) measured = measureProgram(*records, *program);
  ProgramCost cost = programCost(target, plan, *program, precision, cal,
                                 measured.present ? &measured : nullptr);
  StreamSchedule sched = scheduleStreams(target, plan, *program, cost, maxStreams);
  return Scheduled{program, std::move(cost), std::move(sched), std::move(measured)};
}

/// The all-reduce buckets of a data-parallel plan and how much of their time the schedule
/// leaves exposed (the scheduled iteration minus the same schedule with free communication).
void printCommunication(const Plan& plan, const Target& target, const PlanProgram& program,
                        const ProgramCost& cost, const StreamSchedule& sched, int maxStreams,
                        std::ostream& os) {
  ProgramCost free = cost;
  double total = 0, bytes = 0;
  int buckets = 0;
  for (size_t i = 0; i < program.steps.size(); ++i) {
    if (program.steps[i].op != OpKind::AllReduce) continue;
    ++buckets;
    total += cost.steps[i].seconds;
    bytes += cost.steps[i].bytes;
    free.steps[i].seconds = 0;
  }
  if (buckets == 0) return;
  StreamSchedule without = scheduleStreams(target, plan, program, free, maxStreams);
  os << format("communication %d all-reduces, %.2f MB over %lld ranks (%.0f GB/s links): all-reduce "
               "%.3f ms, exposed %.3f ms\n", buckets, bytes / 1e6,
               (long long)plan.meta.getInt("ranks", 1), target.linkBandwidth / 1e9, total * 1e3,
               std::max(0.0, sched.idealSeconds - without.idealSeconds) * 1e3);
  for (size_t i = 0; i < program.steps.size(); ++i) {
    const PlanStep& s = program.steps[i];
    if (s.op != OpKind::AllReduce) continue;
    int after = -1;
    for (int j : sched.dependencies[i]) after = std::max(after, j);
    std::string what = s.attrs.has("bucket") ? "bucket " + std::to_string(s.attrs.getInt("bucket"))
                                             : "'" + s.loc + "'";
    os << format("  %s: step %zu (stream %d) after step %d, %zu tensors, %.3f MB, %.3f ms\n",
                 what.c_str(), i, sched.stream[i], after, s.inputs.size(), cost.steps[i].bytes / 1e6,
                 cost.steps[i].seconds * 1e3);
  }
}

/// Each FusedElementwise step (passes/FuseElementwise.cpp): its member ops, operand counts and
/// the cost model's time, a memory-bound op over its inputs' and results' bytes.
void printFusedGroups(const PlanProgram& program, const ProgramCost& cost, std::ostream& os) {
  int groups = 0, members = 0;
  double seconds = 0;
  std::string lines;
  for (size_t i = 0; i < program.steps.size(); ++i) {
    const PlanStep& s = program.steps[i];
    if (s.op != OpKind::FusedElementwise) continue;
    Expected<FusedProgram> p = parseFusedProgram(s.attrs, int(s.inputs.size()));
    if (!p) continue;
    ++groups;
    members += int(p->instrs.size());
    seconds += cost.steps[i].seconds;
    lines += format("  step %4zu %-24s in %2zu out %zu %9.3f mbyte %8.2f pred_us  %s\n", i,
                    fusedSummary(*p).c_str(), s.inputs.size(), s.outputs.size(),
                    cost.steps[i].bytes / 1e6, cost.steps[i].seconds * 1e6, s.loc.c_str());
  }
  if (groups == 0) return;
  os << format("fused elementwise %d steps of %d ops, %.3f ms predicted\n", groups, members,
               seconds * 1e3)
     << lines;
}

} // namespace

/// The layout choice (passes/LayoutNhwc.cpp): how many steps run channels-last, and the
/// conversions at the edges of the channels-last regions with their predicted time.
void printLayout(const Plan& plan, const PlanProgram& program, const ProgramCost& cost,
                 std::ostream& os) {
  int last = 0, transposes = 0;
  double seconds = 0;
  // What forced each conversion: the op its name gives (passes/LayoutNhwc.cpp), by direction.
  std::map<std::string, int> causes;
  for (size_t i = 0; i < program.steps.size(); ++i) {
    const PlanStep& s = program.steps[i];
    last += s.attrs.getString("layout") == "nhwc";
    if (s.op != OpKind::Transpose || s.loc.rfind("layout/", 0) != 0) continue;
    ++transposes, seconds += cost.steps[i].seconds;
    // "layout/to-nchw for OP NODE", "layout/to-nhwc after OP NODE"
    std::vector<std::string> words;
    for (size_t b = 0, e; b < s.loc.size(); b = e + 1) {
      e = std::min(s.loc.find(' ', b), s.loc.size());
      words.push_back(s.loc.substr(b, e - b));
    }
    ++causes[words[0].substr(7) + " " + (words.size() > 2 ? words[2] : "?")];
  }
  os << format("layout: %s", plan.meta.getString("layout", "nchw").c_str());
  if (last || transposes)
    os << format(", %d steps channels-last, %d conversions (%.3f ms predicted)", last, transposes,
                 seconds * 1e3);
  else if (plan.meta.getString("layout") == "nhwc")
    os << ", but no step: no convolution has multiples of 8 channels on both sides";
  os << "\n";
  if (!causes.empty()) {
    os << "  conversions by the op that forced them:";
    for (const auto& [what, n] : causes) os << format(" %s %d;", what.c_str(), n);
    os << "\n";
  }
}

void printPlanReport(const Plan& plan, const Target& target, Precision precision,
                     int maxStreams, const CostCalibration& cal, std::ostream& os,
                     const ProfileRecords* records, const SliceResult* slicing) {
  std::optional<Scheduled> sc = schedule(plan, target, precision, maxStreams, cal, records);
  if (!sc) return;
  const PlanProgram* program = sc->program;
  const ProgramSlicing* sliced = nullptr;
  if (slicing) {
    auto it = slicing->programs.find(program->name);
    if (it != slicing->programs.end() && it->second.steps.size() == program->steps.size())
      sliced = &it->second;
  }
  const ProgramCost& cost = sc->cost;
  const StreamSchedule& sched = sc->sched;
  os << format("plan %s batch %lld target %s (%s: %d SMs, %.0f GB/s, %s %.1f TFLOP/s) precision %s\n",
               plan.modelName.c_str(), (long long)plan.meta.getInt("batch"), target.name.c_str(),
               target.description.c_str(), target.sms, target.memBandwidth / 1e9,
               precisionName(precision), target.peak(precision) / 1e12, precisionName(precision));
  if (records) {
    const ProgramMeasurement& m = sc->measured;
    if (!m.present) {
      os << format("records from %s: no run of program %s; every time is estimated\n",
                   records->gpu.c_str(), program->name.c_str());
    } else {
      size_t ran = 0;
      for (const StepMeasurement& sm : m.steps) ran += sm.kernels > 0;
      os << format("records from %s (%d SMs, %s mapping): every time is measured; %zu of %zu steps "
                   "ran kernels; gap %.2f us per kernel; profiled iteration %.3f ms\n",
                   records->gpu.c_str(), records->sms, records->mapping.c_str(), ran,
                   m.steps.size(), (m.gapSamples > 0 ? m.gapSeconds : target.launchSeconds) * 1e6,
                   m.spanSeconds * 1e3);
    }
  }
  os << format("program %s: %zu steps\n", program->name.c_str(), program->steps.size());
  os << "  step op                     stream algo width depth   blocks x thr regs  smem occ   waves    gflop     mbyte  pred_us  result      source\n";
  for (size_t i = 0; i < program->steps.size(); ++i) {
    const PlanStep& s = program->steps[i];
    const StepCost& c = cost.steps[i];
    StepSlicing sl = sliced ? sliced->steps[i] : StepSlicing{};
    os << format("  %4zu %-22s %6d auto %5d %5d %8lld x %3d %4d %5lld %3d %7.2f %8.3f %9.3f %8.2f  "
                 "%-10s  %s%s%s",
                 i, stepLabel(s).c_str(), sched.stream[i], sl.width, sl.depth, (long long)c.launch.blocks,
                 c.launch.threads, c.launch.regs, (long long)c.launch.smem, c.blocksPerSm, c.waves,
                 c.flops / 1e9, c.bytes / 1e6, c.seconds * 1e6, where(plan, s).c_str(),
                 s.loc.c_str(),
                 sl.width * sl.depth > 1
                     ? format(" #%d/%d", sl.micro * sl.width + sl.part, sl.width * sl.depth).c_str()
                     : "",
                 c.onCriticalPath ? " *" : "");
    os << (c.measured ? format(" measured (%d)\n", c.kernels) : std::string("\n"));
  }
  int fused = 0;
  for (const PlanStep& s : program->steps) fused += s.attrs.getString("activation", "none") != "none";
  if (fused)
    os << format("fusion: %d steps with a fused activation (op+Relu, op+AddRelu, op+ReluBwd)\n", fused);
  int folded = 0;
  for (const PlanStep& s : program->steps) folded += s.attrs.getInt("dy_parts", 1) == 2;
  if (folded) os << format("fusion: %d gradient Sums folded into BatchNormBwd (+Sum)\n", folded);
  int stats = 0;
  for (const PlanStep& s : program->steps) stats += s.op == OpKind::Conv && s.attrs.getInt("stats", 0);
  if (stats)
    os << format("fusion: %d BatchNorm statistics passes taken over by the convolution before "
                 "them (Conv+BnStats, BatchNormTrain(stats))\n", stats);
  printFusedGroups(*program, cost, os);
  printLayout(plan, *program, cost, os);
  printViews(plan, *program, os);
  if (sliced)
    os << format("batch slicing: %d steps split into sub-batches, %d runs pipelined over "
                 "micro-batches\n",
                 sliced->splitSteps, sliced->pipelines);
  os << format("streams %d (at most %d), events %zu (dependencies %zu, %zu after transitive "
               "reduction)\n", sched.streams, maxStreams, sched.events.size(),
               sched.dependencyEdges, sched.reducedEdges);
  for (const StreamSchedule::Event& e : sched.events)
    os << format("  event %d (stream %d) -> %d (stream %d)\n", e.from, sched.stream[size_t(e.from)],
                 e.to, sched.stream[size_t(e.to)]);
  os << format("peak memory %.1f MiB (persistent %.1f MiB, transient %.1f MiB)\n",
               double(plan.persistentBytes + plan.transientBytes) / (1 << 20),
               double(plan.persistentBytes) / (1 << 20), double(plan.transientBytes) / (1 << 20));
  os << format("predicted iteration %.3f ms on one stream; %.3f ms scheduled (%.3f ms if "
               "concurrent kernels did not share the GPU)\n", cost.serialSeconds * 1e3,
               sched.sharedSeconds * 1e3, sched.idealSeconds * 1e3);
  printCommunication(plan, target, *program, cost, sched, maxStreams, os);
  os << format("critical path %.3f ms over %zu steps (marked *)", cost.criticalPathSeconds * 1e3,
               cost.criticalPath.size());
  if (!cost.criticalPath.empty()) {
    const PlanStep& a = program->steps[size_t(cost.criticalPath.front())];
    const PlanStep& b = program->steps[size_t(cost.criticalPath.back())];
    os << format(": %s '%s' ... %s '%s'", stepLabel(a).c_str(), a.loc.c_str(),
                 stepLabel(b).c_str(), b.loc.c_str());
  }
  os << "\n";
}

void printPlanDot(const Plan& plan, const Target& target, Precision precision,
                  int maxStreams, const CostCalibration& cal, std::ostream& os,
                  const ProfileRecords* records) {
  std::optional<Scheduled> sc = schedule(plan, target, precision, maxStreams, cal, records);
  if (!sc) return;
  const PlanProgram* program = sc->program;
  const ProgramCost& cost = sc->cost;
  const StreamSchedule& sched = sc->sched;
  const std::vector<std::vector<int>>& deps = sched.dependencies;
  std::set<std::pair<int, int>> events;
  for (const StreamSchedule::Event& e : sched.events) events.insert({e.from, e.to});
  auto quoted = [](const std::string& s) {
    std::string q;
    for (char c : s) q += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
    return q;
  };
  os << "digraph \"" << quoted(plan.modelName) << "\" {\n  rankdir=TB;\n  node [shape=box, fontsize=9];\n";
  for (int st = 0; st < sched.streams; ++st) {
    os << format("  subgraph cluster_stream%d {\n    label=\"stream %d\";\n", st, st);
    for (size_t i = 0; i < program->steps.size(); ++i) {
      if (sched.stream[i] != st) continue;
      const PlanStep& s = program->steps[i];
      std::string note = viewNote(plan, s);
      os << format("    s%zu [label=\"%zu %s\\n%s\\n%.1f us%s\"%s];\n", i, i, stepLabel(s).c_str(),
                   quoted(s.loc).c_str(), cost.steps[i].seconds * 1e6,
                   note.empty() ? "" : ("\\n" + quoted(note)).c_str(),
                   cost.steps[i].onCriticalPath ? ", penwidth=2" : "");
    }
    os << "  }\n";
  }
  for (size_t i = 0; i < deps.size(); ++i)
    for (int j : deps[i])
      os << format("  s%d -> s%zu%s;\n", j, i, events.count({j, int(i)}) ? " [style=bold, color=red]" : "");
  os << "}\n";
}

} // namespace hgp
