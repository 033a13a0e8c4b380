// Pipeline.h - which IR passes run, in which order: the one place the pipelines are assembled.
//
// The core lists (forwardPipeline, trainPipeline, evalPipeline) are the passes every compile
// runs. pipelineFor adds what the options ask for, each where it must go:
//
//   - mixed-precision right after add-loss for bf16 and fp16 (16-bit activations before autodiff
//     differentiates them), and loss-scaling after it in fp16 training;
//   - image-input after them for --pixels u8 (it folds mixed precision's Cast of the input);
//   - layout-nhwc after the optimizer, so that it converts the forward and backward ops around
//     each convolution together;
//   - fuse-elementwise and fuse-casts last: on whatever elementwise chains fuse-batch-norm left,
//     then on the parameter casts; --no-fuse leaves out every fuse-* pass instead;
//   - --disable-pass NAME leaves that pass out.
#pragma once

#include "runtime/plan/Precision.h"

#include <string>
#include <vector>

namespace hgp {

/// The program a pipeline builds.
enum class PipelineKind {
  Forward, ///< The imported model as a forward-only program (and the start of the other two).
  Train,   ///< Loss, backward pass and optimizer update, on a copy of the forward graph.
  Eval,    ///< Inference-mode BatchNorm, no dropout, loss and accuracy count.
};

/// The options that decide the passes beyond the core lists.
struct PipelineOptions {
  Precision precision = Precision::TF32;
  bool nhwc = false; ///< Channels-last activations around the convolutions (layout-nhwc).
  bool fuse = true;  ///< False: --no-fuse.
  std::vector<std::string> disabled; ///< --disable-pass names.
  /// --pixels u8: image-input after mixed-precision (or add-loss), so that it folds the input's
  /// Cast into the ImageInput node (passes/ImageInput.cpp).
  bool u8Pixels = false;
};

/// The core lists, without the passes the options add.
std::vector<std::string> forwardPipeline();
std::vector<std::string> trainPipeline();
std::vector<std::string> evalPipeline();
/// `pipeline` without its fusion passes (every pass named fuse-*): `hgpc --no-fuse`.
std::vector<std::string> withoutFusion(std::vector<std::string> pipeline);

/// The passes hgpc runs for a program of `kind` under `options`. The forward pipeline takes no
/// options: it runs before the copies are made, and is the same for every compile.
std::vector<std::string> pipelineFor(PipelineKind kind, const PipelineOptions& options);

} // namespace hgp
