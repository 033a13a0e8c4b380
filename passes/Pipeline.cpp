#include "passes/Pipeline.h"

#include <algorithm>

namespace hgp {

std::vector<std::string> forwardPipeline() {
  return {"canonicalize", "recognize-gelu", "recognize-silu", "fold-gemm-transposes",
          "symmetric-conv-pads"};
}

std::vector<std::string> trainPipeline() {
  return {"canonicalize",         "add-loss",           "add-step-counter",
          "sync-batch-norm",      "autodiff",           "fold-slice-gradients",
          "fuse-batch-norm",      "fuse-gradient-sums", "fuse-conv-epilogue",
          "all-reduce-gradients", "add-optimizer"};
}

std::vector<std::string> evalPipeline() {
  return {"canonicalize", "eval-mode", "add-loss", "fuse-batch-norm", "fuse-conv-epilogue"};
}

std::vector<std::string> withoutFusion(std::vector<std::string> pipeline) {
  std::erase_if(pipeline, [](const std::string& p) { return p.rfind("fuse-", 0) == 0; });
  return pipeline;
}

std::vector<std::string> pipelineFor(PipelineKind kind, const PipelineOptions& o) {
  if (kind == PipelineKind::Forward) return forwardPipeline();
  bool training = kind == PipelineKind::Train;
  std::vector<std::string> p = training ? trainPipeline() : evalPipeline();
  if (isMixedPrecision(o.precision)) {
    auto at = p.insert(std::find(p.begin(), p.end(), "add-loss") + 1, "mixed-precision");
    if (training && o.precision == Precision::FP16) p.insert(at + 1, "loss-scaling");
    // BatchNorm statistics from the convolutions' epilogues where cuDNN has engines for them.
    if (training) p.insert(std::find(p.begin(), p.end(), "fuse-conv-epilogue") + 1, "fuse-conv-bn");
  }
  if (o.u8Pixels) {
    auto after = std::find(p.begin(), p.end(), "mixed-precision");
    if (after == p.end()) after = std::find(p.begin(), p.end(), "add-loss");
    p.insert(after + 1, "image-input");
  }
  if (o.nhwc) p.push_back("layout-nhwc");
  if (o.nhwc && o.u8Pixels) p.push_back("image-input-layout");
  if (o.fuse) {
    p.push_back("fuse-elementwise");
    p.push_back("fuse-casts");
  } else {
    p = withoutFusion(std::move(p));
  }
  for (const std::string& name : o.disabled) std::erase(p, name);
  return p;
}

} // namespace hgp
