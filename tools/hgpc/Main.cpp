// Main.cpp - the hgpc command-line tool.
//
//   hgpc inspect MODEL.onnx [--batch N]
//   hgpc compile MODEL.onnx -o EXE [--emit ir|train-ir|plan] [--target NAME|auto]
//                [--max-streams N] [--records FILE] [slicing options] [training options]
//   hgpc compare A.onnx B.onnx ... [--batch N] [--target T] [--precision P] [--html F] [--json]
//   hgpc explore MODEL.onnx [--target T] [--batch 32,64,...|auto] [--precision tf32,bf16,...]
//                [--memory-limit GiB] [--measure] [--html F] [--json]        (docs/explore.md)
//   hgpc plan MODEL.onnx [--batch N] [--target NAME|auto] [--max-streams N] [--emit text|dot]
//             [--precision fp32|tf32|bf16|fp16] [--records FILE]
//             [slicing options] [training options]
//   slicing options: --no-split --no-pipeline --split-width K --pipeline-depth M
//   fusion and layout: --no-fuse, --no-conv-bn-fusion (docs/fusion.md), --layout auto|nchw|nhwc (docs/layout.md)
//   (`--max-streams 1 --no-split --no-pipeline` gives the plain single-stream plan)
//
// Exit codes: 0 ok, 1 internal error, 2 usage error, 3 invalid or unsupported model, 4 i/o
// error, 5 records of another plan or malformed records (docs/exit-codes.md).
#include "tools/hgpc/Compile.h"
#include "tools/hgpc/Explore.h"
#include "tools/hgpc/Inspect.h"
#include "tools/hgpc/PlanReport.h"
#include "tools/hgpc/TrainFlags.h"
#include "ir/Printer.h"

#include <CLI/CLI.hpp>
#include <llvm/ADT/StringRef.h> // PrintStackTraceOnErrorSignal takes one; Signals.h only declares it
#include <llvm/Support/Signals.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <unistd.h>

namespace hgp {
namespace {

int fail(const Status& st) {
  std::fprintf(stderr, "hgpc: %s\n", st.toString().c_str());
  return exitCodeFor(st.code());
}

/// The prebuilt runner: $HGPC_RUNNER, or hgpc-runner next to this executable.
std::string runnerPath(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("HGPC_RUNNER")) return env;
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / "hgpc-runner").string();
}

/// The batch-slicing flags, shared by `compile` and `plan`.
void addSlicingOptions(CLI::App* cmd, SliceOptions& s) {
  cmd->add_flag_function(
      "--no-split", [&s](int64_t) { s.split = false; },
      "no intra-layer split into concurrent sub-batches");
  cmd->add_flag_function(
      "--no-pipeline", [&s](int64_t) { s.pipeline = false; },
      "no micro-batch pipeline over runs of per-sample layers");
  cmd->add_option("--split-width", s.width,
                  "testing: split every splittable step into K sub-batches (default: the "
                  "analyzer's choice per step)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--pipeline-depth", s.depth,
                  "testing: pipeline every run of per-sample steps over M micro-batches "
                  "(default: the analyzer's stage size)")
      ->check(CLI::Range(1, 64));
}

/// A count that must be at least 1 (--batch): 0 or a negative number is a usage error that says
/// so, not a request for the model's own batch dim.
const CLI::Validator kPositiveCount(
    [](std::string& s) -> std::string {
      long long v = 0;
      size_t used = 0;
      try { v = std::stoll(s, &used); } catch (...) { used = 0; }
      return used == s.size() && v >= 1 ? "" : "must be a whole number of at least 1, got " + s;
    },
    "N>=1");

