// The data-movement ops' attribute readers and stride arithmetic that both backends share
// (runtime/plan/ShapeAttrs.h), against views worked out by hand.
#include "runtime/plan/ShapeAttrs.h"

#include <gtest/gtest.h>

namespace hgp {
namespace {

TEST(ShapeAttrs, Strides) {
  EXPECT_EQ(stridesOf({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  // [3, 1] broadcast to [2, 3, 5]: the leading dim and the unit dim read stride 0.
  EXPECT_EQ(broadcastStrides({3, 1}, {2, 3, 5}), (std::vector<int64_t>{0, 1, 0}));
}

TEST(ShapeAttrs, CoalesceMergesContiguousDimsAndDropsUnitDims) {
  Shape shape{2, 1, 3, 4};
  std::vector<int64_t> dense{12, 12, 4, 1};
  coalesceDims(shape, {&dense});
  EXPECT_EQ(shape, (Shape{24}));
  EXPECT_EQ(dense, (std::vector<int64_t>{1}));
  // Dims merge only where every list is contiguous: here the last two, not the first two.
  shape = {2, 3, 4};
  dense = {12, 4, 1};
  std::vector<int64_t> other{1, 8, 2};
  coalesceDims(shape, {&dense, &other});
  EXPECT_EQ(shape, (Shape{2, 12}));
  EXPECT_EQ(dense, (std::vector<int64_t>{12, 1}));
  EXPECT_EQ(other, (std::vector<int64_t>{1, 2}));
  shape = {1, 1};
  dense = {1, 1};
  coalesceDims(shape, {&dense});
  EXPECT_EQ(shape, (Shape{1}));
  EXPECT_EQ(dense, (std::vector<int64_t>{0}));
}

TEST(ShapeAttrs, SliceView) {
  // x[1:3, 4:-1:-2] of a [4, 5] tensor: rows 1 and 2, columns 4, 2 and 0.
  AttrMap attrs;
  attrs.setInts("starts", {1, 4});
  attrs.setInts("ends", {3, -1});
  attrs.setInts("steps", {1, -2});
  Expected<SourceView> v = readSliceView(attrs, {4, 5}, {2, 3});
  ASSERT_TRUE(v) << v.status().message();
  EXPECT_EQ(v->strides, (std::vector<int64_t>{5, -2}));
  EXPECT_EQ(v->base, 1 * 5 + 4);
  EXPECT_FALSE(readSliceView(attrs, {4, 5}, {2, 2}));
  attrs.setInts("steps", {1});
  Expected<SourceView> bad = readSliceView(attrs, {4, 5}, {2, 3});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("'steps' has 1 entries, expected 2"), std::string::npos);
}

TEST(ShapeAttrs, TransposeView) {
  AttrMap attrs;
  attrs.setInts("perm", {0, 2, 3, 1});
  Expected<SourceView> v = readTransposeView(attrs, {2, 3, 4, 5}, {2, 4, 5, 3});
  ASSERT_TRUE(v) << v.status().message();
  EXPECT_EQ(v->strides, (std::vector<int64_t>{60, 5, 1, 20}));
  EXPECT_EQ(v->base, 0);
  attrs.setInts("perm", {0, 2, 2, 1});
  EXPECT_FALSE(readTransposeView(attrs, {2, 3, 4, 5}, {2, 4, 4, 3}));
}

TEST(ShapeAttrs, ReshapeAndExpand) {
  AttrMap attrs;
  attrs.setInts("shape", {6, 4});
  EXPECT_TRUE(checkReshape(attrs, {2, 3, 4}, {6, 4}));
  EXPECT_FALSE(checkReshape(attrs, {2, 3, 5}, {6, 4}));
  EXPECT_FALSE(checkReshape(attrs, {2, 3, 4}, {4, 6}));
  attrs.setInts("shape", {2, 1, 4});
  Expected<Shape> e = readExpandShape(attrs, {3, 1});
  ASSERT_TRUE(e) << e.status().message();
  EXPECT_EQ(*e, (Shape{2, 3, 4}));
  EXPECT_FALSE(readExpandShape(attrs, {3, 2}));
  EXPECT_FALSE(readExpandShape(AttrMap(), {3, 1}));
}

TEST(ShapeAttrs, StackingAndPad) {
  Shape a{2, 3}, b{2, 5}, whole{2, 8};
  EXPECT_TRUE(checkStacking({&a, &b}, whole, 1));
  EXPECT_FALSE(checkStacking({&a, &a}, whole, 1));
  EXPECT_FALSE(checkStacking({&a, &b}, whole, 0));

  AttrMap attrs;
  attrs.setInts("pads", {0, 1, 0, 2});
  attrs.setString("mode", "reflect");
  Expected<PadSpec> p = readPad(attrs, {2, 3}, {2, 6});
  ASSERT_TRUE(p) << p.status().message();
  EXPECT_EQ(p->mode, PadMode::Reflect);
  EXPECT_EQ(p->before, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(p->after, (std::vector<int64_t>{0, 2}));
  // Reflect padding as wide as the dim is refused; so is a negative pad outside constant mode.
  attrs.setInts("pads", {0, 3, 0, 0});
  EXPECT_FALSE(readPad(attrs, {2, 3}, {2, 6}));
  attrs.setInts("pads", {0, -1, 0, 0});
  attrs.setString("mode", "edge");
  EXPECT_FALSE(readPad(attrs, {2, 3}, {2, 2}));
  attrs.setString("mode", "constant");
  attrs.setFloat("value", 1.5);
  Expected<PadSpec> c = readPad(attrs, {2, 3}, {2, 2});
  ASSERT_TRUE(c) << c.status().message();
  EXPECT_EQ(c->value, 1.5f);
}

TEST(ShapeAttrs, ReduceAxes) {
  AttrMap attrs;
  attrs.setInts("axes", {0, 2});
  Expected<ReduceAxes> r = readReduceAxes(attrs, {2, 3, 4});
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_EQ(r->reduced, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(r->result, (Shape{1, 3, 1}));
  EXPECT_FALSE(r->none);
  attrs.setInt("keepdims", 0);
  r = readReduceAxes(attrs, {2, 3, 4});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->result, (Shape{3}));
  attrs.setInts("axes", {});
  r = readReduceAxes(attrs, {2, 3, 4});
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->none);
  EXPECT_EQ(r->result, (Shape{2, 3, 4}));
  attrs.setInts("axes", {2, 0});
  EXPECT_FALSE(readReduceAxes(attrs, {2, 3, 4}));
  attrs.setInts("axes", {3});
  EXPECT_FALSE(readReduceAxes(attrs, {2, 3, 4}));
}

} // namespace
} // namespace hgp
