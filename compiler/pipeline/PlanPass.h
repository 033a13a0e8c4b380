// PlanPass.h - the plan passes: registered by name, run as a list, printed and left out on
// request, as the IR passes are (passes/Pass.h).
//
// After the IR pipelines, `hgpc compile` and `hgpc plan` lower the programs to a plan and keep
// transforming that: emit-plan (the memory plan and the lowering), slice-batches (the split and
// the pipeline), generate-fused-kernels (NVRTC), load-records (--records) and assign-streams (the
// stream schedule). PlanPasses.def lists them once; planPipeline picks the ones the options
// ask for, in that order. `--print-after NAME` prints the plan text after a plan pass (as it
// prints the IR after an IR pass), `--print-after-all` after every pass of either kind, and
// `--disable-pass NAME` leaves one out (emit-plan excepted: every later pass works on its plan).
#pragma once

#include "compiler/plan/PlanEmitter.h"
#include "compiler/schedule/BatchSlicing.h"
#include "runtime/profile/Records.h"

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace hgp {

/// What the plan passes read, and what they produce, for one compilation.
struct PlanPassContext {
  // ---- Read: set up by the driver (tools/hgpc/Compile.cpp) before the pipeline runs. ----
  /// The programs emit-plan lowers, with their bindings.
  std::vector<ProgramSource> programs;
  EmitOptions emit;
  /// The GPU the analyses plan for, resolved once (--target).
  const Target* target = nullptr;
  Precision precision = Precision::TF32;
  /// slice-batches' switches and forced widths (target, precision and maxStreams set from the
  /// fields here when it runs).
  SliceOptions slicing;
  int maxStreams = 4;
  /// generate-fused-kernels: a plan with fused steps and no NVRTC is an error (hgpc compile -o)
  /// rather than a plan without kernels.
  bool kernelsRequired = false;
  /// load-records: the --records file.
  std::string recordsPath;

  // ---- Produced. ----
  EmittedPlan emitted;
  /// What slice-batches did to each program's steps.
  SliceResult sliced;
  /// The --records measurements, checked against the plan by load-records.
  std::optional<ProfileRecords> records;

  // ---- Debugging: --print-after-all and --print-after NAME. ----
  bool printAfterAll = false;
  std::vector<std::string> printAfter;
  std::ostream* log = nullptr;
};

using PlanPassFn = Status (*)(PlanPassContext&);

#define HGP_PLAN_PASS(Name, Fn, Description) Status Fn(PlanPassContext& ctx);
#include "compiler/pipeline/PlanPasses.def"

struct PlanPassInfo {
  const char* name;
  PlanPassFn fn;
  const char* description;
};

/// Every registered plan pass, in PlanPasses.def order (which is also the order they run in).
const std::vector<PlanPassInfo>& allPlanPasses();
/// Looks a plan pass up by name; a usage error lists the known names.
Expected<PlanPassFn> lookupPlanPass(const std::string& name);

/// What decides which plan passes a compilation runs.
struct PlanPipelineOptions {
  bool kernels = true;  ///< generate-fused-kernels (off for `hgpc plan`, which only reports).
  bool records = false; ///< load-records (--records FILE).
  bool streams = false; ///< assign-streams (--max-streams above 1, or data parallelism).
  /// --disable-pass names; those that are not plan passes are ignored here.
  std::vector<std::string> disabled;
};

/// The plan passes to run, in order; a usage error when `disabled` names emit-plan.
Expected<std::vector<std::string>> planPipeline(const PlanPipelineOptions& options);

/// Runs the named plan passes in order, validating the plan after each (an internal error names
/// the pass), and printing it after each that --print-after names.
Status runPlanPipeline(const std::vector<std::string>& passes, PlanPassContext& ctx);

} // namespace hgp
