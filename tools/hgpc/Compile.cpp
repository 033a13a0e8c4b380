#include "tools/hgpc/Compile.h"

#include "ir/Clone.h"
#include "ir/Printer.h"
#include "passes/Pipeline.h"
#include "passes/TrainGraphNames.h"

#include <algorithm>
#include <filesystem>

namespace hgp {

namespace {

AttrMap planMeta(const Compilation& c, const CompileOptions& o) {
  AttrMap m;
  m.setString("producer", c.info.producerName + " " + c.info.producerVersion);
  m.setInt("opset", c.info.opsetVersion);
  m.setInt("batch", c.info.batch);
  int64_t params = 0;
  for (const Value* v : c.forward->graphValues())
    if (v->role() == TensorRole::Param) params += v->type().numElements();
  m.setInt("parameters", params);
  m.setString("precision", precisionName(c.resolved.precision));
  m.setString("layout", c.resolved.nhwc ? "nhwc" : "nchw");
  if (!o.training) return m;
  const TrainOptions& t = o.train;
  m.setString("loss", t.loss);
  m.setString("optimizer", t.optimizer);
  m.setFloat("lr", t.lr);
  m.setString("schedule", t.schedule);
  m.setInt("classes", c.forward->outputs()[0]->shape().back());
  m.setInt("metrics_ring", t.metricsRing);
  m.setInt("seed", int64_t(t.seed));
  if (t.pixels == "u8") { // the runner feeds 8-bit pixels and checks --normalize against these
    m.setString("pixels", "u8");
    if (!t.pixelMean.empty()) {
      m.setFloats("pixel_mean", t.pixelMean);
      m.setFloats("pixel_std", t.pixelStd);
    }
  }
  if (t.ranks > 1) { // data parallel: the runner checks it, hgpc plan's cost model uses it
    m.setInt("ranks", t.ranks);
    m.setInt("bucket_bytes", t.bucketBytes);
    if (t.syncBn) m.setInt("sync_bn", 1);
  }
  return m;
}

/// Every --disable-pass and --print-after name must be a pass of either kind.
Status checkPassNames(const std::vector<std::string>& names, const char* flag) {
  for (const std::string& name : names)
    if (!lookupPass(name) && !lookupPlanPass(name))
      return Status(ErrorCode::Usage, std::string(flag) + ": no pass named '" + name + "'");
  return Status::ok();
}

PassContext passContext(const CompileOptions& o, Precision precision) {
  PassContext ctx;
  ctx.train = o.train;
  ctx.precision = precision;
  ctx.printAfterAll = o.printAfterAll;
  ctx.printAfter = o.printAfter;
  ctx.log = o.log;
  return ctx;
}

} // namespace

Expected<bool> channelsLastLayout(const std::string& layout, Precision precision, int smArch) {
  if (layout == "nchw") return false;
  if (layout == "nhwc") return true;
  if (layout != "auto")
    return Status(ErrorCode::Usage, "--layout must be nchw, nhwc or auto, not '" + layout + "'");
  return runsOnTensorCores(precision, smArch);
}

Expected<Target> resolveTarget(const std::string& name) {
  Expected<Target> t = findTarget(name.empty() ? "auto" : name);
  if (!t && name.empty()) t = findTarget("h200");
  return t;
}

Expected<ResolvedOptions> resolveOptions(const CompileOptions& o) {
  ResolvedOptions r;
  r.precision = o.precision;
  HGP_ASSIGN_OR_RETURN(r.target, resolveTarget(o.target));
  HGP_ASSIGN_OR_RETURN(r.nhwc, channelsLastLayout(o.layout, o.precision, r.target.smArch()));
  if (isMixedPrecision(o.precision) && !o.training)
    return Status(ErrorCode::Usage, std::string("--precision ") + precisionName(o.precision) +
                                        " is mixed-precision training; --forward-only plans are "
                                        "fp32 or tf32");
  if (isMixedPrecision(o.precision) && o.train.syncBn)
    return Status(ErrorCode::Usage, std::string("--sync-bn does not support --precision ") +
                                        precisionName(o.precision) + " yet (use fp32 or tf32)");
  HGP_TRY(checkPassNames(o.disabledPasses, "--disable-pass"));
  HGP_TRY(checkPassNames(o.printAfter, "--print-after"));
  if (o.training) HGP_TRY(o.train.validate());
  return r;
}

Expected<Compilation> compileModel(const CompileOptions& o) {
  Compilation c;
  HGP_ASSIGN_OR_RETURN(c.resolved, resolveOptions(o));
  const ResolvedOptions& r = c.resolved;
  c.ctx = passContext(o, r.precision);

  OnnxImportOptions io;
  io.batch = o.batch;
  io.trainInferenceBatchNorm = o.training && !o.train.freezeBn;
  HGP_ASSIGN_OR_RETURN(OnnxImportResult imported, importOnnxFile(o.modelPath, io));
  c.info = imported.info;
  c.forward = std::move(imported.graph);
  HGP_TRY_CTX(verifyGraph(*c.forward), "the imported graph is invalid");
  HGP_TRY(runPipeline(*c.forward, pipelineFor(PipelineKind::Forward, {}), c.ctx));

  PlanPassContext pc;
  if (!o.training) {
    ProgramSource fwd{"forward", c.forward.get(), {}};
    for (size_t i = 0; i < c.forward->outputs().size(); ++i)
      fwd.bindings["output." + std::to_string(i)] = c.forward->outputs()[i]->name();
    int k = 0;
    for (const Value* v : c.forward->graphValues())
      if (v->role() == TensorRole::Input) fwd.bindings["input." + std::to_string(k++)] = v->name();
    pc.programs.push_back(fwd);
  } else {
    std::vector<const Value*> inputs;
    for (const Value* v : c.forward->graphValues())
      if (v->role() == TensorRole::Input) inputs.push_back(v);
    if (inputs.size() != 1)
      return Status(ErrorCode::InvalidModel,
                    "training needs a model with exactly one data input; this one has " +
                        std::to_string(inputs.size()));
    std::string inputName = inputs[0]->name();
    HGP_ASSIGN_OR_RETURN(c.train, cloneGraph(*c.forward));
    HGP_ASSIGN_OR_RETURN(c.eval, cloneGraph(*c.forward));
    c.train->setName(c.forward->name() + ".train");
    c.eval->setName(c.forward->name() + ".eval");
    std::string logitsName = c.forward->outputs()[0]->name();
    std::vector<std::string> disabled = o.disabledPasses;
    if (!o.convBnFusion) disabled.push_back("fuse-conv-bn");
    PipelineOptions po{r.precision, r.nhwc, o.fuse, disabled};
    po.u8Pixels = o.train.pixels == "u8";
    HGP_TRY(runPipeline(*c.train, o.passes.empty() ? pipelineFor(PipelineKind::Train, po) : o.passes,
                        c.ctx));
    PassContext evalCtx = passContext(o, r.precision);
    HGP_TRY(runPipeline(*c.eval, pipelineFor(PipelineKind::Eval, po), evalCtx));
    // The eval program also returns the logits, so the host can score a padded last batch.
    if (Value* logits = c.eval->findValue(logitsName)) c.eval->addOutput(logits);
    pc.programs.push_back({"train", c.train.get(),
                           {{"input", inputName},
                            {"labels", names::kLabels},
                            {"loss", names::kLoss},
                            {"metrics", names::kMetrics},
                            {"iter", names::kIter},
                            {"opt_step", names::kOptStep}}});
    // --pixels u8 (passes/ImageInput.cpp): the runner writes each sample's flip flag here.
    if (c.train->findValue(inputName + ".flip"))
      pc.programs.back().bindings["input.flip"] = inputName + ".flip";
    pc.programs.push_back({"eval", c.eval.get(),
                           {{"eval.loss", names::kLoss},
                            {"eval.correct", names::kCorrect},
                            {"eval.logits", logitsName}}});
  }

  // The file's name says more than exporters' generic graph names ("torch_jit", "main_graph").
  pc.emit.modelName = std::filesystem::path(o.modelPath).stem().string();
  pc.emit.meta = planMeta(c, o);
  pc.emit.reuseMemory = o.reuseMemory;
  pc.emit.views = o.views;
  pc.emit.stridedViews = o.stridedViews;
  if (o.referenceWeights) {
    HGP_ASSIGN_OR_RETURN(pc.emit.fileOffsets, onnxInitializerFileOffsets(o.modelPath));
  }
  pc.target = &r.target;
  pc.precision = r.precision;
  pc.slicing = o.slicing;
  pc.maxStreams = o.maxStreams;
  pc.kernelsRequired = o.kernels == CompileOptions::Kernels::Required;
  pc.recordsPath = o.records;
  pc.printAfterAll = o.printAfterAll;
  pc.printAfter = o.printAfter;
  pc.log = o.log;
  PlanPipelineOptions ppo;
  ppo.kernels = o.kernels != CompileOptions::Kernels::Off;
  ppo.records = !o.records.empty();
  // Data parallelism puts the collectives on a stream of their own even with one compute stream.
  ppo.streams = o.maxStreams > 1 || (o.training && o.train.ranks > 1);
  ppo.disabled = o.disabledPasses;
  HGP_ASSIGN_OR_RETURN(std::vector<std::string> planPasses, planPipeline(ppo));
  HGP_TRY(runPlanPipeline(planPasses, pc));
  c.emitted = std::move(pc.emitted);
  c.slicing = std::move(pc.sliced);
  c.records = std::move(pc.records);
  return c;
}

Expected<Bundle> bundleCompilation(Compilation& c, const CompileOptions& o) {
  Bundle b;
  b.planText = printPlan(c.emitted.plan);
  b.data = std::move(c.emitted.data);
  if (o.referenceWeights) {
    std::error_code ec;
    b.fileRefPath = std::filesystem::absolute(o.modelPath, ec).string();
    b.fileRefSize = int64_t(std::filesystem::file_size(o.modelPath, ec));
  }
  if (!o.training) return b;
  HGP_ASSIGN_OR_RETURN(OnnxTemplate t, buildOnnxTemplate(o.modelPath, /*inferenceForm=*/true));
  // Cut out the bytes of every tensor the runner will write back at --save.
  std::vector<SpliceEntry> cuts;
  for (const PlanTensor& pt : c.emitted.plan.tensors) {
    if (pt.role != TensorRole::Param && pt.role != TensorRole::State) continue;
    const Value* v = c.forward->findValue(pt.name);
    if (!v || !v->data() || v->data()->onnxName.empty()) continue;
    auto it = t.initializerOffsets.find(v->data()->onnxName);
    if (it == t.initializerOffsets.end()) continue;
    cuts.push_back({it->second, pt.bytes(), pt.name});
  }
  std::sort(cuts.begin(), cuts.end(),
            [](const SpliceEntry& a, const SpliceEntry& b) { return a.offset < b.offset; });
  int64_t from = 0, removed = 0;
  for (SpliceEntry& cut : cuts) {
    if (cut.offset < from || cut.offset + cut.bytes > int64_t(t.bytes.size()))
      return Status(ErrorCode::Internal, "the save template's offsets overlap");
    b.saveTemplate.insert(b.saveTemplate.end(), t.bytes.begin() + from, t.bytes.begin() + cut.offset);
    from = cut.offset + cut.bytes;
    cut.offset -= removed;
    removed += cut.bytes;
  }
  b.saveTemplate.insert(b.saveTemplate.end(), t.bytes.begin() + from, t.bytes.end());
  b.splices = std::move(cuts);
  return b;
}

} // namespace hgp
