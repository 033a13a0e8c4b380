// Tests of the CPU broadcasting binary ops and Sum against a naive numpy-broadcast loop.
#include "CpuTestUtil.h"

namespace hgp::cpu::test {
namespace {

/// Element `flat` of `out`-shaped broadcast reads of t.
double bcast(const HostTensor& t, const Shape& out, int64_t flat) {
  int64_t off = 0, stride = 1;
  for (int64_t d = int64_t(out.size()) - 1; d >= 0; --d) {
    int64_t idx = flat % out[size_t(d)];
    flat /= out[size_t(d)];
    int64_t td = d - int64_t(out.size() - t.shape.size());
    if (td < 0) continue;
    if (t.shape[size_t(td)] != 1) off += idx * stride;
    stride *= t.shape[size_t(td)];
  }
  return t[off];
}

struct BinCase {
  Shape a, b, y;
};

const std::vector<BinCase>& binCases() {
  static const std::vector<BinCase> all = {
      {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
      {{2, 3, 4}, {}, {2, 3, 4}},
      {{1}, {2, 3, 4}, {2, 3, 4}},
      {{2, 3, 4}, {3, 1}, {2, 3, 4}},
      {{4}, {2, 3, 4}, {2, 3, 4}},
      {{2, 1, 4}, {1, 3, 1}, {2, 3, 4}},
      {{5, 3, 1, 1}, {3, 7, 9}, {5, 3, 7, 9}},
      {{1, 1}, {1}, {1, 1}},
      {{2, 6, 5, 5}, {1, 6, 1, 1}, {2, 6, 5, 5}},
  };
  return all;
}

TEST(CpuElementwiseTest, BinaryOpsBroadcastLikeNumpy) {
  std::mt19937 rng(51);
  struct Op {
    OpKind kind;
    double (*f)(double, double);
  };
  const Op ops[] = {{OpKind::Add, [](double x, double y) { return x + y; }},
                    {OpKind::Sub, [](double x, double y) { return x - y; }},
                    {OpKind::Mul, [](double x, double y) { return x * y; }},
                    {OpKind::Div, [](double x, double y) { return x / y; }}};
  for (const BinCase& c : binCases())
    for (const Op& op : ops) {
      SCOPED_TRACE(std::string(opName(op.kind)) + " " + shapeToString(c.a) + " " +
                   shapeToString(c.b));
      HostTensor a = randomTensor(c.a, rng, 0.5f, 2.f), b = randomTensor(c.b, rng, 0.5f, 2.f);
      HostTensor y = run1(op.kind, {}, {&a, &b}, c.y);
      std::vector<double> ref;
      for (int64_t i = 0; i < numElements(c.y); ++i)
        ref.push_back(op.f(bcast(a, c.y, i), bcast(b, c.y, i)));
      expectClose(y.values(), ref, 0, 1e-6);
    }
}

TEST(CpuElementwiseTest, LargeBroadcastRunsInParallelChunks) {
  std::mt19937 rng(52);
  HostTensor a = randomTensor({3, 64, 40, 41}, rng), b = randomTensor({64, 1, 41}, rng);
  Shape y = {3, 64, 40, 41};
  HostTensor out = run1(OpKind::Mul, {}, {&a, &b}, y);
  std::vector<double> ref;
  for (int64_t i = 0; i < numElements(y); ++i) ref.push_back(bcast(a, y, i) * bcast(b, y, i));
  expectClose(out.values(), ref, 0, 1e-6);
}

TEST(CpuElementwiseTest, SumAddsBroadcastOperandsInOrder) {
  std::mt19937 rng(53);
  HostTensor a = randomTensor({2, 3}, rng), b = randomTensor({3}, rng),
             c = randomTensor({2, 1}, rng);
  HostTensor d = randomTensor({}, rng);
  HostTensor y = run1(OpKind::Sum, {}, {&a, &b, &c, &d}, {2, 3});
  std::vector<double> ref;
  for (int64_t i = 0; i < 6; ++i)
    ref.push_back(bcast(a, {2, 3}, i) + bcast(b, {2, 3}, i) + bcast(c, {2, 3}, i) + d[0]);
  expectClose(y.values(), ref, 1e-6, 1e-6);
  HostTensor one = run1(OpKind::Sum, {}, {&b}, {2, 3});
  std::vector<double> ref1;
  for (int64_t i = 0; i < 6; ++i) ref1.push_back(bcast(b, {2, 3}, i));
  expectClose(one.values(), ref1, 0, 0);
}

TEST(CpuElementwiseTest, RejectsOperandsThatDoNotBroadcast) {
  HostTensor a = zeros({2, 3}), b = zeros({2}), y = zeros({2, 3});
  EXPECT_EQ(runOp(OpKind::Add, {}, {&a, &b}, {&y}).code(), ErrorCode::Internal);
  HostTensor i64(DType::I64, {2, 3});
  EXPECT_EQ(runOp(OpKind::Add, {}, {&a, &i64}, {&y}).code(), ErrorCode::Internal);
}

} // namespace
} // namespace hgp::cpu::test
