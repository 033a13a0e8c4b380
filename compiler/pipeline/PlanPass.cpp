#include "compiler/pipeline/PlanPass.h"

#include <algorithm>

namespace hgp {

const std::vector<PlanPassInfo>& allPlanPasses() {
  static const std::vector<PlanPassInfo> passes = {
#define HGP_PLAN_PASS(Name, Fn, Description) {Name, &Fn, Description},
#include "compiler/pipeline/PlanPasses.def"
  };
  return passes;
}

Expected<PlanPassFn> lookupPlanPass(const std::string& name) {
  std::string known;
  for (const auto& p : allPlanPasses()) {
    if (name == p.name) return p.fn;
    known += std::string(known.empty() ? "" : ", ") + p.name;
  }
  return Status(ErrorCode::Usage, "unknown plan pass '" + name + "' (known: " + known + ")");
}

Expected<std::vector<std::string>> planPipeline(const PlanPipelineOptions& o) {
  auto disabled = [&](const std::string& name) {
    return std::find(o.disabled.begin(), o.disabled.end(), name) != o.disabled.end();
  };
  if (disabled("emit-plan"))
    return Status(ErrorCode::Usage,
                  "--disable-pass emit-plan: every later pass works on the plan it emits");
  std::vector<std::string> names;
  for (const PlanPassInfo& p : allPlanPasses()) {
    std::string name = p.name;
    if (disabled(name) || (name == "generate-fused-kernels" && !o.kernels) ||
        (name == "load-records" && !o.records) || (name == "assign-streams" && !o.streams))
      continue;
    names.push_back(name);
  }
  return names;
}

Status runPlanPipeline(const std::vector<std::string>& passes, PlanPassContext& ctx) {
  for (const std::string& name : passes) {
    HGP_ASSIGN_OR_RETURN(PlanPassFn fn, lookupPlanPass(name));
    HGP_TRY_CTX(fn(ctx), "plan pass " + name);
    if (Status st = ctx.emitted.plan.validate(); !st)
      return Status(ErrorCode::Internal,
                    "the plan is invalid after plan pass " + name + ": " + st.message());
    bool print = ctx.printAfterAll || std::find(ctx.printAfter.begin(), ctx.printAfter.end(),
                                                name) != ctx.printAfter.end();
    if (print && ctx.log)
      *ctx.log << "// ----- plan after " << name << " -----\n" << printPlan(ctx.emitted.plan);
  }
  return Status::ok();
}

} // namespace hgp
