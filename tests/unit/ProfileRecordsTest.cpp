// Profiling records (runtime/profile/Records.h), the cost model's use of them, and the Chrome
// trace built from them, on synthetic records whose expected numbers are worked out by hand.
#include "compiler/analysis/CostModel.h"
#include "runtime/profile/ChromeTrace.h"
#include "tests/unit/PlanTestUtil.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

namespace hgp {
namespace {

ActivityRecord kernel(int step, const std::string& op, int stream, double start, double dur,
                      int64_t blocks = 4) {
  ActivityRecord a;
  a.program = "train";
  a.step = step;
  a.op = op;
  a.loc = "/layer" + std::to_string(step);
  a.stream = stream;
  a.name = "void k<float>(\"x\", " + std::to_string(step) + ")";
  a.grid[0] = int(blocks);
  a.block[0] = 128;
  a.block[1] = 2;
  a.regs = 40;
  a.staticSmem = 1024;
  a.dynamicSmem = 512;
  a.startUs = start;
  a.durUs = dur;
  return a;
}

/// Steps: 0 Relu, 1 Relu (no kernel), 2 Relu, 3 and 4 SgdUpdate (one shared launch), on stream 0;
/// step 2 on stream 1 waits for step 0.
Plan fourStepPlan() {
  Plan p = test::planOf({{8}, {8}, {8}, {8}, {8}, {8}});
  p.modelName = "tiny";
  p.meta.setInt("batch", 8);
  PlanProgram prog;
  prog.name = "train";
  prog.steps = {test::step(OpKind::Relu, {0}, {1}), test::step(OpKind::Relu, {1}, {2}),
                test::step(OpKind::Relu, {0}, {3}), test::step(OpKind::SgdUpdate, {4, 5, 5, 5, 5}, {4}),
                test::step(OpKind::SgdUpdate, {4, 5, 5, 5, 5}, {4})};
  prog.steps[2].stream = 1;
  prog.steps[2].waits = {0};
  p.programs.push_back(prog);
  return p;
}

ProfileRecords fourStepRecords() {
  ProfileRecords r;
  r.model = "tiny";
  r.batch = 8;
  r.gpu = "NVIDIA H200";
  r.sms = 132;
  r.programs.push_back({"train", 5, 60});
  ActivityRecord copy;
  copy.kind = ActivityKind::Memcpy;
  copy.program = "train";
  copy.op = "-";
  copy.stream = -1;
  copy.name = "HtoD";
  copy.bytes = 4096;
  copy.durUs = 3;
  r.records.push_back(copy);
  // Stream 0: step 0 twice (0..10, 12..32), the optimizer group (36..44); gaps 2 and 4.
  // Stream 1: step 2 (33..38) and again (40..41): gap 2. Median gap of {2, 4, 2}: 2 us.
  r.records.push_back(kernel(0, "Relu", 0, 0, 10, 4));
  r.records.push_back(kernel(0, "Relu", 0, 12, 20, 300));
  r.records.push_back(kernel(2, "Relu", 1, 33, 5));
  ActivityRecord opt = kernel(3, "SgdUpdate", 0, 36, 8, 64);
  opt.covers = 2;
  r.records.push_back(opt);
  r.records.push_back(kernel(2, "Relu", 1, 40, 1));
  return r;
}

TEST(ProfileRecords, PrintParseRoundTrip) {
  ProfileRecords r = fourStepRecords();
  r.records[1].startUs = 0.001; // ns resolution survives
  std::string text = printRecords(r);
  auto back = parseRecords(text);
  ASSERT_TRUE(back) << back.status().toString();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(printRecords(*back), text);
  EXPECT_NE(text.find("covers=2"), std::string::npos);
  EXPECT_NE(text.find("smem=1024+512"), std::string::npos);
}

TEST(ProfileRecords, ParseErrorsAreBadDataWithAPosition) {
  for (const char* text :
       {"hgpc-records 2\n", "hgpc-records 1\nkernel train 0 Relu \"\" stream=0\n",
        "hgpc-records 1\nprogram train steps 1 span_us 1.0\nkernel train 0 Relu \"\" dur_us=-1\n",
        "hgpc-records 1\nwhatever\n", "plan 1\n"}) {
    auto r = parseRecords(text, "f.txt");
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.status().code(), ErrorCode::BadData) << text;
    EXPECT_NE(r.status().message().find("f.txt:"), std::string::npos) << r.status().message();
  }
}

TEST(ProfileRecords, MismatchedPlansAreRejected) {
  Plan plan = fourStepPlan();
  EXPECT_TRUE(checkRecordsMatch(fourStepRecords(), plan));
  ProfileRecords r = fourStepRecords();
  r.batch = 16;
  Status st = checkRecordsMatch(r, plan);
  EXPECT_EQ(st.code(), ErrorCode::BadData);
  EXPECT_NE(st.message().find("batch 16"), std::string::npos) << st.message();
  r = fourStepRecords();
  r.model = "other";
  EXPECT_EQ(checkRecordsMatch(r, plan).code(), ErrorCode::BadData);
  r = fourStepRecords();
  r.programs[0].steps = 6;
  EXPECT_NE(checkRecordsMatch(r, plan).message().find("6 steps"), std::string::npos);
  r = fourStepRecords();
  r.records[1].op = "Conv";
  EXPECT_NE(checkRecordsMatch(r, plan).message().find("is Conv there and Relu here"),
            std::string::npos);
}

TEST(ProfileRecords, MeasureGroupsByStep) {
  Plan plan = fourStepPlan();
  ProgramMeasurement m = measureProgram(fourStepRecords(), plan.programs[0]);
  ASSERT_TRUE(m.present);
  // Gaps: stream 0 has 2 and 4 us, stream 1 has 2 us; the copy stream has one record.
  EXPECT_EQ(m.gapSamples, 3);
  EXPECT_NEAR(m.gapSeconds, 2e-6, 1e-12);
  EXPECT_DOUBLE_EQ(m.spanSeconds, 60e-6);
  EXPECT_EQ(m.steps[0].kernels, 2);
  EXPECT_NEAR(m.steps[0].busySeconds, 30e-6, 1e-12);
  EXPECT_EQ(m.steps[0].blocks, 300); // the longer kernel's shape
  EXPECT_EQ(m.steps[0].threads, 256);
  EXPECT_EQ(m.steps[0].smem, 1536);
  EXPECT_EQ(m.steps[1].kernels, 0);
  EXPECT_EQ(m.steps[2].kernels, 2);
  EXPECT_NEAR(m.steps[2].busySeconds, 6e-6, 1e-12);
  // The shared optimizer launch: half of its 8 us and half a launch to each step.
  EXPECT_NEAR(m.steps[3].busySeconds, 4e-6, 1e-12);
  EXPECT_NEAR(m.steps[4].busySeconds, 4e-6, 1e-12);
  EXPECT_DOUBLE_EQ(m.steps[3].launches, 0.5);
}

using test::fakeTarget;

TEST(ProfileRecords, CostModelTakesMeasuredTimesAndShapes) {
  Target t = fakeTarget();
  Plan plan = fourStepPlan();
  const PlanProgram& prog = plan.programs[0];
  ProgramCost estimated = programCost(t, plan, prog, Precision::TF32);
  ProgramMeasurement m = measureProgram(fourStepRecords(), prog);
  ProgramCost measured = programCost(t, plan, prog, Precision::TF32, {}, &m);
  ASSERT_EQ(measured.steps.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_FALSE(estimated.steps[i].measured);
    EXPECT_TRUE(measured.steps[i].measured);
    // What is not measured stays: the work the step does.
    EXPECT_EQ(measured.steps[i].flops, estimated.steps[i].flops);
  }
  // Durations plus one 2 us gap per launch (a shared launch counts half for each step).
  EXPECT_NEAR(measured.steps[0].seconds, 30e-6 + 2 * 2e-6, 1e-12);
  EXPECT_NEAR(measured.steps[1].seconds, 0, 1e-12);
  EXPECT_NEAR(measured.steps[2].seconds, 6e-6 + 2 * 2e-6, 1e-12);
  EXPECT_NEAR(measured.steps[3].seconds, 4e-6 + 0.5 * 2e-6, 1e-12);
  EXPECT_NEAR(measured.steps[4].seconds, 4e-6 + 0.5 * 2e-6, 1e-12);
  EXPECT_NEAR(measured.serialSeconds, 54e-6, 1e-12);
  // Step 0 then step 1 (reads its result) is the longest chain: 34 us.
  EXPECT_NEAR(measured.criticalPathSeconds, 34e-6, 1e-12);
  EXPECT_EQ(measured.steps[0].launch.blocks, 300);
  EXPECT_EQ(measured.steps[0].launch.threads, 256);
  EXPECT_EQ(measured.steps[0].launch.regs, 40);
  EXPECT_EQ(measured.steps[0].launch.smem, 1536);
  EXPECT_EQ(measured.steps[0].blocksPerSm, blocksPerSm(t, measured.steps[0].launch));
  // A step that ran nothing keeps the estimated shape.
  EXPECT_EQ(measured.steps[1].launch.blocks, estimated.steps[1].launch.blocks);
  // Records of another program change nothing.
  ProfileRecords other = fourStepRecords();
  other.programs[0].name = "eval";
  for (auto& a : other.records) a.program = "eval";
  ProgramMeasurement none = measureProgram(other, prog);
  EXPECT_FALSE(none.present);
  ProgramCost same = programCost(t, plan, prog, Precision::TF32, {}, &none);
  EXPECT_DOUBLE_EQ(same.serialSeconds, estimated.serialSeconds);
}

TEST(ProfileRecords, TimesMeasuredOnSeveralStreamsAlreadyIncludeSharing) {
  Target t = fakeTarget();
  Plan plan = fourStepPlan();
  const PlanProgram& prog = plan.programs[0];
  ProgramMeasurement two = measureProgram(fourStepRecords(), prog);
  EXPECT_EQ(two.streams, 2); // the copy stream (-1) does not count
  EXPECT_TRUE(programCost(t, plan, prog, Precision::TF32, {}, &two).sharingMeasured);
  // The same records all on stream 0: the durations were measured alone.
  ProfileRecords one = fourStepRecords();
  for (auto& a : one.records)
    if (a.stream > 0) a.stream = 0;
  ProgramMeasurement alone = measureProgram(one, prog);
  EXPECT_EQ(alone.streams, 1);
  EXPECT_FALSE(programCost(t, plan, prog, Precision::TF32, {}, &alone).sharingMeasured);
  EXPECT_FALSE(programCost(t, plan, prog, Precision::TF32).sharingMeasured);
}

TEST(ChromeTrace, TracksSlicesAndFlowArrowsParseAsJson) {
  Plan plan = fourStepPlan();
  ProfileRecords r = fourStepRecords();
  std::string path = ::testing::TempDir() + "hgp_trace_test.json";
  ASSERT_TRUE(writeChromeTraceFile(r, &plan, "train", path));
  // Python's json module is the independent judge of the syntax; the script checks the tracks
  // (streams 0 and 1 and the copy track), the slices and the one flow arrow 0 -> 2, bound inside
  // the last slice of step 0 (12..32 us, stream 0) and the first of step 2 (33..38 us, stream 1).
  std::string script = R"PY(
import json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
assert names == {0: "stream 0", 1: "stream 1", 1000: "input copies"}, names
xs = [e for e in ev if e["ph"] == "X"]
assert len(xs) == 6, len(xs)
assert sum(1 for e in xs if e["name"] == "Relu /layer0" and e["tid"] == 0) == 2
assert any(e["name"] == "SgdUpdate /layer3" and e["args"]["covers"] == 2 for e in xs)
k = [e for e in xs if e["name"] == "Relu /layer2"][0]
assert k["args"]["grid"] == "4,1,1" and k["args"]["block"] == "128,2,1" and k["args"]["regs"] == 40
assert k["args"]["smem"] == 1536 and k["args"]["kernel"].startswith('void k<float>("x"')
s = [e for e in ev if e["ph"] == "s"]
f = [e for e in ev if e["ph"] == "f"]
assert len(s) == 1 and len(f) == 1 and s[0]["id"] == f[0]["id"]
assert s[0]["tid"] == 0 and 12 <= s[0]["ts"] <= 32, s
assert f[0]["tid"] == 1 and f[0]["bp"] == "e" and 33 <= f[0]["ts"] <= 38, f
)PY";
  std::string scriptPath = ::testing::TempDir() + "hgp_trace_test.py";
  std::ofstream(scriptPath) << script;
  std::string cmd = "/usr/bin/python3 " + scriptPath + " " + path;
  int rc = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << "the trace check failed: " << cmd;
  // No plan: the same slices, no arrows.
  std::ostringstream os;
  writeChromeTrace(r, nullptr, "train", os);
  EXPECT_EQ(os.str().find("\"ph\":\"s\""), std::string::npos);
  EXPECT_NE(os.str().find("\"ph\":\"X\""), std::string::npos);
}

} // namespace
} // namespace hgp
