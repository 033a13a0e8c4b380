// Tests of the CPU convolution executors against direct loops written here in double:
// Conv, ConvBwdData and ConvBwdFilter over 1-D, 2-D and 3-D problems with groups, strides,
// dilations and asymmetric pads (including the depthwise and 1x1 fast paths), ConvTranspose
// against ONNX's scatter definition, and finite-difference checks of both gradients.
#include "CpuTestUtil.h"

namespace hgp::cpu::test {
namespace {

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

struct ConvSpec {
  Shape x, w; // X[N,C,*S], W[M,C/group,*K]
  std::vector<int64_t> strides, pads, dilations;
  int64_t group = 1;

  size_t r() const { return x.size() - 2; }
  AttrMap attrs() const {
    AttrMap a;
    a.setInts("strides", strides);
    a.setInts("pads", pads);
    a.setInts("dilations", dilations);
    a.setInt("group", group);
    return a;
  }
  Shape y() const {
    Shape y = {x[0], w[0]};
    for (size_t i = 0; i < r(); ++i)
      y.push_back((x[2 + i] + pads[i] + pads[r() + i] - dilations[i] * (w[2 + i] - 1) - 1) /
                      strides[i] +
                  1);
    return y;
  }
};

/// Calls fn(yIndex, xIndex, wIndex) for every multiply of the direct convolution.
template <typename Fn> void forEachTap(const ConvSpec& s, Fn fn) {
  Shape y = s.y();
  size_t r = s.r();
  int64_t n = s.x[0], c = s.x[1], m = s.w[0], cg = c / s.group, mg = m / s.group;
  Shape sx(s.x.begin() + 2, s.x.end()), sk(s.w.begin() + 2, s.w.end()), so(y.begin() + 2, y.end());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < m; ++oc)
      for (int64_t o = 0; o < numElements(so); ++o)
        for (int64_t ic = 0; ic < cg; ++ic)
          for (int64_t k = 0; k < numElements(sk); ++k) {
            auto oi = unravel(o, so), ki = unravel(k, sk);
            std::vector<int64_t> ii(r);
            bool inside = true;
            for (size_t d = 0; d < r; ++d) {
              ii[d] = oi[d] * s.strides[d] - s.pads[d] + ki[d] * s.dilations[d];
              inside = inside && ii[d] >= 0 && ii[d] < sx[d];
            }
            if (!inside) continue;
            int64_t channel = (oc / mg) * cg + ic;
            fn((b * m + oc) * numElements(so) + o,
               (b * c + channel) * numElements(sx) + ravel(ii, sx),
               (oc * cg + ic) * numElements(sk) + k);
          }
}

std::vector<double> refConv(const ConvSpec& s, const HostTensor& x, const HostTensor& w,
                            const HostTensor* bias) {
  Shape y = s.y();
  std::vector<double> out(size_t(numElements(y)), 0.0);
  forEachTap(s,
             [&](int64_t yi, int64_t xi, int64_t wi) { out[size_t(yi)] += double(x[xi]) * w[wi]; });
  if (bias) {
    int64_t vol = numElements(y) / (y[0] * y[1]);
    for (size_t i = 0; i < out.size(); ++i) out[i] += (*bias)[int64_t(i) / vol % y[1]];
  }
  return out;
}

std::vector<double> refBwdData(const ConvSpec& s, const HostTensor& dy, const HostTensor& w) {
  std::vector<double> dx(size_t(numElements(s.x)), 0.0);
  forEachTap(s,
             [&](int64_t yi, int64_t xi, int64_t wi) { dx[size_t(xi)] += double(dy[yi]) * w[wi]; });
  return dx;
}

std::vector<double> refBwdFilter(const ConvSpec& s, const HostTensor& x, const HostTensor& dy) {
  std::vector<double> dw(size_t(numElements(s.w)), 0.0);
  forEachTap(s,
             [&](int64_t yi, int64_t xi, int64_t wi) { dw[size_t(wi)] += double(dy[yi]) * x[xi]; });
  return dw;
}

const std::vector<std::pair<const char*, ConvSpec>>& specs() {
  static const std::vector<std::pair<const char*, ConvSpec>> all = {
      {"2-D groups, asymmetric pads, dilation",
       {{2, 4, 7, 6}, {6, 2, 3, 2}, {2, 1}, {1, 0, 2, 1}, {1, 2}, 2}},
      {"1-D stride and dilation", {{3, 3, 11}, {4, 3, 3}, {2}, {2, 1}, {2}, 1}},
      {"3-D asymmetric",
       {{1, 2, 4, 5, 3}, {3, 2, 2, 3, 2}, {1, 2, 1}, {0, 1, 1, 1, 0, 0}, {1, 1, 1}, 1}},
      {"depthwise", {{2, 5, 9, 8}, {5, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 5}},
      {"depthwise dilated asymmetric",
       {{1, 3, 8, 7}, {3, 1, 3, 2}, {1, 2}, {2, 0, 1, 1}, {2, 1}, 3}},
      {"pointwise", {{2, 8, 5, 5}, {4, 8, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}},
      {"pointwise grouped", {{3, 8, 4, 4}, {6, 4, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2}},
      {"strides 2x3, odd pads", {{2, 3, 9, 10}, {4, 3, 3, 3}, {2, 3}, {1, 1, 0, 2}, {1, 1}, 1}},
      {"1x1 stride 2", {{2, 3, 5, 5}, {4, 3, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1}},
      {"channel multiplier 2", {{2, 2, 6, 6}, {4, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2}},
      {"LeNet conv1", {{5, 1, 28, 28}, {6, 1, 5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 1}},
      {"LeNet conv2 batch 9", {{9, 6, 14, 14}, {16, 6, 5, 5}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}},
  };
  return all;
}

TEST(CpuConvTest, ForwardMatchesDirectLoop) {
  std::mt19937 rng(1);
  for (const auto& [name, s] : specs()) {
    SCOPED_TRACE(name);
    HostTensor x = randomTensor(s.x, rng), w = randomTensor(s.w, rng);
    HostTensor b = randomTensor({s.w[0]}, rng);
    HostTensor y = run1(OpKind::Conv, s.attrs(), {&x, &w, &b}, s.y());
    expectClose(y.values(), refConv(s, x, w, &b), 1e-5, 1e-4, name);
    HostTensor y2 = run1(OpKind::Conv, s.attrs(), {&x, &w}, s.y());
    expectClose(y2.values(), refConv(s, x, w, nullptr), 1e-5, 1e-4, name);
  }
}

TEST(CpuConvTest, BackwardDataMatchesDirectLoop) {
  std::mt19937 rng(2);
  for (const auto& [name, s] : specs()) {
    SCOPED_TRACE(name);
    HostTensor dy = randomTensor(s.y(), rng), w = randomTensor(s.w, rng);
    AttrMap at = s.attrs();
    at.setInts("x_shape", s.x);
    HostTensor dx = run1(OpKind::ConvBwdData, at, {&dy, &w}, s.x);
    expectClose(dx.values(), refBwdData(s, dy, w), 1e-5, 1e-4, name);
  }
}

TEST(CpuConvTest, BackwardFilterMatchesDirectLoop) {
  std::mt19937 rng(3);
  for (const auto& [name, s] : specs()) {
    SCOPED_TRACE(name);
    HostTensor x = randomTensor(s.x, rng), dy = randomTensor(s.y(), rng);
    AttrMap at = s.attrs();
    at.setInts("w_shape", s.w);
    HostTensor dw = run1(OpKind::ConvBwdFilter, at, {&x, &dy}, s.w);
    expectClose(dw.values(), refBwdFilter(s, x, dy), 1e-4, 1e-4, name);
  }
}

TEST(CpuConvTest, GradientsMatchFiniteDifferencesOfForward) {
  std::mt19937 rng(4);
  for (int which : {0, 2, 4}) {
    const auto& [name, s] = specs()[size_t(which)];
    SCOPED_TRACE(name);
    HostTensor x = randomTensor(s.x, rng), w = randomTensor(s.w, rng);
    HostTensor weights = randomTensor(s.y(), rng); // dL/dY
    auto loss = [&] {
      return weightedSum(run1(OpKind::Conv, s.attrs(), {&x, &w}, s.y()), weights);
    };
    AttrMap at = s.attrs();
    at.setInts("x_shape", s.x);
    at.setInts("w_shape", s.w);
    HostTensor dx = run1(OpKind::ConvBwdData, at, {&weights, &w}, s.x);
    HostTensor dw = run1(OpKind::ConvBwdFilter, at, {&x, &weights}, s.w);
    expectClose(dx.values(), numericGradient(x, loss, 1e-2), 2e-3, 2e-3, "dX");
    expectClose(dw.values(), numericGradient(w, loss, 1e-2), 2e-3, 2e-3, "dW");
  }
}

TEST(CpuConvTest, BackwardFilterDoesNotDependOnBatchSplit) {
  // The filter gradient of a batch equals the sum of the gradients of its halves.
  std::mt19937 rng(5);
  ConvSpec s{{16, 3, 6, 6}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  HostTensor x = randomTensor(s.x, rng), dy = randomTensor(s.y(), rng);
  AttrMap at = s.attrs();
  at.setInts("w_shape", s.w);
  HostTensor dw = run1(OpKind::ConvBwdFilter, at, {&x, &dy}, s.w);
  std::vector<double> sum(size_t(numElements(s.w)), 0.0);
  for (int half = 0; half < 2; ++half) {
    ConvSpec h = s;
    h.x[0] = 8;
    HostTensor xh(DType::F32, h.x), dyh(DType::F32, h.y());
    std::memcpy(xh.data(), x.f32() + half * xh.numel(), size_t(xh.numel()) * 4);
    std::memcpy(dyh.data(), dy.f32() + half * dyh.numel(), size_t(dyh.numel()) * 4);
    HostTensor part = run1(OpKind::ConvBwdFilter, at, {&xh, &dyh}, s.w);
    for (int64_t i = 0; i < part.numel(); ++i) sum[size_t(i)] += part[i];
  }
  expectClose(dw.values(), sum, 1e-4, 1e-5);
}

// ---- ConvTranspose ----------------------------------------------------------------------------

struct TransposeSpec {
  Shape x, w; // X[N,C,*S], W[C,M/group,*K]
  std::vector<int64_t> strides, pads, dilations, outputPadding;
  int64_t group = 1;

  size_t r() const { return x.size() - 2; }
  AttrMap attrs() const {
    AttrMap a;
    a.setInts("strides", strides);
    a.setInts("pads", pads);
    a.setInts("dilations", dilations);
    a.setInts("output_padding", outputPadding);
    a.setInt("group", group);
    return a;
  }
  Shape y() const {
    Shape y = {x[0], w[1] * group};
    for (size_t i = 0; i < r(); ++i)
      y.push_back((x[2 + i] - 1) * strides[i] + (w[2 + i] - 1) * dilations[i] + 1 +
                  outputPadding[i] - pads[i] - pads[r() + i]);
    return y;
  }
};

/// ONNX's definition: every input element scatters X * W into the output window it maps to.
std::vector<double> refConvTranspose(const TransposeSpec& s, const HostTensor& x,
                                     const HostTensor& w, const HostTensor* bias) {
  Shape y = s.y();
  size_t r = s.r();
  int64_t c = s.x[1], cg = c / s.group, mg = s.w[1], m = y[1];
  Shape sx(s.x.begin() + 2, s.x.end()), sk(s.w.begin() + 2, s.w.end()), so(y.begin() + 2, y.end());
  std::vector<double> out(size_t(numElements(y)), 0.0);
  for (int64_t b = 0; b < s.x[0]; ++b)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t i = 0; i < numElements(sx); ++i)
        for (int64_t om = 0; om < mg; ++om)
          for (int64_t k = 0; k < numElements(sk); ++k) {
            auto ii = unravel(i, sx), ki = unravel(k, sk);
            std::vector<int64_t> oi(r);
            bool inside = true;
            for (size_t d = 0; d < r; ++d) {
              oi[d] = ii[d] * s.strides[d] - s.pads[d] + ki[d] * s.dilations[d];
              inside = inside && oi[d] >= 0 && oi[d] < so[d];
            }
            if (!inside) continue;
            int64_t oc = (ic / cg) * mg + om;
            out[size_t((b * m + oc) * numElements(so) + ravel(oi, so))] +=
                double(x[(b * c + ic) * numElements(sx) + i]) *
                w[(ic * mg + om) * numElements(sk) + k];
          }
  if (bias)
    for (size_t i = 0; i < out.size(); ++i) out[i] += (*bias)[int64_t(i) / numElements(so) % m];
  return out;
}

TEST(CpuConvTest, ConvTransposeMatchesScatterDefinition) {
  const std::vector<std::pair<const char*, TransposeSpec>> cases = {
      {"2-D groups, output_padding",
       {{2, 4, 3, 4}, {4, 3, 3, 3}, {2, 2}, {1, 0, 0, 1}, {1, 1}, {1, 0}, 2}},
      {"1-D dilated", {{1, 2, 5}, {2, 3, 3}, {3}, {0, 2}, {2}, {1}, 1}},
      {"depthwise", {{2, 3, 4, 4}, {3, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 3}},
      {"3-D",
       {{1, 2, 2, 3, 2}, {2, 2, 2, 2, 2}, {2, 1, 2}, {0, 0, 0, 0, 0, 0}, {1, 1, 1}, {0, 0, 1}, 1}},
      {"output_padding above stride", {{1, 1, 4}, {1, 1, 2}, {1}, {0, 0}, {3}, {1}, 1}},
      {"1x1", {{2, 4, 3, 3}, {4, 2, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, {0, 0}, 1}},
  };
  std::mt19937 rng(6);
  for (const auto& [name, s] : cases) {
    SCOPED_TRACE(name);
    HostTensor x = randomTensor(s.x, rng), w = randomTensor(s.w, rng);
    HostTensor b = randomTensor({s.y()[1]}, rng);
    HostTensor y = run1(OpKind::ConvTranspose, s.attrs(), {&x, &w, &b}, s.y());
    expectClose(y.values(), refConvTranspose(s, x, w, &b), 1e-5, 1e-4, name);
    HostTensor y2 = run1(OpKind::ConvTranspose, s.attrs(), {&x, &w}, s.y());
    expectClose(y2.values(), refConvTranspose(s, x, w, nullptr), 1e-5, 1e-4, name);
  }
}

TEST(CpuConvTest, HandComputedConvWithPadding) {
  // 1x1x3x3 input, 2x2 kernel of ones, pads (1,1,0,0): output 3x3 of 2x2 window sums.
  HostTensor x = tensor({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  HostTensor w = tensor({1, 1, 2, 2}, {1, 1, 1, 1});
  ConvSpec s{{1, 1, 3, 3}, {1, 1, 2, 2}, {1, 1}, {1, 1, 0, 0}, {1, 1}, 1};
  ASSERT_EQ(s.y(), (Shape{1, 1, 3, 3}));
  HostTensor y = run1(OpKind::Conv, s.attrs(), {&x, &w}, s.y());
  expectClose(y.values(), std::vector<float>{1, 3, 5, 5, 12, 16, 11, 24, 28}, 0, 0);
}

TEST(CpuConvTest, RejectsShapesOutsideTheContract) {
  ConvSpec s{{1, 2, 5, 5}, {3, 2, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1};
  HostTensor x = zeros(s.x), w = zeros(s.w), y = zeros({1, 3, 4, 4}); // should be 3x3
  Status st = runOp(OpKind::Conv, s.attrs(), {&x, &w}, {&y});
  EXPECT_EQ(st.code(), ErrorCode::Internal);
  HostTensor wBad = zeros({3, 1, 3, 3}), yOk = zeros(s.y());
  EXPECT_EQ(runOp(OpKind::Conv, s.attrs(), {&x, &wBad}, {&yOk}).code(), ErrorCode::Internal);
  AttrMap noPads = s.attrs();
  noPads.erase("pads");
  EXPECT_EQ(runOp(OpKind::Conv, noPads, {&x, &w}, {&yOk}).code(), ErrorCode::Internal);
  HostTensor badBias = zeros({2});
  EXPECT_EQ(runOp(OpKind::Conv, s.attrs(), {&x, &w, &badBias}, {&yOk}).code(), ErrorCode::Internal);
}

} // namespace
} // namespace hgp::cpu::test
