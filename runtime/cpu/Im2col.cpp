#include "runtime/cpu/Im2col.h"

#include <algorithm>

namespace hgp::cpu {

bool ConvGeometry::isPointwise() const {
  for (int d = 0; d < 3; ++d)
    if (k[d] != 1 || stride[d] != 1 || pad[d] != 0 || in[d] != out[d]) return false;
  return true;
}

Status readConvGeometry(const KernelArgs& a, const Shape& x, const Shape& w, const Shape& y,
                        bool checkOutput, ConvGeometry& g) {
  size_t rank = x.size();
  if (rank < 3 || rank > 5 || w.size() != rank || y.size() != rank)
    return a.fail("convolution operands " + str(x) + ", " + str(w) + ", " + str(y) +
                  " must all have rank 3 to 5");
  size_t r = rank - 2;
  std::vector<int64_t> strides, pads, dilations;
  HGP_TRY(readInts(a, "strides", r, strides));
  HGP_TRY(readInts(a, "pads", 2 * r, pads));
  HGP_TRY(readInts(a, "dilations", r, dilations));
  g = ConvGeometry();
  g.group = a.attrs().getInt("group", 1);
  g.n = x[0];
  g.inC = x[1];
  g.outC = w[0];
  if (g.group < 1 || g.inC % g.group != 0 || g.outC % g.group != 0 || w[1] * g.group != g.inC ||
      y[0] != g.n || y[1] != g.outC)
    return a.fail("channels do not fit: x " + str(x) + ", w " + str(w) + ", y " + str(y) +
                  ", group " + std::to_string(g.group));
  size_t lead = 3 - r;
  for (size_t i = 0; i < r; ++i) {
    if (strides[i] < 1 || dilations[i] < 1 || pads[i] < 0 || pads[r + i] < 0)
      return a.fail("strides and dilations must be positive and pads non-negative");
    int64_t want =
        windowOutputSize(x[2 + i], w[2 + i], strides[i], pads[i], pads[r + i], dilations[i], false);
    if (checkOutput && y[2 + i] != want)
      return a.fail("output " + str(y) + " does not match the convolution of " + str(x) + " with " +
                    str(w));
    g.in[lead + i] = x[2 + i];
    g.out[lead + i] = y[2 + i];
    g.k[lead + i] = w[2 + i];
    g.stride[lead + i] = strides[i];
    g.pad[lead + i] = pads[i];
    g.dilation[lead + i] = dilations[i];
  }
  return Status::ok();
}

namespace {

/// Visits every (column row, output row) pair: fn(colRow, xRow, lo, hi, offW) where colRow points
/// at outW column entries, xRow at the input row (nullptr when the row is padding), and the
/// entries [lo, hi) read xRow[ow*strideW + offW].
template <typename ColPtr, typename XPtr, typename Fn>
void forEachColumnRow(ColPtr col, XPtr x, int64_t c, const ConvGeometry& g, Fn&& fn) {
  const int64_t oD = g.out[0], oH = g.out[1], oW = g.out[2];
  const int64_t iD = g.in[0], iH = g.in[1], iW = g.in[2];
  int64_t row = c * g.kVol();
  for (int64_t kd = 0; kd < g.k[0]; ++kd)
    for (int64_t kh = 0; kh < g.k[1]; ++kh)
      for (int64_t kw = 0; kw < g.k[2]; ++kw, ++row) {
        int64_t offW = kw * g.dilation[2] - g.pad[2], lo, hi;
        validRange(offW, g.stride[2], iW, oW, lo, hi);
        for (int64_t od = 0; od < oD; ++od) {
          int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dilation[0];
          for (int64_t oh = 0; oh < oH; ++oh) {
            int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dilation[1];
            auto colRow = col + (row * oD * oH + od * oH + oh) * oW;
            bool inside = id >= 0 && id < iD && ih >= 0 && ih < iH;
            fn(colRow, inside ? x + ((c * iD + id) * iH + ih) * iW : nullptr, lo, hi, offW);
          }
        }
      }
}

} // namespace

void vol2col(const float* x, int64_t channels, const ConvGeometry& g, float* col) {
  const int64_t oW = g.out[2], sW = g.stride[2];
  parallelFor(channels, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      forEachColumnRow(col, x, c, g,
                       [&](float* dst, const float* src, int64_t lo, int64_t hi, int64_t offW) {
                         if (!src) {
                           std::fill(dst, dst + oW, 0.f);
                           return;
                         }
                         std::fill(dst, dst + lo, 0.f);
                         for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow * sW + offW];
                         std::fill(dst + hi, dst + oW, 0.f);
                       });
  });
}

void col2vol(const float* col, int64_t channels, const ConvGeometry& g, float* x) {
  const int64_t sW = g.stride[2];
  // Channels write disjoint planes of x, so they can run in parallel.
  parallelFor(channels, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      forEachColumnRow(col, x, c, g,
                       [&](const float* src, float* dst, int64_t lo, int64_t hi, int64_t offW) {
                         if (!dst) return;
                         for (int64_t ow = lo; ow < hi; ++ow) dst[ow * sW + offW] += src[ow];
                       });
  });
}

bool batchIsParallel(int64_t n) {
  unsigned threads = ThreadPool::global().size();
  return threads > 1 && n >= int64_t(threads);
}

} // namespace hgp::cpu
