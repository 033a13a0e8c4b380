#include "tools/hgpc/Compile.h"

#include "compiler/codegen/GenerateKernels.h"
#include "ir/Clone.h"
#include "ir/Printer.h"
#include "compiler/schedule/AssignStreams.h"
#include "passes/TrainGraphNames.h"

#include <algorithm>
#include <filesystem>

namespace hgp {

namespace {

/// The target of --target, or the local GPU, or the H200 when there is none.
Expected<Target> compileTarget(const CompileOptions& o) {
  Expected<Target> target = findTarget(o.target.empty() ? "auto" : o.target);
  if (!target && o.target.empty()) target = findTarget("h200");
  return target;
}

AttrMap planMeta(const Compilation& c, const CompileOptions& o) {
  AttrMap m;
  m.setString("producer", c.info.producerName + " " + c.info.producerVersion);
  m.setInt("opset", c.info.opsetVersion);
  m.setInt("batch", c.info.batch);
  int64_t params = 0;
  for (const Value* v : c.forward->graphValues())
    if (v->role() == TensorRole::Param) params += v->type().numElements();
  m.setInt("parameters", params);
  m.setString("precision", o.precision);
  Expected<Target> target = compileTarget(o);
  Expected<bool> nhwc =
      target ? channelsLastLayout(o.layout, o.precision, target->smArch()) : Expected<bool>(false);
  m.setString("layout", nhwc && *nhwc ? "nhwc" : "nchw");
  if (!o.training) return m;
  const TrainOptions& t = o.train;
  m.setString("loss", t.loss);
  m.setString("optimizer", t.optimizer);
  m.setFloat("lr", t.lr);
  m.setString("schedule", t.schedule);
  m.setInt("classes", c.forward->outputs()[0]->shape().back());
  m.setInt("metrics_ring", t.metricsRing);
  m.setInt("seed", int64_t(t.seed));
  if (t.ranks > 1) { // data parallel: the runner checks it, hgpc plan's cost model uses it
    m.setInt("ranks", t.ranks);
    m.setInt("bucket_bytes", t.bucketBytes);
    if (t.syncBn) m.setInt("sync_bn", 1);
  }
  return m;
}

/// The pipeline with the mixed-precision pass right after add-loss, when the precision asks for
/// 16-bit activations, and (fp16 training) loss scaling after it.
std::vector<std::string> withPrecision(std::vector<std::string> pipeline, DType low,
                                       bool training) {
  if (low == DType::F32) return pipeline;
  auto it = std::find(pipeline.begin(), pipeline.end(), "add-loss");
  if (it == pipeline.end() ||
      std::find(pipeline.begin(), pipeline.end(), "mixed-precision") != pipeline.end())
    return pipeline;
  it = pipeline.insert(it + 1, "mixed-precision");
  if (training && low == DType::F16) pipeline.insert(it + 1, "loss-scaling");
  return pipeline;
}

/// The pipeline with layout-nhwc appended (after autodiff and the optimizer: it converts the
/// forward and the backward ops around each convolution together) when `nhwc` is set.
std::vector<std::string> withLayout(std::vector<std::string> pipeline, bool nhwc) {
  if (nhwc) pipeline.push_back("layout-nhwc");
  return pipeline;
}

/// The pipeline without the passes --disable-pass names.
Expected<std::vector<std::string>> withoutDisabled(std::vector<std::string> pipeline,
                                                  const std::vector<std::string>& disabled) {
  for (const std::string& name : disabled) {
    if (!lookupPass(name)) return Status(ErrorCode::Usage, "--disable-pass: no pass named '" + name + "'");
    std::erase(pipeline, name);
  }
  return pipeline;
}

/// The pipeline with fuse-elementwise and fuse-casts appended (they run after autodiff and the
/// optimizer, and after fuse-batch-norm: on whatever elementwise chains remain, then on the
/// parameter casts), or, with --no-fuse, the pipeline without any fuse-* pass.
std::vector<std::string> withFusion(std::vector<std::string> pipeline, bool fuse) {
  if (!fuse) return withoutFusion(std::move(pipeline));
  pipeline.push_back("fuse-elementwise");
  pipeline.push_back("fuse-casts");
  return pipeline;
}

} // namespace

Expected<bool> channelsLastLayout(const std::string& layout, const std::string& precision,
                                  int smArch) {
  if (layout == "nchw") return false;
  if (layout == "nhwc") return true;
  if (layout != "auto")
    return Status(ErrorCode::Usage, "--layout must be nchw, nhwc or auto, not '" + layout + "'");
  HGP_ASSIGN_OR_RETURN(DType low, activationDType(precision));
  // Tensor cores: fp16 from Volta (sm70), bf16 and TF32 from Ampere (sm80).
  if (low == DType::F16) return smArch >= 70;
  if (low == DType::BF16 || precision == "tf32") return smArch >= 80;
  return false;
}

Expected<DType> activationDType(const std::string& precision) {
  if (precision == "fp32" || precision == "tf32") return DType::F32;
  if (precision == "bf16") return DType::BF16;
  if (precision == "fp16") return DType::F16;
  return Status(ErrorCode::Usage,
                "--precision must be fp32, tf32, bf16 or fp16, not '" + precision + "'");
}

Expected<Compilation> compileModel(const CompileOptions& o) {
  Compilation c;
  HGP_ASSIGN_OR_RETURN(DType low, activationDType(o.precision));
  HGP_ASSIGN_OR_RETURN(Target target, compileTarget(o));
  HGP_ASSIGN_OR_RETURN(bool nhwc, channelsLastLayout(o.layout, o.precision, target.smArch()));
  if (low != DType::F32 && !o.training)
    return Status(ErrorCode::Usage, "--precision " + o.precision +
                                        " is mixed-precision training; --forward-only plans are "
                                        "fp32 or tf32");
  if (low != DType::F32 && o.train.syncBn)
    return Status(ErrorCode::Usage, "--sync-bn does not support --precision " + o.precision +
                                        " yet (use fp32 or tf32)");
  c.ctx.train = o.train;
  c.ctx.precision = low;
  c.ctx.printAfterAll = o.printAfterAll;
  c.ctx.log = o.log;
  if (o.training) HGP_TRY(o.train.validate());

  OnnxImportOptions io;
  io.batch = o.batch;
  HGP_ASSIGN_OR_RETURN(OnnxImportResult imported, importOnnxFile(o.modelPath, io));
  c.info = imported.info;
  c.forward = std::move(imported.graph);
  HGP_TRY_CTX(verifyGraph(*c.forward), "the imported graph is invalid");
  HGP_TRY(runPipeline(*c.forward, forwardPipeline(), c.ctx));

  std::vector<ProgramSource> programs;
  if (!o.training) {
    ProgramSource fwd{"forward", c.forward.get(), {}};
    for (size_t i = 0; i < c.forward->outputs().size(); ++i)
      fwd.bindings["output." + std::to_string(i)] = c.forward->outputs()[i]->name();
    int k = 0;
    for (const Value* v : c.forward->graphValues())
      if (v->role() == TensorRole::Input) fwd.bindings["input." + std::to_string(k++)] = v->name();
    programs.push_back(fwd);
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
    HGP_ASSIGN_OR_RETURN(
        std::vector<std::string> trainPasses,
        withoutDisabled(withFusion(withLayout(withPrecision(trainPipeline(), low, true), nhwc), o.fuse),
                        o.disabledPasses));
    HGP_ASSIGN_OR_RETURN(
        std::vector<std::string> evalPasses,
        withoutDisabled(withFusion(withLayout(withPrecision(evalPipeline(), low, false), nhwc), o.fuse),
                        o.disabledPasses));
    HGP_TRY(runPipeline(*c.train, o.passes.empty() ? trainPasses : o.passes, c.ctx));
    PassContext evalCtx;
    evalCtx.train = o.train;
    evalCtx.precision = low;
    evalCtx.printAfterAll = o.printAfterAll;
    evalCtx.log = o.log;
    HGP_TRY(runPipeline(*c.eval, evalPasses, evalCtx));
    // The eval program also returns the logits, so the host can score a padded last batch.
    if (Value* logits = c.eval->findValue(logitsName)) c.eval->addOutput(logits);
    programs.push_back({"train", c.train.get(),
                        {{"input", inputName},
                         {"labels", names::kLabels},
                         {"loss", names::kLoss},
                         {"metrics", names::kMetrics},
                         {"iter", names::kIter},
                         {"opt_step", names::kOptStep}}});
    programs.push_back({"eval", c.eval.get(),
                        {{"eval.loss", names::kLoss},
                         {"eval.correct", names::kCorrect},
                         {"eval.logits", logitsName}}});
  }

  EmitOptions eo;
  // The file's name says more than exporters' generic graph names ("torch_jit", "main_graph").
  eo.modelName = std::filesystem::path(o.modelPath).stem().string();
  eo.meta = planMeta(c, o);
  eo.reuseMemory = o.reuseMemory;
  if (o.referenceWeights) {
    HGP_ASSIGN_OR_RETURN(eo.fileOffsets, onnxInitializerFileOffsets(o.modelPath));
  }
  HGP_ASSIGN_OR_RETURN(c.emitted, emitPlan(programs, eo));

  // ---- Issue 5: intra-layer split and micro-batch pipeline, on the memory-planned plan. ----
  // (Before the records are matched: they were measured on the sliced plan.)
  SliceOptions so = o.slicing;
  so.target = &target;
  so.precision = o.precision;
  so.maxStreams = o.maxStreams;
  c.slicing = sliceBatches(c.emitted.plan, so);
  if (Status st = c.emitted.plan.validate(); !st)
    return Status(ErrorCode::Internal, "the split and pipelined plan is invalid: " + st.message());

  // Issue 6: the fused elementwise steps' CUDA kernels, for the target's architecture.
  if (o.kernels != CompileOptions::Kernels::Off)
    HGP_TRY(generateFusedKernels(c.emitted.plan, target.smArch(),
                                 o.kernels == CompileOptions::Kernels::Required));

  if (!o.records.empty()) {
    HGP_ASSIGN_OR_RETURN(ProfileRecords r, readRecordsFile(o.records));
    HGP_TRY_CTX(checkRecordsMatch(r, c.emitted.plan), "--records " + o.records);
    c.records = std::move(r);
  }
  // Data parallelism puts the collectives on a stream of their own even with one compute stream.
  if (o.maxStreams > 1 || (o.training && o.train.ranks > 1)) {
    StreamAssignment a = assignStreams(c.emitted.plan, target, o.precision, o.maxStreams, {},
                                       c.records ? &*c.records : nullptr);
    c.emitted.plan.meta.setString("target", target.name);
    c.emitted.plan.meta.setInt("streams", a.maxStreamsUsed);
  }
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
