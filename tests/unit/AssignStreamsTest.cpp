// The stream schedule written into the plan: every dependency a step has (data flow and shared
// bytes, before transitive reduction) must be implied by stream order plus the plan's waits,
// because that is all the CUDA backend orders by; waits survive the plan's text form; and the
// plan validator rejects waits the backend could not honour.
#include "compiler/schedule/AssignStreams.h"
#include "tests/unit/PlanTestUtil.h"

#include <gtest/gtest.h>

#include <random>

namespace hgp {
namespace {

using test::step;

/// A random DAG of ReLUs and Adds over `n` steps whose results reuse a small pool of byte ranges,
/// as a memory plan would, so that write-after-read and write-after-write edges occur too.
Plan randomPlan(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> offsets;
  for (int i = 0; i <= n; ++i) offsets.push_back(int64_t(rng() % 12) * 4096);
  offsets[0] = int64_t(100) * 4096; // the input keeps bytes of its own
  Plan plan = test::planOf(std::vector<Shape>(size_t(n + 1), Shape{1024}), offsets);
  plan.transientBytes = int64_t(101) * 4096;
  PlanProgram p;
  p.name = "train";
  for (int i = 1; i <= n; ++i) {
    int a = int(rng() % uint32_t(i)), b = int(rng() % uint32_t(i));
    p.steps.push_back(rng() % 2 ? step(OpKind::Relu, {a}, {i}) : step(OpKind::Add, {a, b}, {i}));
  }
  plan.programs.push_back(p);
  return plan;
}

/// Whether step i is ordered after step j by stream order and waits.
std::vector<std::vector<bool>> happensBefore(const PlanProgram& p) {
  size_t n = p.steps.size();
  std::vector<std::vector<bool>> after(n, std::vector<bool>(n, false));
  std::vector<int> last(kMaxPlanStreams, -1);
  for (size_t i = 0; i < n; ++i) {
    std::vector<int> preds = p.steps[i].waits;
    if (last[size_t(p.steps[i].stream)] >= 0) preds.push_back(last[size_t(p.steps[i].stream)]);
    for (int j : preds) {
      after[i][size_t(j)] = true;
      for (size_t k = 0; k < n; ++k)
        if (after[size_t(j)][k]) after[i][k] = true;
    }
    last[size_t(p.steps[i].stream)] = int(i);
  }
  return after;
}

bool overlaps(const Plan& plan, const std::vector<int>& a, const std::vector<int>& b) {
  for (int x : a)
    for (int y : b) {
      const PlanTensor &s = plan.tensors[size_t(x)], &t = plan.tensors[size_t(y)];
      if (s.offset < t.offset + t.bytes() && t.offset < s.offset + s.bytes()) return true;
    }
  return false;
}

TEST(AssignStreams, EveryDependencyIsImpliedByStreamOrderAndWaits) {
  auto target = findTarget("h200");
  ASSERT_TRUE(target.hasValue());
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Plan plan = randomPlan(60, seed);
    StreamAssignment a = assignStreams(plan, *target, Precision::TF32, 4);
    EXPECT_GT(a.maxStreamsUsed, 1);
    ASSERT_TRUE(plan.validate().isOk()) << plan.validate().toString();
    const PlanProgram& p = plan.programs[0];
    auto after = happensBefore(p);
    for (size_t i = 0; i < p.steps.size(); ++i)
      for (size_t j = 0; j < i; ++j) {
        const PlanStep &si = p.steps[i], &sj = p.steps[j];
        bool dep = overlaps(plan, si.inputs, sj.outputs) || overlaps(plan, si.outputs, sj.inputs) ||
                   overlaps(plan, si.outputs, sj.outputs);
        if (dep) EXPECT_TRUE(after[i][j]) << "step " << i << " may overtake step " << j;
      }
  }
}

TEST(AssignStreams, OneStreamLeavesThePlanSerial) {
  auto target = findTarget("h200");
  ASSERT_TRUE(target.hasValue());
  Plan plan = randomPlan(30, 7);
  assignStreams(plan, *target, Precision::TF32, 4);
  StreamAssignment a = assignStreams(plan, *target, Precision::TF32, 1);
  EXPECT_EQ(a.maxStreamsUsed, 1);
  EXPECT_EQ(a.events, 0u);
  for (const PlanStep& s : plan.programs[0].steps) {
    EXPECT_EQ(s.stream, 0);
    EXPECT_TRUE(s.waits.empty());
  }
}

TEST(AssignStreams, WaitsSurviveTheTextForm) {
  auto target = findTarget("h200");
  ASSERT_TRUE(target.hasValue());
  Plan plan = randomPlan(40, 3);
  assignStreams(plan, *target, Precision::TF32, 3);
  std::string text = printPlan(plan);
  EXPECT_NE(text.find(" waits="), std::string::npos);
  auto back = parsePlan(text);
  ASSERT_TRUE(back.hasValue()) << back.status().toString();
  ASSERT_EQ(back->programs[0].steps.size(), plan.programs[0].steps.size());
  for (size_t i = 0; i < plan.programs[0].steps.size(); ++i) {
    EXPECT_EQ(back->programs[0].steps[i].stream, plan.programs[0].steps[i].stream);
    EXPECT_EQ(back->programs[0].steps[i].waits, plan.programs[0].steps[i].waits);
  }
  EXPECT_EQ(printPlan(*back), text);
}

TEST(AssignStreams, ValidatorRejectsWaitsTheBackendCannotHonour) {
  Plan plan = randomPlan(5, 1);
  PlanProgram& p = plan.programs[0];
  p.steps[3].stream = 1;
  p.steps[3].waits = {4}; // a later step
  EXPECT_FALSE(plan.validate().isOk());
  p.steps[3].waits = {2}; // on another stream: fine
  EXPECT_TRUE(plan.validate().isOk()) << plan.validate().toString();
  p.steps[2].stream = 1;  // now the same stream
  EXPECT_FALSE(plan.validate().isOk());
  p.steps[2].stream = 0;
  p.steps[3].stream = kMaxPlanStreams;
  EXPECT_FALSE(plan.validate().isOk());
}

} // namespace
} // namespace hgp
