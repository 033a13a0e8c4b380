#include "passes/Pass.h"

#include "ir/Printer.h"

#include <algorithm>

namespace hgp {

const std::vector<PassInfo>& allPasses() {
  static const std::vector<PassInfo> passes = {
#define HGP_PASS(Name, Fn, Description) {Name, &Fn, Description},
#include "passes/PassRegistry.def"
  };
  return passes;
}

Expected<PassFn> lookupPass(const std::string& name) {
  std::string known;
  for (const auto& p : allPasses()) {
    if (name == p.name) return p.fn;
    known += std::string(known.empty() ? "" : ", ") + p.name;
  }
  return Status(ErrorCode::Usage, "unknown pass '" + name + "' (known: " + known + ")");
}

Status runPipeline(Graph& g, const std::vector<std::string>& passes, PassContext& ctx) {
  for (const std::string& name : passes) {
    HGP_ASSIGN_OR_RETURN(PassFn fn, lookupPass(name));
    HGP_TRY_CTX(fn(g, ctx), "pass " + name);
    Status st = verifyGraph(g);
    if (!st.isOk())
      return Status(ErrorCode::Internal, "the IR is invalid after pass " + name + ": " + st.message());
    bool print = ctx.printAfterAll ||
                 std::find(ctx.printAfter.begin(), ctx.printAfter.end(), name) != ctx.printAfter.end();
    if (print && ctx.log)
      *ctx.log << "// ----- IR after " << name << " (" << g.name() << ") -----\n" << printGraph(g);
  }
  return Status::ok();
}

Node* soleReader(const Graph& g, const Value* v) {
  if (v->users().size() != 1 || escapesGraph(g, v)) return nullptr;
  return v->users()[0];
}

bool escapesGraph(const Graph& g, const Value* v) {
  if (std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end()) return true;
  for (const Carry& c : g.carries())
    if (c.state == v || c.next == v) return true;
  return false;
}

Status takeOverValues(Graph& g, PassContext& ctx,
                      const std::vector<std::pair<Value*, Value*>>& take,
                      const std::vector<Node*>& dead) {
  std::vector<std::pair<Value*, std::string>> names;
  for (auto& [from, to] : take) {
    g.replaceAllUsesWith(from, to);
    to->setRole(from->role());
    names.push_back({to, from->name()});
    for (auto& pg : ctx.paramGrads)
      if (pg.second == from) pg.second = to;
  }
  for (Node* n : dead) HGP_TRY(g.eraseNode(n));
  for (auto& [v, name] : names) HGP_TRY(g.renameValue(v, name));
  return Status::ok();
}

Status TrainOptions::validate() const {
  auto bad = [](const std::string& m) { return Status(ErrorCode::Usage, m); };
  if (loss != "cross-entropy" && loss != "mse")
    return bad("--loss must be cross-entropy or mse, not '" + loss + "'");
  if (!(labelSmoothing >= 0 && labelSmoothing <= 1)) return bad("--label-smoothing must be in [0, 1]");
  if (optimizer != "sgd" && optimizer != "adam" && optimizer != "adamw")
    return bad("--optimizer must be sgd, adam or adamw, not '" + optimizer + "'");
  if (!(lr >= 0)) return bad("--lr must be >= 0");
  if (!(momentum >= 0)) return bad("--momentum must be >= 0");
  if (nesterov && (momentum <= 0 || dampening != 0))
    return bad("--nesterov needs --momentum > 0 and zero dampening");
  if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1)) return bad("betas must be in [0, 1)");
  if (!(eps >= 0)) return bad("--eps must be >= 0");
  if (pixels != "auto" && pixels != "u8" && pixels != "f32")
    return bad("--pixels must be auto, u8 or f32, not '" + pixels + "'");
  if (pixels != "u8" && !pixelMean.empty())
    return bad("--normalize compiles the normalization into an 8-bit pixel input; it needs --pixels u8 "
               "(with float input, give --normalize to the executable instead)");
  for (double sd : pixelStd)
    if (!(sd > 0)) return bad("--normalize: std must be positive");
  if (schedule != "constant" && schedule != "step" && schedule != "multistep" &&
      schedule != "cosine")
    return bad("--schedule must be constant, step, multistep or cosine, not '" + schedule + "'");
  if (schedule == "step" && stepSize < 1) return bad("--schedule step needs --step-size >= 1");
  if (schedule == "multistep" && milestones.empty())
    return bad("--schedule multistep needs --milestones");
  if (schedule == "cosine" && tMax < 1) return bad("--schedule cosine needs --t-max >= 1");
  if (warmupSteps < 0) return bad("--warmup-steps must be >= 0");
  if (ranks < 1 || ranks > 4096) return bad("--ranks must be in [1, 4096]");
  if (bucketBytes < 1) return bad("--bucket-mb must be positive");
  if (syncBn && ranks < 2) return bad("--sync-bn needs --ranks 2 or more");
  if (metricsRing < 1 || metricsRing > 4096) return bad("the metrics ring must hold 1 to 4096 rows");
  return Status::ok();
}

} // namespace hgp
