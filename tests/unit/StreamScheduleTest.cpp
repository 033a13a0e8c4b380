// DAG concurrency: dependencies from data flow and from shared storage, transitive reduction,
// stream assignment from a bounded pool and the fewest events.
#include "compiler/schedule/StreamSchedule.h"
#include "tests/unit/PlanTestUtil.h"

#include <gtest/gtest.h>

namespace hgp {
namespace {

Target target() {
  auto t = findTarget("h200");
  return *t;
}

/// `n` tensors of 1024 f32 elements, each in its own bytes unless `offsets` places it.
Plan planOf(size_t n, const std::vector<int64_t>& offsets = {}) {
  return test::planOf(std::vector<Shape>(n, Shape{1024}), offsets);
}

using test::step;

PlanProgram program(std::vector<PlanStep> steps) {
  PlanProgram p;
  p.name = "train";
  p.steps = std::move(steps);
  return p;
}

TEST(StreamSchedule, BranchesRunOnTwoStreamsAndJoinWithOneEvent) {
  // a = relu(x); b = relu(x); c = a + b.
  Plan plan = planOf(4);
  PlanProgram prog = program({step(OpKind::Relu, {0}, {1}), step(OpKind::Relu, {0}, {2}),
                              step(OpKind::Add, {1, 2}, {3})});
  Target t = target();
  ProgramCost cost = programCost(t, plan, prog, Precision::TF32);
  StreamSchedule two = scheduleStreams(t, plan, prog, cost, 2);
  EXPECT_EQ(two.streams, 2);
  EXPECT_NE(two.stream[0], two.stream[1]);
  ASSERT_EQ(two.events.size(), 1u);
  EXPECT_EQ(two.events[0].to, 2);
  EXPECT_LT(two.idealSeconds, cost.serialSeconds);
  // Step times measured with the streams running at once already include the sharing.
  ProgramCost measured = cost;
  measured.sharingMeasured = true;
  StreamSchedule m = scheduleStreams(t, plan, prog, measured, 2);
  EXPECT_DOUBLE_EQ(m.sharedSeconds, m.idealSeconds);
  StreamSchedule one = scheduleStreams(t, plan, prog, cost, 1);
  EXPECT_EQ(one.streams, 1);
  EXPECT_TRUE(one.events.empty());
  EXPECT_DOUBLE_EQ(one.idealSeconds, cost.serialSeconds);
  EXPECT_DOUBLE_EQ(one.sharedSeconds, cost.serialSeconds);
}

TEST(StreamSchedule, SharedStorageOrdersAReaderBeforeTheNextWriter) {
  // y = relu(x) reads t0; then z = relu(w) writes t3, which the memory plan put on t0's bytes:
  // the second step must wait for the first although no data flows between them.
  Plan plan = planOf(4, {0, 4096, 8192, 0});
  PlanProgram prog = program({step(OpKind::Relu, {0}, {1}), step(OpKind::Relu, {2}, {3})});
  auto deps = reducedDependencies(plan, prog);
  EXPECT_EQ(deps[1], (std::vector<int>{0}));
  // With their own bytes they are independent.
  Plan apart = planOf(4);
  EXPECT_TRUE(reducedDependencies(apart, prog)[1].empty());
}

TEST(StreamSchedule, TransitiveReductionKeepsOnlyTheDirectChain) {
  // t1 = relu(t0); t2 = relu(t1); t3 = t1 + t2; t4 = t1 + t3. Steps 2 and 3 also read step 0's
  // t1, but those edges are implied through steps 1 and 2 and dropped.
  Plan plan = planOf(6);
  PlanProgram prog = program({step(OpKind::Relu, {0}, {1}), step(OpKind::Relu, {1}, {2}),
                              step(OpKind::Add, {1, 2}, {3}), step(OpKind::Add, {1, 3}, {4})});
  size_t all = 0;
  auto deps = reducedDependencies(plan, prog, &all);
  EXPECT_EQ(deps[2], (std::vector<int>{1}));
  EXPECT_EQ(deps[3], (std::vector<int>{2}));
  EXPECT_EQ(all, 5u); // 1<-0, 2<-1, 2<-0, 3<-2, 3<-0
}

TEST(StreamSchedule, PoolIsBounded) {
  // Eight independent ReLUs on at most three streams.
  Plan plan = planOf(16);
  std::vector<PlanStep> steps;
  for (int i = 0; i < 8; ++i) steps.push_back(step(OpKind::Relu, {2 * i}, {2 * i + 1}));
  PlanProgram prog = program(steps);
  Target t = target();
  StreamSchedule s = scheduleStreams(t, plan, prog, programCost(t, plan, prog, Precision::TF32), 3);
  EXPECT_EQ(s.streams, 3);
  for (int st : s.stream) EXPECT_LT(st, 3);
  EXPECT_TRUE(s.events.empty());
}

} // namespace
} // namespace hgp
