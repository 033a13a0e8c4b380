// PipelineTest.cpp - the pipelines: the typed precision (runtime/plan/Precision.h), which IR
// passes pipelineFor assembles (passes/Pipeline.h), and the plan passes (compiler/pipeline):
// the list the options choose, --print-after and --disable-pass on a real compile of LeNet-5.
#include "passes/Pipeline.h"
#include "tools/hgpc/Compile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

namespace hgp {
namespace {

using Names = std::vector<std::string>;

size_t at(const Names& names, const std::string& name) {
  return size_t(std::find(names.begin(), names.end(), name) - names.begin());
}
bool has(const Names& names, const std::string& name) { return at(names, name) < names.size(); }

TEST(Precision, ParsesItsOwnNamesAndNothingElse) {
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::FP16}) {
    Expected<Precision> back = parsePrecision(precisionName(p));
    ASSERT_TRUE(back.hasValue()) << precisionName(p);
    EXPECT_EQ(*back, p);
  }
  for (const char* bad : {"", "f32", "FP16", "int8", "bf16 "}) {
    Expected<Precision> p = parsePrecision(bad);
    ASSERT_FALSE(p.hasValue()) << bad;
    EXPECT_EQ(p.status().code(), ErrorCode::Usage);
  }
  EXPECT_EQ(activationDType(Precision::FP32), DType::F32);
  EXPECT_EQ(activationDType(Precision::TF32), DType::F32);
  EXPECT_EQ(activationDType(Precision::BF16), DType::BF16);
  EXPECT_EQ(activationDType(Precision::FP16), DType::F16);
  EXPECT_FALSE(allowsTf32(Precision::FP32));
  EXPECT_TRUE(allowsTf32(Precision::TF32));
}

TEST(Precision, OfAPlanFromItsMeta) {
  AttrMap meta;
  EXPECT_EQ(*planPrecision(meta), Precision::TF32); // hgpc's default for a plan without one
  meta.setString("precision", "fp16");
  EXPECT_EQ(*planPrecision(meta), Precision::FP16);
  meta.setString("precision", "fp8");
  EXPECT_FALSE(planPrecision(meta).hasValue());
}

TEST(Precision, TensorCoresFromVoltaForFp16AndFromAmpereForTf32AndBf16) {
  EXPECT_TRUE(runsOnTensorCores(Precision::FP16, 70));
  EXPECT_FALSE(runsOnTensorCores(Precision::FP16, 61));
  EXPECT_FALSE(runsOnTensorCores(Precision::BF16, 75));
  EXPECT_TRUE(runsOnTensorCores(Precision::BF16, 80));
  EXPECT_FALSE(runsOnTensorCores(Precision::TF32, 75));
  EXPECT_TRUE(runsOnTensorCores(Precision::TF32, 90));
  EXPECT_FALSE(runsOnTensorCores(Precision::FP32, 90));
}

TEST(Pipeline, AddsWhatTheOptionsAskForWhereItMustGo) {
  PipelineOptions o;
  Names tf32 = pipelineFor(PipelineKind::Train, o);
  EXPECT_FALSE(has(tf32, "mixed-precision"));
  EXPECT_FALSE(has(tf32, "layout-nhwc"));
  ASSERT_GE(tf32.size(), 2u); // the two late fusion passes close it
  EXPECT_EQ(tf32[tf32.size() - 2], "fuse-elementwise");
  EXPECT_EQ(tf32.back(), "fuse-casts");
  EXPECT_EQ(pipelineFor(PipelineKind::Forward, o), forwardPipeline());

  o.precision = Precision::FP16;
  o.nhwc = true;
  Names train = pipelineFor(PipelineKind::Train, o), eval = pipelineFor(PipelineKind::Eval, o);
  EXPECT_EQ(at(train, "mixed-precision"), at(train, "add-loss") + 1);
  EXPECT_EQ(at(train, "loss-scaling"), at(train, "mixed-precision") + 1);
  EXPECT_LT(at(train, "loss-scaling"), at(train, "autodiff"));
  EXPECT_FALSE(has(eval, "loss-scaling")); // evaluation has no backward pass to scale
  EXPECT_EQ(at(eval, "mixed-precision"), at(eval, "add-loss") + 1);
  EXPECT_GT(at(train, "layout-nhwc"), at(train, "add-optimizer"));
  EXPECT_LT(at(train, "layout-nhwc"), at(train, "fuse-elementwise"));
  EXPECT_FALSE(has(train, "image-input-layout"));
  o.u8Pixels = true; // ImageInput writes the channels-last image, after the layout pass
  train = pipelineFor(PipelineKind::Train, o), eval = pipelineFor(PipelineKind::Eval, o);
  EXPECT_EQ(at(train, "image-input-layout"), at(train, "layout-nhwc") + 1);
  EXPECT_EQ(at(eval, "image-input-layout"), at(eval, "layout-nhwc") + 1);
  o.u8Pixels = false;

  o.precision = Precision::BF16;
  EXPECT_FALSE(has(pipelineFor(PipelineKind::Train, o), "loss-scaling"));

  o.fuse = false;
  o.disabled = {"add-step-counter"};
  for (const std::string& p : pipelineFor(PipelineKind::Train, o)) {
    EXPECT_NE(p.rfind("fuse-", 0), 0u) << p;
    EXPECT_NE(p, "add-step-counter");
  }
}

