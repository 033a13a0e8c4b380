// PlanStep::waits in the plan's text form: printed as " waits=i,j", parsed back, and a wait on a
// step that does not come earlier is refused.
#include "tests/unit/PlanTestUtil.h"

#include <gtest/gtest.h>

namespace hgp {
namespace {

Plan twoStreamPlan() {
  Plan p = test::planOf({{8}, {8}, {8}, {8}}, {0, 64, 128, 192});
  p.modelName = "w";
  p.transientBytes = 256;
  PlanProgram prog;
  prog.name = "train";
  prog.steps = {test::step(OpKind::Relu, {0}, {1}), test::step(OpKind::Relu, {0}, {2}),
                test::step(OpKind::Add, {1, 2}, {3})};
  prog.steps[1].stream = 1;
  prog.steps[2].waits = {1}; // step 0 is on its own stream: stream order covers it
  p.programs.push_back(prog);
  return p;
}

TEST(PlanWaits, PrintParseRoundTrip) {
  Plan p = twoStreamPlan();
  std::string text = printPlan(p);
  EXPECT_NE(text.find("stream=1"), std::string::npos) << text;
  EXPECT_NE(text.find(" waits=1"), std::string::npos) << text;
  auto back = parsePlan(text);
  ASSERT_TRUE(back) << back.status().toString() << "\n" << text;
  EXPECT_EQ(back->programs[0].steps[2].waits, (std::vector<int>{1}));
  EXPECT_TRUE(back->programs[0].steps[0].waits.empty());
  EXPECT_EQ(printPlan(*back), text);
}

TEST(PlanWaits, OnlyEarlierStepsCanBeWaitedFor) {
  Plan p = twoStreamPlan();
  p.programs[0].steps[1].waits = {1};
  auto back = parsePlan(printPlan(p));
  ASSERT_FALSE(back);
  EXPECT_NE(back.status().message().find("waits=1 does not name an earlier step"), std::string::npos)
      << back.status().message();
}

} // namespace
} // namespace hgp
