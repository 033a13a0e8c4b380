// Compile.h - the compile pipeline behind `hgpc compile` and `hgpc plan`: import, IR passes,
// plan passes, bundle.
//
//   resolveOptions: --target (the local GPU asked once), --precision, --layout -> ResolvedOptions
//   model.onnx --frontend--> forward graph --forward pipeline--> (forward program, or)
//     copy 1 --train pipeline--> train graph      (loss, backward, optimizer)
//     copy 2 --eval pipeline---> eval graph       (inference-mode BN, loss, accuracy)
//   --plan pipeline (emit-plan, slice-batches, generate-fused-kernels, load-records,
//     assign-streams)--> plan with programs "train" and "eval" (or "forward") --> bundle
//
// passes/Pipeline.h assembles the IR pipelines and compiler/pipeline/PlanPass.h the plan
// pipeline; this file only connects them.
#pragma once

#include "compiler/pipeline/PlanPass.h"
#include "frontends/onnx/OnnxImporter.h"
#include "passes/Pass.h"
#include "runtime/bundle/Bundle.h"
#include "runtime/profile/Records.h"

#include <memory>
#include <optional>
#include <ostream>
#include <string>

namespace hgp {

struct CompileOptions {
  std::string modelPath;
  int64_t batch = 0;
  /// False: a forward-only plan (program "forward"), as for inference or conformance tests.
  bool training = true;
  TrainOptions train;
  /// Replaces the train pipeline's pass list when non-empty (--passes).
  std::vector<std::string> passes;
  /// Passes left out of the standard train and eval pipelines (--disable-pass NAME), to measure
  /// what one pass is worth; each must name a registered pass.
  std::vector<std::string> disabledPasses;
  /// --print-after-all: the IR after every IR pass and the plan after every plan pass.
  bool printAfterAll = false;
  /// --print-after NAME: the IR (or plan) after the passes named; each must name a pass.
  std::vector<std::string> printAfter;
  std::ostream* log = nullptr; ///< Where the printing goes.
  /// --weights reference: read initial weights from the model file at start instead of
  /// embedding them in the executable.
  bool referenceWeights = false;
  /// Math mode: TF32 lets convolutions and matrix products round fp32 inputs to TF32 on tensor
  /// cores (the default, as PyTorch's cuDNN convolutions do); FP32 forbids it; BF16 and FP16
  /// train in mixed precision (docs/precision.md): 16-bit activations and gradients, float32
  /// master weights, optimizer state and loss.
  Precision precision = Precision::TF32;
  /// --no-buffer-reuse: every transient tensor keeps bytes of its own (for debugging).
  bool reuseMemory = true;
  /// False (--no-views): Reshape, Slice, Split and Concat always run as copies; true: those
  /// that can be views of their operands' bytes run no step (compiler/analysis/Views.h).
  bool views = true;
  /// Channel ranges of a batch (DenseNet's concatenations, ShuffleNet's splits) become pitched
  /// views where every step touching them takes one; off with --no-strided-views. On by default
  /// since the H200 timed it (docs/benchmarks.md): DenseNet-121 b64 bf16 8% faster and 26% less
  /// memory, ShuffleNet-v2 and RegNet-Y unchanged.
  bool stridedViews = true;
  /// False (--no-fuse): the standard pipelines run without their fusion passes (fuse-batch-norm
  /// after autodiff, fuse-elementwise last; docs/fusion.md). An explicit --passes list is taken
  /// as given.
  bool fuse = true;
  /// --conv-bn-fusion: run the fuse-conv-bn pass (bf16/fp16). Off by default until its CUDA
  /// path has passed on a GPU: the H200 run of 2026-12-02 refused every stats=1 convolution.
  bool convBnFusion = false;
  /// "nchw", "nhwc" or "auto": channels-last activations around the convolutions (the pass
  /// layout-nhwc, docs/layout.md); auto picks nhwc where the precision runs on the target's
  /// tensor cores (tf32, bf16, fp16), whose convolutions want it, and nchw for fp32.
  std::string layout = "auto";
  /// The GPU the schedule is made for (--target); empty: the local GPU when hgpc knows it,
  /// else h200.
  std::string target;
  /// The intra-layer split and the micro-batch pipeline (--no-split, --no-pipeline,
  /// --split-width, --pipeline-depth); the analysis plans for `target`.
  SliceOptions slicing;
  /// Streams each program may use (--max-streams); 1 keeps the plan on one stream.
  int maxStreams = 4;
  /// --records FILE: a profiling run's measurements (EXE --profile). compileModel checks them
  /// against the plan and keeps them in Compilation::records, for the cost model the stream
  /// schedule is made with (measureProgram + programCost's `measured`).
  std::string records;
  /// CUDA kernels for the fused groups (compiler/codegen): Off (hgpc plan, which only reports),
  /// IfAvailable (compiled when NVRTC loads; otherwise the plan runs on the CPU backend only), or
  /// Required (hgpc compile: a plan with fused groups and no NVRTC is an error).
  enum class Kernels { Off, IfAvailable, Required } kernels = Kernels::IfAvailable;
};

/// The options every stage reads, resolved once from CompileOptions (and checked: errors are
/// usage errors, before the model is read).
struct ResolvedOptions {
  /// --target; empty: the local GPU when hgpc knows it, else the H200 (the driver asked once).
  Target target;
  Precision precision = Precision::TF32;
  /// Whether --layout (auto: where the precision runs on the target's tensor cores) means
  /// channels-last activations around the convolutions.
  bool nhwc = false;
};

/// Resolves and checks `options`: the target, the layout, the precision's combinations, the
/// pass names of --disable-pass and --print-after, and the training options.
Expected<ResolvedOptions> resolveOptions(const CompileOptions& options);

/// The target of a --target: the one named, or (empty) the local GPU, or the H200 when the local
/// GPU is missing or unknown. "auto" insists on the local GPU.
Expected<Target> resolveTarget(const std::string& name);

struct Compilation {
  ResolvedOptions resolved;
  OnnxModelInfo info;
  std::unique_ptr<Graph> forward; ///< As imported and canonicalized.
  std::unique_ptr<Graph> train, eval;
  EmittedPlan emitted;
  /// What the split and the pipeline did to each program's steps.
  SliceResult slicing;
  PassContext ctx;
  /// The --records measurements, already checked against `emitted.plan`.
  std::optional<ProfileRecords> records;
};

Expected<Compilation> compileModel(const CompileOptions& options);

/// Whether a --layout (with the precision and the target's architecture) means channels-last:
/// auto picks it where the precision runs on tensor cores (runsOnTensorCores: tf32 and bf16
/// from sm80, fp16 from sm70); a usage error for an unknown layout.
Expected<bool> channelsLastLayout(const std::string& layout, Precision precision, int smArch);

/// Packs a compilation into a bundle: the plan text, the data section (moved out of `c`), and
/// the save template with the trained tensors cut out.
Expected<Bundle> bundleCompilation(Compilation& c, const CompileOptions& options);

} // namespace hgp
