#include "runtime/profile/Records.h"

#include "runtime/support/TextScanner.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace hgp {

namespace {

const char* kindWord(ActivityKind k) {
  switch (k) {
  case ActivityKind::Kernel: return "kernel";
  case ActivityKind::Memcpy: return "memcpy";
  case ActivityKind::Memset: return "memset";
  }
  return "?";
}

std::string fixed(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

std::string triple(const int v[3]) {
  return std::to_string(v[0]) + "," + std::to_string(v[1]) + "," + std::to_string(v[2]);
}

class RecordsParser {
public:
  RecordsParser(std::string_view text, const std::string& source) : s_(text, source) {}

  Expected<ProfileRecords> parse() {
    HGP_TRY(expectWord("hgpc-records"));
    HGP_ASSIGN_OR_RETURN(int64_t version, integer());
    if (version != ProfileRecords::kVersion)
      return error("records format version " + std::to_string(version) + " is not supported "
                   "(this build reads version " + std::to_string(ProfileRecords::kVersion) + ")");
    while (!s_.atEnd()) {
      if (s_.consumeWord("model")) {
        HGP_ASSIGN_OR_RETURN(r_.model, quoted());
      } else if (s_.consumeWord("batch")) {
        HGP_ASSIGN_OR_RETURN(r_.batch, integer());
      } else if (s_.consumeWord("gpu")) {
        HGP_ASSIGN_OR_RETURN(r_.gpu, quoted());
        HGP_TRY(expectWord("sms"));
        HGP_ASSIGN_OR_RETURN(int64_t sms, integer());
        r_.sms = int(sms);
      } else if (s_.consumeWord("mapping")) {
        HGP_ASSIGN_OR_RETURN(r_.mapping, word());
      } else if (s_.consumeWord("program")) {
        ProfiledProgram p;
        HGP_ASSIGN_OR_RETURN(p.name, word());
        HGP_TRY(expectWord("steps"));
        HGP_ASSIGN_OR_RETURN(int64_t steps, integer());
        p.steps = int(steps);
        HGP_TRY(expectWord("span_us"));
        HGP_ASSIGN_OR_RETURN(p.spanUs, number());
        r_.programs.push_back(std::move(p));
      } else if (s_.consumeWord("kernel")) {
        HGP_TRY(record(ActivityKind::Kernel));
      } else if (s_.consumeWord("memcpy")) {
        HGP_TRY(record(ActivityKind::Memcpy));
      } else if (s_.consumeWord("memset")) {
        HGP_TRY(record(ActivityKind::Memset));
      } else {
        return error("expected model, batch, gpu, mapping, program, kernel, memcpy or memset");
      }
    }
    return std::move(r_);
  }

private:
  Status record(ActivityKind kind) {
    ActivityRecord a;
    a.kind = kind;
    HGP_ASSIGN_OR_RETURN(a.program, word());
    if (!r_.findProgram(a.program))
      return error("record of program '" + a.program + "', which no program line declared");
    HGP_ASSIGN_OR_RETURN(int64_t step, integer());
    a.step = int(step);
    HGP_ASSIGN_OR_RETURN(a.op, word());
    HGP_ASSIGN_OR_RETURN(a.loc, quoted());
    // key=value fields until the next line's keyword.
    static const char* kKeys[] = {"covers", "stream", "grid",   "block",  "regs",
                                  "smem",   "bytes",  "start_us", "dur_us", "name"};
    for (;;) {
      const char* key = nullptr;
      for (const char* k : kKeys)
        if (s_.consumeWord(k)) key = k;
      if (!key) break;
      HGP_TRY(expect('='));
      std::string_view k = key;
      if (k == "covers") {
        HGP_ASSIGN_OR_RETURN(int64_t v, integer());
        a.covers = int(v);
      } else if (k == "stream") {
        HGP_ASSIGN_OR_RETURN(int64_t v, integer());
        a.stream = int(v);
      } else if (k == "grid" || k == "block") {
        int* dst = k == "grid" ? a.grid : a.block;
        for (int i = 0; i < 3; ++i) {
          if (i) HGP_TRY(expect(','));
          HGP_ASSIGN_OR_RETURN(int64_t v, integer());
          dst[i] = int(v);
        }
      } else if (k == "regs") {
        HGP_ASSIGN_OR_RETURN(int64_t v, integer());
        a.regs = int(v);
      } else if (k == "smem") {
        HGP_ASSIGN_OR_RETURN(a.staticSmem, integer());
        HGP_TRY(expect('+'));
        HGP_ASSIGN_OR_RETURN(a.dynamicSmem, integer());
      } else if (k == "bytes") {
        HGP_ASSIGN_OR_RETURN(a.bytes, integer());
      } else if (k == "start_us") {
        HGP_ASSIGN_OR_RETURN(a.startUs, number());
      } else if (k == "dur_us") {
        HGP_ASSIGN_OR_RETURN(a.durUs, number());
        if (a.durUs < 0) return error("negative duration");
      } else {
        HGP_ASSIGN_OR_RETURN(a.name, quoted());
      }
    }
    if (a.covers < 1) return error("covers must be at least 1");
    r_.records.push_back(std::move(a));
    return Status::ok();
  }

  Status error(const std::string& what) const { return s_.error(what, ErrorCode::BadData); }
  // The scanner's own errors are InvalidModel (it serves the plan parser); records are data.
  static Status asData(Status st) {
    return st ? st : Status(ErrorCode::BadData, st.message());
  }
  Status expectWord(std::string_view w) { return asData(s_.expectWord(w)); }
  Status expect(char c) { return asData(s_.expect(c)); }
  Expected<int64_t> integer() {
    auto v = s_.integer();
    if (!v) return asData(v.status());
    return *v;
  }
  Expected<double> number() {
    auto v = s_.number();
    if (!v) return asData(v.status());
    return *v;
  }
  Expected<std::string> word() {
    auto v = s_.word();
    if (!v) return asData(v.status());
    return std::move(*v);
  }
  Expected<std::string> quoted() {
    auto v = s_.quoted();
    if (!v) return asData(v.status());
    return std::move(*v);
  }

  TextScanner s_;
  ProfileRecords r_;
};

} // namespace

const ProfiledProgram* ProfileRecords::findProgram(const std::string& name) const {
  for (const ProfiledProgram& p : programs)
    if (p.name == name) return &p;
  return nullptr;
}

std::string printRecords(const ProfileRecords& r) {
  std::string out = "hgpc-records " + std::to_string(ProfileRecords::kVersion) + "\nmodel ";
  appendQuoted(out, r.model);
  out += "\nbatch " + std::to_string(r.batch) + "\ngpu ";
  appendQuoted(out, r.gpu);
  out += " sms " + std::to_string(r.sms) + "\nmapping " + r.mapping + "\n";
  for (const ProfiledProgram& p : r.programs)
    out += "program " + p.name + " steps " + std::to_string(p.steps) + " span_us " +
           fixed(p.spanUs) + "\n";
  for (const ActivityRecord& a : r.records) {
    out += std::string(kindWord(a.kind)) + " " + a.program + " " + std::to_string(a.step) + " " +
           (a.op.empty() ? "-" : a.op) + " ";
    appendQuoted(out, a.loc);
    if (a.covers != 1) out += " covers=" + std::to_string(a.covers);
    out += " stream=" + std::to_string(a.stream);
    if (a.kind == ActivityKind::Kernel)
      out += " grid=" + triple(a.grid) + " block=" + triple(a.block) + " regs=" +
             std::to_string(a.regs) + " smem=" + std::to_string(a.staticSmem) + "+" +
             std::to_string(a.dynamicSmem);
    else
      out += " bytes=" + std::to_string(a.bytes);
    out += " start_us=" + fixed(a.startUs) + " dur_us=" + fixed(a.durUs) + " name=";
    appendQuoted(out, a.name);
    out += "\n";
  }
  return out;
}

Expected<ProfileRecords> parseRecords(std::string_view text, const std::string& sourceName) {
  return RecordsParser(text, sourceName).parse();
}

Expected<ProfileRecords> readRecordsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(ErrorCode::Io, "cannot read the records file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return parseRecords(ss.str(), path);
}

Status checkRecordsMatch(const ProfileRecords& r, const Plan& plan) {
  auto differ = [&](const std::string& what) {
    return Status(ErrorCode::BadData, "the records were made from another plan: " + what +
                                          "; profile an executable compiled from this model "
                                          "with the same options");
  };
  if (r.model != plan.modelName)
    return differ("model '" + r.model + "', this plan's is '" + plan.modelName + "'");
  int64_t batch = plan.meta.getInt("batch");
  if (r.batch != batch)
    return differ("batch " + std::to_string(r.batch) + ", this plan's is " + std::to_string(batch));
  for (const ProfiledProgram& pp : r.programs) {
    const PlanProgram* p = plan.findProgram(pp.name);
    if (!p) continue;
    if (size_t(pp.steps) != p->steps.size())
      return differ("program " + pp.name + " has " + std::to_string(pp.steps) +
                    " steps there and " + std::to_string(p->steps.size()) + " here");
  }
  for (const ActivityRecord& a : r.records) {
    const PlanProgram* p = plan.findProgram(a.program);
    if (!p || a.step < 0) continue;
    if (size_t(a.step) + size_t(a.covers) > p->steps.size())
      return differ("a record of step " + std::to_string(a.step) + " of program " + a.program +
                    ", which has " + std::to_string(p->steps.size()) + " steps here");
    const char* here = opName(p->steps[size_t(a.step)].op);
    if (a.op != here)
      return differ("step " + std::to_string(a.step) + " of program " + a.program + " is " +
                    a.op + " there and " + here + " here");
  }
  return Status::ok();
}

ProgramMeasurement measureProgram(const ProfileRecords& r, const PlanProgram& program) {
  ProgramMeasurement m;
  m.steps.resize(program.steps.size());
  const ProfiledProgram* pp = r.findProgram(program.name);
  if (!pp) return m;
  m.present = true;
  m.spanSeconds = pp->spanUs * 1e-6;
  std::vector<double> longest(program.steps.size(), -1);
  std::map<int, double> streamEnd; // Per stream, the end of its latest record so far.
  std::vector<double> gaps;
  std::vector<const ActivityRecord*> mine;
  for (const ActivityRecord& a : r.records)
    if (a.program == program.name) mine.push_back(&a);
  std::stable_sort(mine.begin(), mine.end(), [](const ActivityRecord* x, const ActivityRecord* y) {
    return x->startUs < y->startUs;
  });
  for (const ActivityRecord* ap : mine) {
    const ActivityRecord& a = *ap;
    auto last = streamEnd.find(a.stream);
    if (last != streamEnd.end()) gaps.push_back(std::max(0.0, a.startUs - last->second));
    double end = a.startUs + a.durUs;
    streamEnd[a.stream] = last != streamEnd.end() ? std::max(last->second, end) : end;
    if (a.step < 0) continue;
    for (int s = a.step; s < a.step + a.covers; ++s) {
      if (s >= int(m.steps.size())) break;
      StepMeasurement& sm = m.steps[size_t(s)];
      sm.kernels += 1;
      sm.launches += 1.0 / a.covers;
      sm.busySeconds += a.durUs * 1e-6 / a.covers;
      if (a.kind == ActivityKind::Kernel && a.durUs > longest[size_t(s)]) {
        longest[size_t(s)] = a.durUs;
        sm.blocks = a.blocks();
        sm.threads = a.threads();
        sm.regs = a.regs;
        sm.smem = a.staticSmem + a.dynamicSmem;
      }
    }
  }
  for (const auto& [stream, end] : streamEnd) m.streams += stream >= 0;
  m.gapSamples = int(gaps.size());
  if (!gaps.empty()) {
    std::nth_element(gaps.begin(), gaps.begin() + long(gaps.size() / 2), gaps.end());
    m.gapSeconds = gaps[gaps.size() / 2] * 1e-6;
  }
  return m;
}

} // namespace hgp
