// Pass.h - the pass infrastructure: options, the registry and the pipeline runner.
//
// A pass is a function over one Graph. Passes are registered by name in PassRegistry.def (one
// list, as LLVM's PassRegistry.def), so a pipeline is a plain list of names: `hgpc compile
// --passes=a,b` runs exactly those, `--print-after NAME` prints the IR after one and
// `--print-after-all` after each. Which passes the standard pipelines hold is Pipeline.h's
// business. Training options travel in the PassContext; passes that build the step read them.
#pragma once

#include "ir/Graph.h"
#include "runtime/plan/Precision.h"

#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace hgp {

/// What `hgpc compile` was asked to train with. Defaults are torch.optim's.
struct TrainOptions {
  std::string loss = "cross-entropy"; ///< "cross-entropy" or "mse" (against one-hot labels).
  double labelSmoothing = 0;
  /// Weight of the losses of the model's other outputs (auxiliary classifiers); 0 ignores them.
  double auxLossWeight = 0;

  std::string optimizer = "sgd"; ///< "sgd", "adam" or "adamw".
  double lr = 0.01;
  double momentum = 0, dampening = 0;
  bool nesterov = false;
  /// -1 means the optimizer's default: 0 for SGD and Adam, 0.01 for AdamW.
  double weightDecay = -1;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;

  std::string schedule = "constant"; ///< "constant", "step", "multistep" or "cosine".
  int64_t stepSize = 0;
  double gamma = 0.1;
  std::vector<int64_t> milestones;
  int64_t tMax = 0;
  double etaMin = 0;
  int64_t warmupSteps = 0;
  double warmupFactor = 1.0 / 3.0;

  uint64_t seed = 0;
  /// Rows in the on-device metrics ring: the host reads metrics back every this many steps.
  int64_t metricsRing = 16;

  /// Data parallelism (docs/distributed.md): the number of ranks the step is planned for. Above
  /// 1, the gradients (and the loss and accuracy count) are averaged over the ranks in buckets of
  /// at most `bucketBytes` (one gradient larger than that is a bucket of its own).
  int64_t ranks = 1;
  int64_t bucketBytes = int64_t(25) << 20;
  /// --sync-bn: BatchNorm statistics over the global batch (all-reduced), not per rank.
  bool syncBn = false;
  /// --pixels (docs/data.md): "u8" makes the data input 8-bit channels-last pixels and a flip
  /// flag per sample, turned into the model's input by one ImageInput node (the image-input
  /// pass) with the Normalize of `pixelMean` and `pixelStd` (one value, or one per channel;
  /// empty: none); "f32" and "auto" (for now the same) keep the float input.
  std::string pixels = "auto";
  std::vector<double> pixelMean, pixelStd;
  /// --freeze-bn: BatchNormalization nodes the model has in inference mode (training_mode=0)
  /// keep their running statistics frozen (fine-tuning); by default they train in training mode,
  /// as model.train() would (docs/training.md).
  bool freezeBn = false;

  double effectiveWeightDecay() const {
    return weightDecay >= 0 ? weightDecay : optimizer == "adamw" ? 0.01 : 0.0;
  }
  /// Checks ranges and combinations; errors are usage errors (exit code 2).
  Status validate() const;
};

/// Per-run state shared by the passes of a pipeline.
struct PassContext {
  TrainOptions train;
  bool printAfterAll = false;
  std::vector<std::string> printAfter; ///< --print-after NAME: print the IR after these passes.
  std::ostream* log = nullptr;         ///< Where --print-after(-all) writes.
  /// Counters passes bump ("autodiff.nodes-added"), printed with --stats.
  std::map<std::string, int64_t> stats;
  /// The math mode (--precision). The mixed-precision pass stores activations and their
  /// gradients in its activationDType (a no-op for fp32 and tf32); loss-scaling acts for fp16.
  Precision precision = Precision::TF32;
  /// fp16 loss scaling (passes/LossScaling.cpp): the first scale, and GradScaler's growth and
  /// backoff factors and growth interval.
  double initialLossScale = 65536.0, lossScaleGrowth = 2.0, lossScaleBackoff = 0.5;
  int64_t lossScaleInterval = 2000;
  /// Filled by autodiff: each parameter and the value holding its gradient.
  std::vector<std::pair<Value*, Value*>> paramGrads;
};

using PassFn = Status (*)(Graph&, PassContext&);

#define HGP_PASS(Name, Fn, Description) Status Fn(Graph& g, PassContext& ctx);
#include "passes/PassRegistry.def"

struct PassInfo {
  const char* name;
  PassFn fn;
  const char* description;
};

/// Every registered pass, in registry order.
const std::vector<PassInfo>& allPasses();
/// Looks a pass up by name; a usage error lists the known names.
Expected<PassFn> lookupPass(const std::string& name);
/// Runs the named passes in order, verifying the graph after each, and printing it after each
/// when ctx.printAfterAll is set or ctx.printAfter names it.
Status runPipeline(Graph& g, const std::vector<std::string>& passes, PassContext& ctx);

/// Whether `v` is a graph output or takes part in a carry: a rewrite must keep it.
bool escapesGraph(const Graph& g, const Value* v);

/// The only reader of `v` when it has exactly one (reading it once) and does not escape the
/// graph: the condition under which a fusion may make `v` disappear. Null otherwise.
Node* soleReader(const Graph& g, const Value* v);

/// For a rewrite that makes new values stand for old ones: moves every reader of each old value
/// (and its role, its name, and its entry in ctx.paramGrads, which the passes after autodiff
/// read) to the new one, then erases `dead`, readers first.
Status takeOverValues(Graph& g, PassContext& ctx,
                      const std::vector<std::pair<Value*, Value*>>& take,
                      const std::vector<Node*>& dead);

} // namespace hgp
