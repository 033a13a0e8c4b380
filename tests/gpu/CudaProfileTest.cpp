// --profile and --trace on the GPU: LeNet-5 (samples/lenet5.onnx) trains a few steps on the CUDA
// backend with CUPTI recording its third step. The records must parse, match the plan, tie every
// kernel to a step, cover every step whose op always launches a kernel, and have positive times;
// the trace must have a track and parse as JSON (Python's json module, where python3 exists).
#include "compiler/driver/Compile.h"
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

TEST(CudaProfile, LeNet5StepIsRecordedStepByStep) {
  HGP_REQUIRE_CUDA();
  if (cpuStandIn()) GTEST_SKIP() << "the CPU stand-in has no kernels to record";
  CompileOptions co;
  co.modelPath = HGP_SOURCE_DIR "/samples/lenet5.onnx";
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
