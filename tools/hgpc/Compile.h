// Compile.h - the compile pipeline behind `hgpc compile`: import, passes, plan, bundle.
//
//   model.onnx --frontend--> forward graph --canonicalize--> (forward program, or)
//     copy 1 --train pipeline--> train graph      (loss, backward, optimizer)
//     copy 2 --eval pipeline---> eval graph       (inference-mode BN, loss, accuracy)
//   --emitter--> plan with programs "train" and "eval" (or "forward") --> bundle --> executable
#pragma once

#include "compiler/plan/PlanEmitter.h"
#include "compiler/schedule/BatchSlicing.h"
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
  bool printAfterAll = false;
  std::ostream* log = nullptr;
  /// --weights reference: read initial weights from the model file at start instead of
  /// embedding them in the executable.
  bool referenceWeights = false;
  /// Math mode: "tf32" lets convolutions and matrix products round fp32 inputs to TF32 on
  /// tensor cores (the default, as PyTorch's cuDNN convolutions do); "fp32" forbids it; "bf16"
  /// and "fp16" train in mixed precision (docs/precision.md): 16-bit activations and gradients,
  /// float32 master weights, optimizer state and loss.
  std::string precision = "tf32";
  /// --no-buffer-reuse: every transient tensor keeps bytes of its own (for debugging).
  bool reuseMemory = true;
  /// False (--no-fuse): the standard pipelines run without their fusion passes (fuse-batch-norm
  /// after autodiff, fuse-elementwise last; docs/fusion.md). An explicit --passes list is taken
  /// as given.
  bool fuse = true;
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

struct Compilation {
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

/// The activation dtype of a --precision: F32 for fp32 and tf32, BF16, F16; else a usage error.
Expected<DType> activationDType(const std::string& precision);
/// Whether a --layout (with the --precision and the target's architecture) means channels-last:
/// auto picks it where the precision runs on tensor cores (tf32 and bf16 from sm80, fp16 from
/// sm70); a usage error for an unknown layout.
Expected<bool> channelsLastLayout(const std::string& layout, const std::string& precision,
                                  int smArch);

/// Packs a compilation into a bundle: the plan text, the data section (moved out of `c`), and
/// the save template with the trained tensors cut out.
Expected<Bundle> bundleCompilation(Compilation& c, const CompileOptions& options);

} // namespace hgp
