// Tests of the CPU data-movement executors: Concat, Split, Slice, Reshape, Transpose and Expand
// on several dtypes against naive index loops; Pad's three modes by hand; and the gradients of
// Slice and Pad through the adjoint identity <op(x), dy> = <x, opBwd(dy)>.
#include "CpuTestUtil.h"

namespace hgp::cpu::test {
namespace {

/// A tensor of the given dtype whose element i holds i (wrapped for narrow types).
HostTensor iota(DType t, Shape s) {
  HostTensor h(t, std::move(s));
  for (int64_t i = 0; i < h.numel(); ++i) {
    switch (t) {
    case DType::F32:
      h[i] = float(i);
      break;
    case DType::I64:
      h.i64()[i] = i * 1000003;
      break;
    case DType::U8:
      static_cast<uint8_t*>(h.data())[i] = uint8_t(i * 7);
      break;
    case DType::BF16: // raw 16-bit patterns: only the bytes matter here
      static_cast<uint16_t*>(h.data())[i] = uint16_t(i * 31 + 1);
      break;
    default:
      ADD_FAILURE() << "iota: unsupported dtype";
    }
  }
  return h;
}

/// Element i of a tensor as an integer, whatever its dtype.
int64_t elem(HostTensor& h, int64_t i) {
  switch (h.dtype) {
  case DType::F32:
    return int64_t(h[i]);
  case DType::I64:
    return h.i64()[i];
  case DType::U8:
    return static_cast<uint8_t*>(h.data())[i];
  case DType::BF16:
    return static_cast<uint16_t*>(h.data())[i];
  default:
    return -1;
  }
}

std::vector<int64_t> unravel(int64_t flat, const Shape& dims) {
  std::vector<int64_t> idx(dims.size());
  for (int64_t d = int64_t(dims.size()) - 1; d >= 0; --d) {
    idx[size_t(d)] = flat % dims[size_t(d)];
    flat /= dims[size_t(d)];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& idx, const Shape& dims) {
  int64_t flat = 0;
  for (size_t d = 0; d < dims.size(); ++d) flat = flat * dims[d] + idx[d];
  return flat;
}

const DType kDTypes[] = {DType::F32, DType::I64, DType::U8, DType::BF16};

TEST(CpuShapeTest, ConcatAndSplitAreInverse) {
  for (DType t : kDTypes)
    for (int64_t axis : {0, 1, 2}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " axis " + std::to_string(axis));
      Shape s1 = {2, 3, 4}, s2 = s1, whole = s1;
      s2[size_t(axis)] = 1;
      whole[size_t(axis)] += 1;
      HostTensor a = iota(t, s1), b = iota(t, s2), y(t, whole);
      AttrMap at;
      at.setInt("axis", axis);
      ASSERT_OK(runOp(OpKind::Concat, at, {&a, &b}, {&y}));
      for (int64_t i = 0; i < y.numel(); ++i) {
        auto idx = unravel(i, whole);
        bool first = idx[size_t(axis)] < s1[size_t(axis)];
        if (!first) idx[size_t(axis)] -= s1[size_t(axis)];
        int64_t want = first ? elem(a, ravel(idx, s1)) : elem(b, ravel(idx, s2));
        ASSERT_EQ(elem(y, i), want) << "element " << i;
      }
      HostTensor pa(t, s1), pb(t, s2);
      at.setInts("split", {s1[size_t(axis)], 1});
      ASSERT_OK(runOp(OpKind::Split, at, {&y}, {&pa, &pb}));
      EXPECT_EQ(pa.storage, a.storage);
      EXPECT_EQ(pb.storage, b.storage);
    }
}

TEST(CpuShapeTest, SliceWithPositiveAndNegativeSteps) {
  for (DType t : kDTypes) {
    SCOPED_TRACE(dtypeName(t));
    Shape xs = {4, 5, 3};
    HostTensor x = iota(t, xs);
    struct Case {
      std::vector<int64_t> starts, ends, steps;
      Shape y;
    };
    for (const Case& c : {Case{{1, 0, 0}, {4, 5, 3}, {2, 2, 1}, {2, 3, 3}},
                          Case{{3, 4, 2}, {-1, 0, 0}, {-1, -3, -2}, {4, 2, 1}},
                          Case{{0, 4, 1}, {4, -1, 2}, {3, -1, 1}, {2, 5, 1}}}) {
      AttrMap at;
      at.setInts("starts", c.starts);
      at.setInts("ends", c.ends);
      at.setInts("steps", c.steps);
      HostTensor y(t, c.y);
      ASSERT_OK(runOp(OpKind::Slice, at, {&x}, {&y}));
      for (int64_t i = 0; i < y.numel(); ++i) {
        auto idx = unravel(i, c.y);
        for (size_t d = 0; d < idx.size(); ++d) idx[d] = c.starts[d] + idx[d] * c.steps[d];
        ASSERT_EQ(elem(y, i), elem(x, ravel(idx, xs))) << "element " << i;
      }
      if (t != DType::F32) continue;
      // SliceBwd scatters dY back into zeros: the adjoint of Slice.
      std::mt19937 rng(61);
      HostTensor dy = randomTensor(c.y, rng), xr = randomTensor(xs, rng);
      at.setInts("x_shape", xs);
      HostTensor dx = run1(OpKind::SliceBwd, at, {&dy}, xs);
      HostTensor yr = run1(OpKind::Slice, at, {&xr}, c.y);
      EXPECT_NEAR(weightedSum(yr, dy), weightedSum(xr, dx), 1e-5);
      auto loss = [&] { return weightedSum(run1(OpKind::Slice, at, {&xr}, c.y), dy); };
      expectClose(dx.values(), numericGradient(xr, loss, 1e-2), 1e-4, 1e-3);
      int64_t nonzero = 0;
      for (float v : dx.values()) nonzero += v != 0;
      EXPECT_EQ(nonzero, dy.numel());
    }
  }
  HostTensor x = zeros({4}), y = zeros({2});
  AttrMap bad;
  bad.setInts("starts", {3});
  bad.setInts("ends", {5}); // not normalized: past the end
  bad.setInts("steps", {1});
  EXPECT_EQ(runOp(OpKind::Slice, bad, {&x}, {&y}).code(), ErrorCode::Internal);
}

TEST(CpuShapeTest, TransposeAndReshapeMoveAnyDType) {
  for (DType t : kDTypes) {
    SCOPED_TRACE(dtypeName(t));
    Shape xs = {2, 3, 4, 5};
    std::vector<int64_t> perm = {2, 0, 3, 1};
    Shape ys = {4, 2, 5, 3};
    HostTensor x = iota(t, xs), y(t, ys);
    AttrMap at;
    at.setInts("perm", perm);
    ASSERT_OK(runOp(OpKind::Transpose, at, {&x}, {&y}));
    for (int64_t i = 0; i < y.numel(); ++i) {
      auto yi = unravel(i, ys);
      std::vector<int64_t> xi(4);
      for (size_t d = 0; d < 4; ++d) xi[size_t(perm[d])] = yi[d];
      ASSERT_EQ(elem(y, i), elem(x, ravel(xi, xs)));
    }
    HostTensor r(t, {6, 20});
    AttrMap rs;
    rs.setInts("shape", {6, 20});
    ASSERT_OK(runOp(OpKind::Reshape, rs, {&x}, {&r}));
    EXPECT_EQ(r.storage, x.storage);
  }
}

TEST(CpuShapeTest, ExpandBroadcastsAnyDType) {
  for (DType t : kDTypes) {
    SCOPED_TRACE(dtypeName(t));
    HostTensor x = iota(t, {3, 1}), y(t, {2, 3, 4});
    AttrMap at;
    at.setInts("shape", {2, 1, 4});
    ASSERT_OK(runOp(OpKind::Expand, at, {&x}, {&y}));
    for (int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(elem(y, i), elem(x, i / 4 % 3));
  }
}

AttrMap padAttrs(std::vector<int64_t> pads, const char* mode, double value = 0) {
  AttrMap a;
  a.setInts("pads", pads);
  a.setString("mode", mode);
  a.setFloat("value", value);
  return a;
}

TEST(CpuShapeTest, PadModesByHand) {
  HostTensor x = tensor({3}, {1, 2, 3});
  EXPECT_EQ(run1(OpKind::Pad, padAttrs({2, 1}, "constant", 9), {&x}, {6}).values(),
            (std::vector<float>{9, 9, 1, 2, 3, 9}));
  EXPECT_EQ(run1(OpKind::Pad, padAttrs({2, 1}, "reflect"), {&x}, {6}).values(),
            (std::vector<float>{3, 2, 1, 2, 3, 2}));
  EXPECT_EQ(run1(OpKind::Pad, padAttrs({2, 1}, "edge"), {&x}, {6}).values(),
            (std::vector<float>{1, 1, 1, 2, 3, 3}));
  HostTensor x4 = tensor({4}, {1, 2, 3, 4});
  EXPECT_EQ(run1(OpKind::Pad, padAttrs({-1, 2}, "constant"), {&x4}, {5}).values(),
            (std::vector<float>{2, 3, 4, 0, 0}));
  HostTensor x2 = tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(run1(OpKind::Pad, padAttrs({1, 2, 0, 1}, "reflect"), {&x2}, {3, 6}).values(),
            (std::vector<float>{6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5}));
  HostTensor y = zeros({6});
  EXPECT_EQ(runOp(OpKind::Pad, padAttrs({3, 0}, "reflect"), {&x}, {&y}).code(), ErrorCode::Internal)
      << "reflect pads must be smaller than the dim";
}

TEST(CpuShapeTest, PadBwdIsTheAdjointOfPad) {
  std::mt19937 rng(62);
  struct Case {
    Shape x;
    std::vector<int64_t> pads;
    const char* mode;
    Shape y;
  };
  for (const Case& c : {Case{{2, 3, 4}, {0, 2, 1, 1, 0, 3}, "reflect", {3, 5, 8}},
                        Case{{2, 3, 4}, {1, 0, 3, 0, 2, 2}, "edge", {3, 5, 9}},
                        Case{{2, 3, 4}, {1, -1, 2, 0, 1, -2}, "constant", {3, 3, 4}}}) {
    SCOPED_TRACE(c.mode);
    AttrMap at = padAttrs(c.pads, c.mode);
    at.setInts("x_shape", c.x);
    HostTensor x = randomTensor(c.x, rng), dy = randomTensor(c.y, rng);
    HostTensor y = run1(OpKind::Pad, at, {&x}, c.y);
    HostTensor dx = run1(OpKind::PadBwd, at, {&dy}, c.x);
    EXPECT_NEAR(weightedSum(y, dy), weightedSum(x, dx), 1e-4);
    // And against finite differences, element by element.
    auto loss = [&] { return weightedSum(run1(OpKind::Pad, at, {&x}, c.y), dy); };
    expectClose(dx.values(), numericGradient(x, loss, 1e-2), 1e-3, 1e-3);
  }
}

} // namespace
} // namespace hgp::cpu::test
