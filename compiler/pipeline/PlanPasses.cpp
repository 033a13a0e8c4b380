// PlanPasses.cpp - the plan passes of PlanPasses.def: each adapts one transformation, which
// lives in its own file, to the PlanPassContext.
#include "compiler/codegen/GenerateKernels.h"
#include "compiler/pipeline/PlanPass.h"
#include "compiler/schedule/AssignStreams.h"

namespace hgp {

Status runEmitPlan(PlanPassContext& ctx) {
  HGP_ASSIGN_OR_RETURN(ctx.emitted, emitPlan(ctx.programs, ctx.emit));
  return Status::ok();
}

Status runSliceBatches(PlanPassContext& ctx) {
  SliceOptions o = ctx.slicing;
  o.target = ctx.target;
  o.precision = ctx.precision;
  o.maxStreams = ctx.maxStreams;
  ctx.sliced = sliceBatches(ctx.emitted.plan, o);
  return Status::ok();
}

Status runGenerateFusedKernels(PlanPassContext& ctx) {
  return generateFusedKernels(ctx.emitted.plan, ctx.target->smArch(), ctx.kernelsRequired);
}

Status runLoadRecords(PlanPassContext& ctx) {
  HGP_ASSIGN_OR_RETURN(ProfileRecords r, readRecordsFile(ctx.recordsPath));
  HGP_TRY_CTX(checkRecordsMatch(r, ctx.emitted.plan), "--records " + ctx.recordsPath);
  ctx.records = std::move(r);
  return Status::ok();
}

Status runAssignStreams(PlanPassContext& ctx) {
  StreamAssignment a = assignStreams(ctx.emitted.plan, *ctx.target, ctx.precision, ctx.maxStreams,
                                     {}, ctx.records ? &*ctx.records : nullptr);
  ctx.emitted.plan.meta.setString("target", ctx.target->name);
  ctx.emitted.plan.meta.setInt("streams", a.maxStreamsUsed);
  return Status::ok();
}

} // namespace hgp