/// The fusion switch, shared by `compile` and `plan` (docs/fusion.md).
void addFusionOptions(CLI::App* cmd, CompileOptions& o) {
  cmd->add_flag_function(
      "--no-fuse", [&o](int64_t) { o.fuse = false; },
      "no fusion passes: every BatchNorm, Relu, Add, elementwise op and their gradients run as "
      "kernels of their own");
  cmd->add_flag_function(
      "--conv-bn-fusion", [&o](int64_t) { o.convBnFusion = true; },
      "bf16/fp16: take each BatchNorm's channel sums from the convolution before it instead "
      "of a statistics pass (the fuse-conv-bn pass, docs/fusion.md; experimental, off by "
      "default until its CUDA path passes on a GPU)");
  cmd->add_flag_function(
      "--no-conv-bn-fusion", [&o](int64_t) { o.convBnFusion = false; },
      "the default: keep each BatchNorm's statistics pass");
  cmd->add_option("--disable-pass", o.disabledPasses,
                  "leave this IR pass out of the train and eval pipelines, or this plan pass out "
                  "of the plan pipeline (repeatable; to measure what one pass is worth, e.g. "
                  "fuse-gradient-sums)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--layout", o.layout,
                  "activation layout around the convolutions: auto (default: nhwc for bf16 and "
                  "fp16, nchw otherwise), nchw or nhwc (docs/layout.md)")
      ->check(CLI::IsMember({"auto", "nchw", "nhwc"}));
  cmd->add_flag_function(
      "--no-views", [&o](int64_t) { o.views = false; },
      "run every Reshape, Slice, Split and Concat as a copy (by default those that can share "
      "their operand's bytes run no step; docs/plan-format.md, Views)");
  cmd->add_flag_function(
      "--no-strided-views", [&o](int64_t) { o.stridedViews = false; },
      "keep channel ranges of a batch as copies (by default they are pitched views: a Concat "
      "written in place by its producers, a Split or Slice read in place, where every step "
      "touching them takes one; the copies that stay say why; docs/plan-format.md, Views)");
  cmd->add_flag_function(
      "--strided-views", [&o](int64_t) { o.stridedViews = true; },
      "pitched views of channel ranges (the default; kept so that older command lines run)");
}

/// The importer's one-line warnings (docs/training.md, "Inference exports"), on stderr.
void printWarnings(const OnnxModelInfo& info) {
  for (const std::string& w : info.warnings) std::fprintf(stderr, "hgpc: warning: %s\n", w.c_str());
}

int runPlan(CompileOptions& o, int maxStreams, const CostCalibration& cal, bool dot) {
  o.slicing.cal = cal;
  o.kernels = CompileOptions::Kernels::Off; // the report needs no machine code
  auto compiled = compileModel(o);
  if (!compiled) return fail(compiled.status());
  const Target* target = &compiled->resolved.target;
  printWarnings(compiled->info);
  const ProfileRecords* records = compiled->records ? &*compiled->records : nullptr;
  if (records && records->sms != target->sms)
    std::fprintf(stderr, "hgpc: note: the records were measured on %s (%d SMs), not on the target "
                         "%s (%d SMs); measured times are used as they are\n",
                 records->gpu.c_str(), records->sms, target->name.c_str(), target->sms);
  if (dot)
    printPlanDot(compiled->emitted.plan, *target, o.precision, maxStreams, cal, std::cout, records);
  else
    printPlanReport(compiled->emitted.plan, *target, o.precision, maxStreams, cal, std::cout,
                    records, &compiled->slicing);
  return 0;
}

int runCompile(CompileOptions& o, const std::string& out, const std::string& emit,
               const std::string& runner, bool stats) {
  o.log = &std::cout;
  if (!out.empty()) o.kernels = CompileOptions::Kernels::Required;
  auto compiled = compileModel(o);
  if (!compiled) return fail(compiled.status());
  Compilation& c = *compiled;
  printWarnings(c.info);
  if (emit == "ir") std::cout << printGraph(*c.forward);
  else if (emit == "train-ir") {
    if (!c.train) return fail(Status(ErrorCode::Usage, "--emit train-ir needs a training compile"));
    std::cout << printGraph(*c.train) << printGraph(*c.eval);
  } else if (emit == "plan") std::cout << printPlan(c.emitted.plan);
  if (stats)
    for (const auto& [k, v] : c.ctx.stats) std::cerr << "stat " << k << " = " << v << "\n";
  if (out.empty()) {
    if (emit.empty())
      return fail(Status(ErrorCode::Usage, "nothing to do: pass -o EXE or --emit ir|train-ir|plan"));
    return 0;
  }
  auto bundle = bundleCompilation(c, o);
  if (!bundle) return fail(bundle.status());
  Status st = writeExecutable(runnerPath(runner), *bundle, out);
  if (!st) return fail(st);
  const Plan& p = c.emitted.plan;
  std::fprintf(stderr, "hgpc: wrote %s (%s, batch %lld, %lld parameters, arena %.1f MiB)\n",
               out.c_str(), o.training ? "training" : "forward only",
               (long long)p.meta.getInt("batch"), (long long)p.meta.getInt("parameters"),
               double(p.persistentBytes + p.transientBytes) / (1 << 20));
  return 0;
}

