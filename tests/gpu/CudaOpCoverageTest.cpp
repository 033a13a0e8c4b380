// CudaOpCoverageTest.cpp - the CUDA backend executes every op of the op table
// (runtime/plan/OpList.def) and agrees with the CPU reference, or the skip list below says why
// not (Glow's OperatorTest with its backend skip list). The cases are tests/gpu/OpCoverageCases.h,
// the ones the CPU backend's coverage test runs.
//
// Each f32 case runs on the CPU backend and on CUDA in eager and graph mode (runAndCompare, TF32
// off) for three runs, comparing every persistent and bound tensor within 1e-4 of the largest
// reference magnitude for a graph of one family and 1e-3 for a compiled LeNet-5 step (three
// optimizer steps of reassociated sums; the op suite, CudaOpSuiteTest.cpp, holds each executor to
// its tight bound). A compiled bf16/fp16 step compares its loss within 5e-2, the bound
// CudaMixedPrecisionTest.cpp uses for it. An op counts as executed when its case passed.
#include "tests/gpu/GpuTestUtil.h"
#include "tests/gpu/OpCoverageCases.h"

#include <cuda_runtime.h>

namespace hgp::gputest {
namespace {

/// Ops the CUDA backend does not execute, with the reason. Empty: every op has a CUDA executor.
const coverage::SkipList kCudaSkips = {};

/// Runs a compiled mixed-precision step on the CPU and on CUDA (graph mode) and compares the loss.
void compareLoss(const EmittedPlan& e, const std::string& program) {
  const Plan& plan = e.plan;
  std::unique_ptr<Backend> cpu = createCpuBackend();
  auto gpu = makeGpuBackend(BackendOptions{});
  ASSERT_TRUE(gpu.hasValue()) << gpu.status().toString();
  for (Backend* b : {cpu.get(), gpu->get()}) {
    Status st = b->load(plan, InitData{e.data, {}});
    ASSERT_TRUE(st.isOk()) << b->name() << ": " << st.toString();
  }
  int loss = plan.binding("loss");
  ASSERT_GE(loss, 0);
  for (int run = 0; run < 3; ++run) {
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      const PlanTensor& t = plan.tensors[i];
      if (t.storage != StorageClass::Persistent || t.role != TensorRole::Input) continue;
      std::vector<uint8_t> bytes = defaultFeed(t, run);
      for (Backend* b : {cpu.get(), gpu->get()}) ASSERT_TRUE(b->write(int(i), bytes.data()).isOk());
    }
    for (Backend* b : {cpu.get(), gpu->get()}) {
      Status st = b->run(program);
      ASSERT_TRUE(st.isOk()) << b->name() << " run " << run << ": " << st.toString();
    }
    const PlanTensor& t = plan.tensors[size_t(loss)];
    EXPECT_TRUE(sameValues(t, readTensor(**gpu, plan, loss), readTensor(*cpu, plan, loss), 5e-2))
        << "the loss after run " << run;
  }
}

/// The failures recorded so far in the running test.
int failedParts() {
  const ::testing::TestResult* r =
      ::testing::UnitTest::GetInstance()->current_test_info()->result();
  int n = 0;
  for (int i = 0; i < r->total_part_count(); ++i) n += r->GetTestPartResult(i).failed() ? 1 : 0;
  return n;
}

TEST(CudaOpCoverage, CudaBackendExecutesEveryOpOfTheTable) {
  HGP_REQUIRE_CUDA();
  std::set<OpKind> ran;
  int arch = 90; // sm_90 under the CPU stand-in
  cudaDeviceProp props{};
  if (!cpuStandIn() && cudaGetDeviceProperties(&props, 0) == cudaSuccess)
    arch = props.major * 10 + props.minor;
  for (const coverage::Case& c : coverage::cases(arch)) {
    SCOPED_TRACE(c.name);
    std::optional<EmittedPlan> e = c.make();
    ASSERT_TRUE(e.has_value());
    int before = failedParts();
    if (c.mixedPrecision) {
      compareLoss(*e, c.program);
    } else {
      RunSpec spec;
      spec.program = c.program;
      spec.runs = 3;
      spec.tol = c.program == "step" ? 1e-4 : 1e-3;
      // Only the inputs change between runs; a compiled step's parameters are trained.
      if (c.program != "step")
        spec.fed = [](const PlanTensor& t) { return t.role == TensorRole::Input; };
      runAndCompare(*e, spec);
    }
    if (failedParts() > before) continue; // this case failed: its ops do not count
    std::set<OpKind> ops = coverage::opsOf(e->plan, c.program);
    ran.insert(ops.begin(), ops.end());
  }
  coverage::expectCovered(ran, kCudaSkips, "CUDA");
}

} // namespace
} // namespace hgp::gputest
