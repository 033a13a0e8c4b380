#include "runtime/profile/ChromeTrace.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <set>

namespace hgp {

namespace {

/// `s` as a JSON string literal.
std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

/// The track of a stream: plan streams keep their number; the input-copy stream (-1) goes last.
int tidOf(int stream) { return stream < 0 ? 1000 : stream; }

} // namespace

void writeChromeTrace(const ProfileRecords& r, const Plan* plan, const std::string& program,
                      std::ostream& os) {
  std::vector<std::string> events;
  events.push_back("{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":" +
                   jsonString("GPU " + r.gpu + " (" + r.model + ", batch " +
                              std::to_string(r.batch) + ", " + program + ")") +
                   "}}");
  std::set<int> streams;
  // Per step, its first record (where an arrow ends) and its last (where one starts).
  std::map<int, const ActivityRecord*> first, last;
  for (const ActivityRecord& a : r.records) {
    if (a.program != program) continue;
    streams.insert(a.stream);
    std::string name = a.step < 0 ? (a.kind == ActivityKind::Memcpy ? "InputCopy" : a.name)
                                  : a.op + (a.loc.empty() ? "" : " " + a.loc);
    std::string args = "\"step\":" + std::to_string(a.step) + ",\"kernel\":" + jsonString(a.name);
    if (a.kind == ActivityKind::Kernel) {
      args += ",\"grid\":" + jsonString(std::to_string(a.grid[0]) + "," + std::to_string(a.grid[1]) +
                                        "," + std::to_string(a.grid[2])) +
              ",\"block\":" + jsonString(std::to_string(a.block[0]) + "," +
                                         std::to_string(a.block[1]) + "," +
                                         std::to_string(a.block[2])) +
              ",\"regs\":" + std::to_string(a.regs) +
              ",\"smem\":" + std::to_string(a.staticSmem + a.dynamicSmem);
    } else {
      args += ",\"bytes\":" + std::to_string(a.bytes);
    }
    if (a.covers > 1) args += ",\"covers\":" + std::to_string(a.covers);
    events.push_back("{\"ph\":\"X\",\"pid\":1,\"tid\":" + std::to_string(tidOf(a.stream)) +
                     ",\"name\":" + jsonString(name) + ",\"cat\":\"" +
                     (a.kind == ActivityKind::Kernel ? "kernel" : "memory") + "\",\"ts\":" +
                     num(a.startUs) + ",\"dur\":" + num(a.durUs) + ",\"args\":{" + args + "}}");
    if (a.step < 0) continue;
    for (int s = a.step; s < a.step + a.covers; ++s) {
      auto f = first.find(s);
      if (f == first.end() || a.startUs < f->second->startUs) first[s] = &a;
      auto l = last.find(s);
      if (l == last.end() || a.startUs + a.durUs > l->second->startUs + l->second->durUs)
        last[s] = &a;
    }
  }
  for (int s : streams)
    events.push_back("{\"ph\":\"M\",\"pid\":1,\"tid\":" + std::to_string(tidOf(s)) +
                     ",\"name\":\"thread_name\",\"args\":{\"name\":" +
                     jsonString(s < 0 ? std::string("input copies") : "stream " + std::to_string(s)) +
                     "}}");
  // Flow arrows: "s" inside the waited-for step's last slice, "f" (binding to the enclosing
  // slice) at the start of the waiting step's first slice.
  const PlanProgram* p = plan ? plan->findProgram(program) : nullptr;
  int flowId = 0;
  for (size_t i = 0; p && i < p->steps.size(); ++i) {
    for (int w : p->steps[i].waits) {
      auto from = last.find(w);
      auto to = first.find(int(i));
      if (from == last.end() || to == first.end()) continue;
      const ActivityRecord& a = *from->second;
      const ActivityRecord& b = *to->second;
      std::string id = std::to_string(++flowId);
      std::string name = jsonString("event " + std::to_string(w) + " -> " + std::to_string(i));
      events.push_back("{\"ph\":\"s\",\"pid\":1,\"tid\":" + std::to_string(tidOf(a.stream)) +
                       ",\"name\":" + name + ",\"cat\":\"event\",\"id\":" + id + ",\"ts\":" +
                       num(a.startUs + a.durUs / 2) + "}");
      events.push_back("{\"ph\":\"f\",\"bp\":\"e\",\"pid\":1,\"tid\":" +
                       std::to_string(tidOf(b.stream)) + ",\"name\":" + name +
                       ",\"cat\":\"event\",\"id\":" + id + ",\"ts\":" +
                       num(b.startUs + b.durUs / 2) + "}");
    }
  }
  os << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  for (size_t i = 0; i < events.size(); ++i) os << events[i] << (i + 1 < events.size() ? ",\n" : "\n");
  os << "]}\n";
}

Status writeChromeTraceFile(const ProfileRecords& records, const Plan* plan,
                            const std::string& program, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status(ErrorCode::Io, "cannot write the trace file '" + path + "'");
  writeChromeTrace(records, plan, program, out);
  out.flush();
  if (!out) return Status(ErrorCode::Io, "cannot write the trace file '" + path + "'");
  return Status::ok();
}

} // namespace hgp
