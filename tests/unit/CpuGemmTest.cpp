// Tests of the CPU Gemm and MatMul executors against naive triple loops in double: every
// transpose combination, C broadcast shapes, alpha and beta, and MatMul's numpy semantics
// (1-D promotion, batch broadcasting, the stacked fast path).
#include "CpuTestUtil.h"

namespace hgp::cpu::test {
namespace {

/// Element (i, j) of a row-major [rows, cols] matrix, or of its transpose.
double at(const HostTensor& t, bool trans, int64_t i, int64_t j) {
  int64_t cols = t.shape[1];
  return trans ? t[j * cols + i] : t[i * cols + j];
}

TEST(CpuGemmTest, GemmMatchesNaiveProduct) {
  std::mt19937 rng(41);
  const int64_t m = 7, n = 37, k = 300; // k spans two of sgemm's K blocks
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (Shape cShape : {Shape{}, Shape{n}, Shape{1, n}, Shape{m, 1}, Shape{m, n}, Shape{0}}) {
        SCOPED_TRACE(std::to_string(ta) + std::to_string(tb) + " C" + shapeToString(cShape));
        bool withC = cShape != Shape{0};
        HostTensor a = randomTensor(ta ? Shape{k, m} : Shape{m, k}, rng);
        HostTensor b = randomTensor(tb ? Shape{n, k} : Shape{k, n}, rng);
        HostTensor c = randomTensor(withC ? cShape : Shape{1}, rng);
        AttrMap at_;
        at_.setInt("transA", ta);
        at_.setInt("transB", tb);
        at_.setFloat("alpha", 0.5);
        at_.setFloat("beta", -2.0);
        std::vector<HostTensor*> in = {&a, &b};
        if (withC) in.push_back(&c);
        HostTensor y = run1(OpKind::Gemm, at_, in, {m, n});
        std::vector<double> ref(size_t(m * n));
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (int64_t p = 0; p < k; ++p) s += at(a, ta, i, p) * at(b, tb, p, j);
            double cv = 0;
            if (withC) {
              if (cShape.empty())
                cv = c[0];
              else if (cShape.size() == 1)
                cv = c[j];
              else
                cv = c[(cShape[0] == 1 ? 0 : i) * cShape[1] + (cShape[1] == 1 ? 0 : j)];
            }
            ref[size_t(i * n + j)] = 0.5 * s - 2.0 * cv;
          }
        expectClose(y.values(), ref, 1e-4, 1e-4);
      }
}

/// numpy matmul of a [.., m, k] by b [.., k, n] with batch broadcasting, in double.
std::vector<double> refMatMul(const HostTensor& a, const HostTensor& b, const Shape& y) {
  Shape sa = a.shape, sb = b.shape;
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  size_t r = std::max(sa.size(), sb.size()) - 2;
  while (sa.size() < r + 2) sa.insert(sa.begin(), 1);
  while (sb.size() < r + 2) sb.insert(sb.begin(), 1);
  Shape batch(r);
  for (size_t i = 0; i < r; ++i) batch[i] = std::max(sa[i], sb[i]);
  std::vector<double> out;
  for (int64_t bi = 0; bi < numElements(batch); ++bi) {
    int64_t offA = 0, offB = 0, rem = bi;
    std::vector<int64_t> idx(r);
    for (int64_t d = int64_t(r) - 1; d >= 0; --d) {
      idx[size_t(d)] = rem % batch[size_t(d)];
      rem /= batch[size_t(d)];
    }
    for (size_t d = 0; d < r; ++d) {
      offA = offA * sa[d] + (sa[d] == 1 ? 0 : idx[d]);
      offB = offB * sb[d] + (sb[d] == 1 ? 0 : idx[d]);
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += double(a[offA * m * k + i * k + p]) * b[offB * k * n + p * n + j];
        out.push_back(s);
      }
  }
  EXPECT_EQ(int64_t(out.size()), numElements(y));
  return out;
}

TEST(CpuGemmTest, MatMulFollowsNumpy) {
  std::mt19937 rng(42);
  struct Case {
    Shape a, b, y;
  };
  const std::vector<Case> cases = {
      {{5}, {5}, {}},                          // dot product
      {{5}, {5, 3}, {3}},                      // vector x matrix
      {{4, 5}, {5}, {4}},                      // matrix x vector
      {{3}, {2, 3, 4}, {2, 4}},                // vector x batch
      {{2, 6, 4, 5}, {5, 3}, {2, 6, 4, 3}},    // stacked fast path
      {{4, 5}, {3, 5, 2}, {3, 4, 2}},          // broadcast A
      {{2, 1, 3, 4}, {3, 4, 5}, {2, 3, 3, 5}}, // broadcast both
      {{2, 3, 4}, {2, 4, 6}, {2, 3, 6}},       // plain batch
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(shapeToString(c.a) + " x " + shapeToString(c.b));
    HostTensor a = randomTensor(c.a, rng), b = randomTensor(c.b, rng);
    HostTensor y = run1(OpKind::MatMul, {}, {&a, &b}, c.y);
    expectClose(y.values(), refMatMul(a, b, c.y), 1e-5, 1e-5);
  }
  HostTensor a = zeros({2, 3}), b = zeros({4, 2}), y = zeros({2, 2});
  EXPECT_EQ(runOp(OpKind::MatMul, {}, {&a, &b}, {&y}).code(), ErrorCode::Internal);
}

} // namespace
} // namespace hgp::cpu::test