TEST(PlanPipeline, RunsThePassesTheOptionsNeedInRegistryOrder) {
  PlanPipelineOptions o;
  Expected<Names> plain = planPipeline(o);
  ASSERT_TRUE(plain.hasValue());
  EXPECT_EQ(*plain, (Names{"emit-plan", "slice-batches", "generate-fused-kernels"}));
  o.records = o.streams = true;
  o.kernels = false;
  Expected<Names> full = planPipeline(o);
  ASSERT_TRUE(full.hasValue());
  EXPECT_EQ(*full, (Names{"emit-plan", "slice-batches", "load-records", "assign-streams"}));
  o.disabled = {"slice-batches", "fuse-casts"}; // an IR pass's name is not this list's business
  EXPECT_EQ(*planPipeline(o), (Names{"emit-plan", "load-records", "assign-streams"}));
  o.disabled = {"emit-plan"};
  Expected<Names> none = planPipeline(o);
  ASSERT_FALSE(none.hasValue());
  EXPECT_EQ(none.status().code(), ErrorCode::Usage);
  EXPECT_FALSE(lookupPlanPass("canonicalize").hasValue());
  for (const PlanPassInfo& p : allPlanPasses()) EXPECT_TRUE(lookupPlanPass(p.name).hasValue());
}

CompileOptions lenet() {
  CompileOptions o;
  o.modelPath = std::string(HGP_SOURCE_DIR) + "/samples/lenet5.onnx";
  o.batch = 8;
  o.target = "h200";
  o.kernels = CompileOptions::Kernels::Off;
  return o;
}

TEST(PlanPipeline, PrintAfterNamesIrAndPlanPassesAlike) {
  CompileOptions o = lenet();
  std::ostringstream log;
  o.log = &log;
  o.printAfter = {"add-loss", "slice-batches"};
  Expected<Compilation> c = compileModel(o);
  ASSERT_TRUE(c.hasValue()) << c.status().toString();
  std::string text = log.str();
  EXPECT_NE(text.find("// ----- IR after add-loss (torch_jit.train) -----"), std::string::npos);
  EXPECT_NE(text.find("// ----- IR after add-loss (torch_jit.eval) -----"), std::string::npos);
  size_t plan = text.find("// ----- plan after slice-batches -----");
  ASSERT_NE(plan, std::string::npos);
  EXPECT_EQ(text.find("after emit-plan"), std::string::npos);
  EXPECT_EQ(text.find("IR after autodiff"), std::string::npos);
  // The printed plan is the plan as it was then: before assign-streams put steps on streams.
  std::string printed = text.substr(plan);
  EXPECT_NE(printed.find("program train {"), std::string::npos);
  EXPECT_EQ(printed.find("stream="), std::string::npos);
  EXPECT_NE(printPlan(c->emitted.plan).find("stream="), std::string::npos);
}

TEST(PlanPipeline, DisablePassLeavesAPlanPassOut) {
  CompileOptions o = lenet();
  o.disabledPasses = {"assign-streams"};
  Expected<Compilation> one = compileModel(o);
  ASSERT_TRUE(one.hasValue()) << one.status().toString();
  for (const PlanProgram& p : one->emitted.plan.programs)
    for (const PlanStep& s : p.steps) {
      EXPECT_EQ(s.stream, 0) << s.loc;
      EXPECT_TRUE(s.waits.empty()) << s.loc;
    }
  EXPECT_FALSE(one->emitted.plan.meta.has("target"));
  Expected<Compilation> all = compileModel(lenet());
  ASSERT_TRUE(all.hasValue());
  EXPECT_EQ(all->emitted.plan.meta.getString("target"), "h200");

  for (auto [flag, names] : {std::pair{"--disable-pass", &CompileOptions::disabledPasses},
                             std::pair{"--print-after", &CompileOptions::printAfter}}) {
    CompileOptions bad = lenet();
    (bad.*names) = {"no-such-pass"};
    Expected<Compilation> c = compileModel(bad);
    ASSERT_FALSE(c.hasValue()) << flag;
    EXPECT_EQ(c.status().code(), ErrorCode::Usage);
    EXPECT_NE(c.status().message().find(flag), std::string::npos) << c.status().message();
  }
  CompileOptions noEmit = lenet();
  noEmit.disabledPasses = {"emit-plan"};
  EXPECT_FALSE(compileModel(noEmit).hasValue());
}

TEST(ResolveOptions, ResolvesTheTargetAndTheLayoutOnce) {
  CompileOptions o = lenet();
  o.precision = Precision::BF16;
  o.target = "v100"; // sm70: no bf16 tensor cores, so auto stays NCHW
  Expected<ResolvedOptions> r = resolveOptions(o);
  ASSERT_TRUE(r.hasValue()) << r.status().toString();
  EXPECT_EQ(r->target.name, "v100");
  EXPECT_FALSE(r->nhwc);
  o.target = "a100";
  EXPECT_TRUE(resolveOptions(o)->nhwc);
  o.layout = "nchw";
  EXPECT_FALSE(resolveOptions(o)->nhwc);
  o.layout = "chwn";
  EXPECT_EQ(resolveOptions(o).status().code(), ErrorCode::Usage);
  o.layout = "auto";
  o.target = "no-such-gpu";
  EXPECT_FALSE(resolveOptions(o).hasValue());
}

} // namespace
} // namespace hgp
