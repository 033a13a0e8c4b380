// --profile and --trace on the GPU: LeNet-5 (samples/lenet5.onnx) trains a few steps on the CUDA
// backend with CUPTI recording its third step. The records must parse, match the plan, tie every
// kernel to a step, cover every step whose op always launches a kernel, and have positive times;
// the trace must have a track and parse as JSON (Python's json module, where python3 exists).
// RawActivitiesBecomeRecordsOfTheirSteps needs no GPU: it checks how CUPTI activities are named.
#include "tools/hgpc/Compile.h"
#include "runtime/cuda/Profiler.h"
#include "runtime/profile/Records.h"
#include "tests/gpu/GpuTestUtil.h"

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/wait.h>

namespace hgp::gputest {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// No GPU needed: raw CUPTI activities become records named after their steps.
TEST(CudaProfile, RawActivitiesBecomeRecordsOfTheirSteps) {
  Plan plan;
  plan.modelName = "m";
  plan.meta.setInt("batch", 4);
  PlanProgram prog;
  prog.name = "train";
  for (OpKind op : {OpKind::Conv, OpKind::Relu, OpKind::SgdUpdate, OpKind::SgdUpdate}) {
    PlanStep s;
    s.op = op;
    s.loc = std::string("/") + opName(op);
    prog.steps.push_back(s);
  }
  prog.steps[1].stream = 2;
  auto raw = [](ActivityKind kind, int step, uint64_t start, uint64_t end) {
    cuda::RawActivity a;
    a.kind = kind;
    a.step = step;
    a.start = start;
    a.end = end;
    a.name = "k";
    a.grid[0] = 7;
    a.block[0] = 64;
    a.regs = 30;
    a.staticSmem = 16;
    a.dynamicSmem = 32;
    return a;
  };
  std::vector<cuda::RawActivity> acts = {raw(ActivityKind::Memcpy, -1, 1000, 3000),
                                         raw(ActivityKind::Kernel, 0, 1500, 4500),
                                         raw(ActivityKind::Kernel, 1, 5000, 5250),
                                         raw(ActivityKind::Kernel, 2, 6000, 9000)};
  // Launches: step 0, step 1, steps 2-3 together.
  ProfileRecords r = cuda::toRecords(acts, plan, prog, {1, 1, 2, 0}, "GPU X", 10, "graph");
  EXPECT_TRUE(checkRecordsMatch(r, plan));
  ASSERT_EQ(r.records.size(), 4u);
  ASSERT_EQ(r.programs.size(), 1u);
  EXPECT_EQ(r.programs[0].steps, 4);
  EXPECT_DOUBLE_EQ(r.programs[0].spanUs, 8.0);
  EXPECT_EQ(r.records[0].step, -1);
  EXPECT_EQ(r.records[0].stream, -1);
  EXPECT_EQ(r.records[0].op, "-");
  EXPECT_DOUBLE_EQ(r.records[1].startUs, 0.5);
  EXPECT_DOUBLE_EQ(r.records[1].durUs, 3.0);
  EXPECT_EQ(r.records[1].op, "Conv");
  EXPECT_EQ(r.records[1].loc, "/Conv");
  EXPECT_EQ(r.records[2].stream, 2);
  EXPECT_EQ(r.records[3].covers, 2);
  EXPECT_EQ(r.records[3].grid[0], 7);
  EXPECT_EQ(r.records[3].dynamicSmem, 32);
  auto back = parseRecords(printRecords(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, r);
}

TEST(CudaProfile, LeNet5StepIsRecordedStepByStep) {
  HGP_REQUIRE_CUDA();
  if (cpuStandIn()) GTEST_SKIP() << "the CPU stand-in has no kernels to record";
  CompileOptions co;
  co.modelPath = sourceFile("samples/lenet5.onnx");
  ASSERT_FALSE(co.modelPath.empty()) << "samples/lenet5.onnx not found (set HGP_SOURCE_DIR)";
  co.batch = 64;
  co.train.optimizer = "sgd";
  co.train.lr = 0.05;
  co.train.momentum = 0.9;
  auto c = compileModel(co);
  ASSERT_TRUE(c) << c.status().toString();
  const Plan& plan = c->emitted.plan;
  const PlanProgram* train = plan.findProgram("train");
  ASSERT_NE(train, nullptr);

  BackendOptions bo;
  bo.profile = ::testing::TempDir() + "hgp_lenet5_records.txt";
  bo.trace = ::testing::TempDir() + "hgp_lenet5_trace.json";
  std::remove(bo.profile.c_str());
  std::remove(bo.trace.c_str());
  auto b = createCudaBackend(bo);
  ASSERT_TRUE(b) << b.status().toString(); // CUPTI missing is a failure here, not a skip
  ASSERT_TRUE((*b)->load(plan, InitData{c->emitted.data, {}}));
  for (int run = 0; run < 6; ++run) {
    for (size_t t = 0; t < plan.tensors.size(); ++t) {
      if (plan.tensors[t].role != TensorRole::Input) continue;
      ASSERT_TRUE((*b)->write(int(t), defaultFeed(plan.tensors[t], run).data()));
    }
    Status st = (*b)->run("train");
    ASSERT_TRUE(st) << "run " << run << ": " << st.toString();
  }
  float loss = 0;
  ASSERT_TRUE((*b)->read(plan.binding("loss"), &loss));
  EXPECT_TRUE(std::isfinite(loss));

  auto r = readRecordsFile(bo.profile);
  ASSERT_TRUE(r) << r.status().toString();
  EXPECT_TRUE(checkRecordsMatch(*r, plan));
  EXPECT_EQ(r->mapping, "graph") << "the replayed graph's kernels were not tied to steps";
  EXPECT_EQ(r->model, "lenet5");
  EXPECT_EQ(r->batch, 64);
  ASSERT_NE(r->findProgram("train"), nullptr);
  EXPECT_GT(r->findProgram("train")->spanUs, 0);
  std::set<int> covered;
  int kernels = 0;
  for (const ActivityRecord& a : r->records) {
    EXPECT_GT(a.durUs, 0) << a.op << " " << a.name;
    EXPECT_GE(a.startUs, 0);
    if (a.kind != ActivityKind::Kernel) continue;
    ++kernels;
    EXPECT_GE(a.step, 0) << "a kernel no step owns: " << a.name;
    EXPECT_GT(a.blocks(), 0);
    EXPECT_GT(a.threads(), 0);
    for (int s = a.step; s >= 0 && s < a.step + a.covers; ++s) covered.insert(s);
  }
  EXPECT_GT(kernels, 10);
  // Ops whose CUDA executors always launch work.
  static const std::set<OpKind> launches = {
      OpKind::Conv,    OpKind::ConvBwdData, OpKind::ConvBwdFilter, OpKind::Gemm,
      OpKind::Relu,    OpKind::ReluBwd,     OpKind::MaxPool,       OpKind::MaxPoolBwd,
      OpKind::SoftmaxCrossEntropy, OpKind::SoftmaxCrossEntropyBwd, OpKind::SgdUpdate};
  for (size_t s = 0; s < train->steps.size(); ++s) {
    if (!launches.count(train->steps[s].op)) continue;
    EXPECT_TRUE(covered.count(int(s))) << "no record of step " << s << " "
                                       << opName(train->steps[s].op) << " '"
                                       << train->steps[s].loc << "'";
  }

  std::string trace = slurp(bo.trace);
  EXPECT_NE(trace.find("\"thread_name\""), std::string::npos);
  EXPECT_NE(trace.find("\"ph\":\"X\""), std::string::npos);
  if (std::system("python3 -c '' >/dev/null 2>&1") == 0) {
    std::string cmd = "python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); "
                      "assert any(e[\"ph\"]==\"X\" for e in t[\"traceEvents\"])' " + bo.trace;
    int rc = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << "the trace is not valid JSON: " << bo.trace;
  }
}

} // namespace
} // namespace hgp::gputest