int main(int argc, char** argv) {
  llvm::sys::PrintStackTraceOnErrorSignal(argv[0]);
  CLI::App app{"hgpc: an ahead-of-time training compiler for convolutional networks"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "hgpc 0.1.0");

  std::string model;
  int64_t batch = 0;
  auto* inspect = app.add_subcommand("inspect", "print a model's inputs, outputs, parameters, "
                                                "op histogram and per-layer shapes and FLOPs");
  inspect->add_option("model", model, "the ONNX model")->required()->check(CLI::ExistingFile);
  inspect->add_option("--batch", batch, "batch size (fixes a symbolic batch dim)")
      ->check(kPositiveCount);

  CompileOptions co;
  std::string out, emit, runner, passes;
  bool forwardOnly = false, stats = false;
  std::string weights = "embed";
  auto* compile = app.add_subcommand("compile", "compile a model into a training executable");
  compile->add_option("model", model, "the ONNX model")->required()->check(CLI::ExistingFile);
  compile->add_option("-o,--output", out, "the executable to write");
  compile->add_option("--emit", emit, "also print: ir (imported), train-ir, plan")
      ->check(CLI::IsMember({"ir", "train-ir", "plan"}));
  std::string compileBatch;
  compile->add_option("--batch", compileBatch,
                      "batch size (fixes a symbolic batch dim), or auto: the largest whose plan "
                      "fits the target's memory (docs/explore.md)")
      ->check(CLI::IsMember({"auto"}) | kPositiveCount);
  double compileMemoryLimit = 0;
  compile->add_option("--memory-limit", compileMemoryLimit,
                      "with --batch auto: GiB the plan and the runtime may use (default: the "
                      "target's memory)")
      ->check(CLI::PositiveNumber);
  compile->add_flag("--forward-only", forwardOnly, "compile the forward pass only (no training)");
  compile->add_option("--weights", weights,
                      "embed: carry initial weights in the executable; reference: read them from "
                      "the model file at start")
      ->check(CLI::IsMember({"embed", "reference"}));
  addPrecisionOption(compile, co.precision,
                     "tf32 (default: TF32 tensor cores for fp32 convolutions and GEMMs), fp32, "
                     "or mixed precision: bf16, fp16 (docs/precision.md)");
  compile->add_option("--passes", passes, "comma-separated train pipeline (expert use)");
  bool noReuse = false;
  compile->add_flag("--no-buffer-reuse", noReuse,
                    "give every intermediate tensor memory of its own (debugging: all of them "
                    "survive a step; the arena grows)");
  compile->add_option("--target", co.target,
                      "the GPU to schedule for: h200, h100, a100, v100, t4, l4 or auto (default: "
                      "the local GPU if hgpc knows it, else h200)");
  compile->add_option("--max-streams", co.maxStreams,
                      "streams each program may use (1: everything on one stream)")
      ->check(CLI::Range(1, kMaxPlanStreams));
  compile->add_flag("--print-after-all", co.printAfterAll,
                    "print the IR after every IR pass and the plan after every plan pass");
  compile->add_option("--print-after", co.printAfter,
                      "print the IR (or, after a plan pass, the plan) after this pass (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  compile->add_flag("--stats", stats, "print pass statistics");
  compile->add_option("--runner", runner, "the prebuilt runner to embed (default: next to hgpc)");
  compile->add_option("--records", co.records,
                      "measurements of a profiling run (EXE --profile FILE) to use in place of the "
                      "cost model's estimates")
      ->check(CLI::ExistingFile);
  addSlicingOptions(compile, co.slicing);
  addTrainingOptions(compile, co.train);
  addFusionOptions(compile, co);

  std::string target = "auto";
  auto* plan = app.add_subcommand("plan", "print the scheduled training plan with the cost "
                                          "model's predictions for a target GPU");
  plan->add_option("model", model, "the ONNX model")->required()->check(CLI::ExistingFile);
  plan->add_option("--batch", batch, "batch size (fixes a symbolic batch dim)")
      ->check(kPositiveCount);
  plan->add_option("--target", target, "the GPU to plan for: h200, h100, a100, v100, t4, l4 or "
                                       "auto (the local GPU)");
  int maxStreams = 4;
  std::string planEmit = "text";
  plan->add_option("--emit", planEmit, "text (default) or dot: the scheduled DAG for Graphviz")
      ->check(CLI::IsMember({"text", "dot"}));
  std::vector<double> calibration;
  plan->add_option("--calibration", calibration,
                   "expert: the cost model's compute and memory efficiencies, the fixed "
                   "microseconds per GEMM kernel and optionally the TF32 compute efficiency and "
                   "the fixed microseconds per kernel, for fitting it (bench/prediction.py)")
      ->delimiter(',')
      ->expected(3, 5);
  plan->add_option("--max-streams", maxStreams, "streams the schedule may use (1: one stream)")
      ->check(CLI::Range(1, kMaxPlanStreams));
  addPrecisionOption(plan, co.precision, "tf32 (default), fp32, bf16 or fp16");
  plan->add_option("--records", co.records,
                   "measurements of a profiling run (EXE --profile FILE) to use in place of the "
                   "cost model's estimates")
      ->check(CLI::ExistingFile);
  addSlicingOptions(plan, co.slicing);
  addTrainingOptions(plan, co.train);
  addFusionOptions(plan, co);

  ExploreArgs ea;
  std::string compareBatch;
  auto* compare = app.add_subcommand("compare", "compare models side by side: parameters, FLOPs, "
                                                "peak memory, predicted step time and where it goes");
  compare->add_option("models", ea.models, "two or more ONNX models")->required()->check(CLI::ExistingFile);
  compare->add_option("--batch", batch, "batch size (fixes a symbolic batch dim)")
      ->check(kPositiveCount);
  auto* explore = app.add_subcommand("explore", "predict step time, images/s and peak memory over "
                                                "batch sizes and precisions; --measure times them");
  explore->add_option("model", model, "the ONNX model")->required()->check(CLI::ExistingFile);
  explore->add_option("--batch", ea.batches, "batch sizes, comma-separated (default 32,64,128,256), "
                                            "or auto: powers of two up to the largest that fits")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast); // a later --batch overrides

  explore->add_option("--memory-limit", ea.memoryLimitGiB,
                      "GiB the plan and the runtime may use (default: the target's memory; with "
                      "--measure the device's free memory)");
  explore->add_flag("--measure", ea.measure, "also run each configuration on the local GPU and "
                                             "print measured beside predicted");
  explore->add_option("--measure-steps", ea.measureSteps, "training steps per measured configuration")
      ->check(CLI::Range(12, 100000));
  explore->add_option("--runner", runner, "the prebuilt runner to embed (default: next to hgpc)");
  addPrecisionOption(compare, co.precision, "tf32 (default), fp32, bf16 or fp16");
  explore->add_option("--precision", ea.precisions, "precisions, comma-separated: tf32 (default), "
                                                   "fp32, bf16, fp16")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  for (CLI::App* cmd : {compare, explore}) {
    cmd->add_option("--target", ea.target, "the GPU: h200, h100, a100, v100, t4, l4 or auto "
                                           "(default: the local GPU, else h200)");
    cmd->add_option("--html", ea.html, "also write a self-contained HTML report");
    cmd->add_flag("--json", ea.json, "print JSON instead of the table");
    cmd->add_option("--max-streams", co.maxStreams, "streams the schedule may use")
        ->check(CLI::Range(1, kMaxPlanStreams));
    addSlicingOptions(cmd, co.slicing);
    addTrainingOptions(cmd, co.train);
    addFusionOptions(cmd, co);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : exitCodeFor(ErrorCode::Usage);
  }

  if (inspect->parsed()) {
    Status st = inspectModel(model, batch, std::cout);
    return st.isOk() ? 0 : fail(st);
  }
  bool compileAutoBatch = compileBatch == "auto";
  if (!compileBatch.empty() && !compileAutoBatch) batch = std::stoll(compileBatch);
  co.modelPath = model;
  co.batch = batch;
  if (compare->parsed() || explore->parsed()) {
    if (explore->parsed()) ea.models = {model};
    ea.base = co;
    ea.runner = runnerPath(runner);
    Status st = compare->parsed() ? runCompare(ea, std::cout) : runExplore(ea, std::cout);
    return st.isOk() ? 0 : fail(st);
  }
  if (plan->parsed()) {
    co.target = target;
    co.maxStreams = maxStreams;
    CostCalibration cal;
    if (calibration.size() >= 3) {
      cal.computeEfficiency = calibration[0];
      cal.memoryEfficiency = calibration[1];
      cal.gemmFixedSeconds = calibration[2] * 1e-6;
    }
    if (calibration.size() >= 4) cal.tf32ComputeEfficiency = calibration[3];
    if (calibration.size() >= 5) cal.kernelSeconds = calibration[4] * 1e-6;
    return runPlan(co, maxStreams, cal, planEmit == "dot");
  }
  co.training = !forwardOnly;

  co.referenceWeights = weights == "reference";
  co.reuseMemory = !noReuse;
  for (size_t b = 0, e; b < passes.size(); b = e + 1) {
    e = passes.find(',', b);
    if (e == std::string::npos) e = passes.size();
    if (e > b) co.passes.push_back(passes.substr(b, e - b));
  }
  if (compileAutoBatch) {
    Expected<int64_t> b = autoBatch(co, compileMemoryLimit, std::cerr);
    if (!b) return fail(b.status());
    co.batch = *b;
  }
  return runCompile(co, out, emit, runner, stats);
}

} // namespace
} // namespace hgp

int main(int argc, char** argv) { return hgp::main(argc, argv); }
