#include "compiler/schedule/AssignStreams.h"

#include "compiler/schedule/StreamSchedule.h"

#include <algorithm>

namespace hgp {

StreamAssignment assignStreams(Plan& plan, const Target& target, Precision precision,
                               int maxStreams, const CostCalibration& cal,
                               const ProfileRecords* records) {
  StreamAssignment out;
  maxStreams = std::clamp(maxStreams, 1, kMaxPlanStreams);
  for (PlanProgram& program : plan.programs) {
    ++out.programs;
    for (PlanStep& s : program.steps) s.stream = 0, s.waits.clear();
    // Collectives get a stream of their own beyond the pool, also with one compute stream, so
    // that communication overlaps compute (docs/distributed.md).
    bool collectives = std::any_of(program.steps.begin(), program.steps.end(),
                                   [](const PlanStep& s) { return s.op == OpKind::AllReduce; });
    if (maxStreams == 1 && !collectives) continue;
    int pool = collectives ? std::min(maxStreams, kMaxPlanStreams - 1) : maxStreams;
    ProgramMeasurement measured;
    if (records) measured = measureProgram(*records, program);
    ProgramCost cost = programCost(target, plan, program, precision, cal,
                                   measured.present ? &measured : nullptr);
    StreamSchedule sched = scheduleStreams(target, plan, program, cost, pool);
    for (size_t i = 0; i < program.steps.size(); ++i) program.steps[i].stream = sched.stream[i];
    for (const StreamSchedule::Event& e : sched.events)
      program.steps[size_t(e.to)].waits.push_back(e.from);
    for (PlanStep& s : program.steps) std::sort(s.waits.begin(), s.waits.end());
    out.maxStreamsUsed = std::max(out.maxStreamsUsed, sched.streams);
    out.events += sched.events.size();
  }
  return out;
}

} // namespace hgp
