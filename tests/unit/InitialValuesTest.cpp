// InitialValuesTest.cpp - the initial bytes both backends load (runtime/plan/InitialValues.h):
// fills written element by element, data and file ranges copied from their offsets, and the
// errors for a range outside the data and a fill the backends do not support.
#include "runtime/plan/InitialValues.h"

#include <gtest/gtest.h>

#include <cstring>

namespace hgp {
namespace {

PlanTensor tensorOf(DType d, Shape s, InitKind init) {
  PlanTensor t;
  t.name = "t";
  t.type = {d, std::move(s)};
  t.init = init;
  return t;
}

TEST(InitialValues, FillsF32AndI64ElementByElement) {
  std::vector<uint8_t> out;
  PlanTensor f = tensorOf(DType::F32, {3}, InitKind::Fill);
  f.fillValue = -2.5;
  ASSERT_TRUE(initialBytes(f, {}, out).isOk());
  ASSERT_EQ(out.size(), 12u);
  float v[3];
  std::memcpy(v, out.data(), 12);
  for (float x : v) EXPECT_EQ(x, -2.5f);
  PlanTensor i = tensorOf(DType::I64, {2}, InitKind::Fill);
  i.fillValue = 7;
  ASSERT_TRUE(initialBytes(i, {}, out).isOk());
  ASSERT_EQ(out.size(), 16u);
  int64_t w[2];
  std::memcpy(w, out.data(), 16);
  EXPECT_EQ(w[0], 7);
  EXPECT_EQ(w[1], 7);
}

TEST(InitialValues, CopiesDataAndFileRangesFromTheirOffsets) {
  std::vector<uint8_t> data(32), file(32);
  for (size_t k = 0; k < 32; ++k) data[k] = uint8_t(k), file[k] = uint8_t(100 + k);
  std::vector<uint8_t> out;
  PlanTensor d = tensorOf(DType::F32, {2}, InitKind::Data);
  d.dataOffset = 8;
  ASSERT_TRUE(initialBytes(d, {data, file}, out).isOk());
  EXPECT_EQ(out, std::vector<uint8_t>(data.begin() + 8, data.begin() + 16));
  d.init = InitKind::File;
  ASSERT_TRUE(initialBytes(d, {data, file}, out).isOk());
  EXPECT_EQ(out, std::vector<uint8_t>(file.begin() + 8, file.begin() + 16));
  d.dataOffset = 28; // 8 bytes from 28 run past the end
  Status st = initialBytes(d, {data, file}, out);
  EXPECT_EQ(st.code(), ErrorCode::InvalidModel) << st.toString();
}

TEST(InitialValues, ZeroAndNoneLeaveNothingAndOtherFillsAreRefused) {
  std::vector<uint8_t> out = {1, 2, 3};
  ASSERT_TRUE(initialBytes(tensorOf(DType::F32, {4}, InitKind::Zero), {}, out).isOk());
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(initialBytes(tensorOf(DType::F32, {4}, InitKind::None), {}, out).isOk());
  EXPECT_TRUE(out.empty());
  Status st = initialBytes(tensorOf(DType::BF16, {4}, InitKind::Fill), {}, out);
  EXPECT_EQ(st.code(), ErrorCode::Internal) << st.toString();
  EXPECT_TRUE(out.empty());
}

} // namespace
} // namespace hgp
