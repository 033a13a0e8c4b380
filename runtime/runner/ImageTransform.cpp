#include "runtime/runner/ImageTransform.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace hgp {

SampleRng::SampleRng(uint64_t seed, int64_t epoch, int64_t index) : draws_(seed, epoch, index) {}

double SampleRng::uniform() { return draws_.uniform(); }

namespace {

int64_t integer(const Uniform& u, int64_t lo, int64_t hi) { return drawInteger(u(), lo, hi); }

/// Python's round(): to nearest, ties to even.
int pyRound(double v) { return int(std::nearbyint(v)); }

} // namespace

Box randomResizedCropBox(int width, int height, double scaleLo, double scaleHi, double ratioLo,
                         double ratioHi, const Uniform& rng) {
  double area = double(width) * double(height);
  // torchvision takes the logs of a float32 tensor.
  double logLo = std::log(float(ratioLo)), logHi = std::log(float(ratioHi));
  for (int attempt = 0; attempt < 10; ++attempt) {
    double target = area * (scaleLo + rng() * (scaleHi - scaleLo));
    double aspect = std::exp(logLo + rng() * (logHi - logLo));
    int w = pyRound(std::sqrt(target * aspect)), h = pyRound(std::sqrt(target / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      int i = int(integer(rng, 0, height - h + 1)), j = int(integer(rng, 0, width - w + 1));
      return Box{double(j), double(i), double(j + w), double(i + h)};
    }
  }
  double inRatio = double(width) / double(height);
  int w = width, h = height;
  if (inRatio < std::min(ratioLo, ratioHi)) h = pyRound(w / std::min(ratioLo, ratioHi));
  else if (inRatio > std::max(ratioLo, ratioHi)) w = pyRound(h * std::max(ratioLo, ratioHi));
  int i = (height - h) / 2, j = (width - w) / 2;
  return Box{double(j), double(i), double(j + w), double(i + h)};
}

Box resizeCenterCropBox(int width, int height, int resize, int cropW, int cropH) {
  int shortSide = std::min(width, height), longSide = std::max(width, height);
  int newLong = int(double(resize) * double(longSide) / double(shortSide));
  int newW = width <= height ? resize : newLong, newH = width <= height ? newLong : resize;
  int top = pyRound((newH - cropH) / 2.0), left = pyRound((newW - cropW) / 2.0);
  double sx = double(width) / newW, sy = double(height) / newH;
  return Box{left * sx, top * sy, (left + cropW) * sx, (top + cropH) * sy};
}

namespace {

constexpr int kPrecision = 22; // PIL's PRECISION_BITS for 8-bit images.

/// PIL's precompute_coeffs + normalize_coeffs_8bpc for the bilinear (triangle) filter over an
/// input of `inSize` pixels; `in0` is relative to the input's first pixel.
struct Coeffs {
  int ksize = 0;
  std::vector<int> bounds; // per output: first input, count
  std::vector<int> k;      // per output: ksize fixed-point weights
};

Coeffs coeffs(int inSize, double in0, double in1, int outSize) {
  Coeffs c;
  double scale = (in1 - in0) / outSize, filterscale = std::max(scale, 1.0);
  double support = 1.0 * filterscale;
  c.ksize = int(std::ceil(support)) * 2 + 1;
  c.bounds.resize(size_t(outSize) * 2);
  c.k.assign(size_t(outSize) * size_t(c.ksize), 0);
  std::vector<double> w(size_t(c.ksize));
  for (int xx = 0; xx < outSize; ++xx) {
    double center = in0 + (xx + 0.5) * scale, ss = 1.0 / filterscale, ww = 0;
    int xmin = std::max(int(center - support + 0.5), 0);
    int xmax = std::min(int(center + support + 0.5), inSize) - xmin;
    for (int x = 0; x < xmax; ++x) {
      double t = std::fabs((x + xmin - center + 0.5) * ss);
      w[size_t(x)] = t < 1.0 ? 1.0 - t : 0.0;
      ww += w[size_t(x)];
    }
    for (int x = 0; x < xmax; ++x) {
      double v = ww != 0.0 ? w[size_t(x)] / ww : w[size_t(x)];
      c.k[size_t(xx * c.ksize + x)] = int(v < 0 ? -0.5 + v * (1 << kPrecision) : 0.5 + v * (1 << kPrecision));
    }
    c.bounds[size_t(2 * xx)] = xmin;
    c.bounds[size_t(2 * xx + 1)] = std::max(xmax, 0);
  }
  return c;
}

inline uint8_t clip8(int v) {
  if (v >= (1 << kPrecision << 8)) return 255;
  if (v <= 0) return 0;
  return uint8_t(v >> kPrecision);
}

} // namespace

void resample(const Image& in, const std::array<int, 4>& clip, const Box& box, int outW, int outH,
              Image& out) {
  const int ch = in.channels, cx = clip[0], cy = clip[1], cw = clip[2] - clip[0],
            chh = clip[3] - clip[1];
  const double bx0 = box.x0 - cx, bx1 = box.x1 - cx, by0 = box.y0 - cy, by1 = box.y1 - cy;
  Coeffs vert = coeffs(chh, by0, by1, outH);
  bool needH = outW != cw || bx0 != 0 || bx1 != cw, needV = outH != chh || by0 != 0 || by1 != chh;
  int yFirst = vert.bounds[0], yLast = vert.bounds[size_t(2 * outH - 2)] + vert.bounds[size_t(2 * outH - 1)];
  // The horizontal pass over the rows the vertical pass reads, into `tmp` (8-bit, as in PIL).
  Image tmp;
  if (needH) {
    Coeffs hor = coeffs(cw, bx0, bx1, outW);
    tmp.width = outW, tmp.height = yLast - yFirst, tmp.channels = ch;
    tmp.pixels.resize(size_t(tmp.width) * size_t(tmp.height) * size_t(ch));
    for (int y = 0; y < tmp.height; ++y) {
      const uint8_t* row = in.row(cy + yFirst + y) + size_t(cx) * size_t(ch);
      uint8_t* dst = tmp.row(y);
      for (int xx = 0; xx < outW; ++xx) {
        int xmin = hor.bounds[size_t(2 * xx)], n = hor.bounds[size_t(2 * xx + 1)];
        const int* k = hor.k.data() + size_t(xx) * size_t(hor.ksize);
        for (int c = 0; c < ch; ++c) {
          int s = 1 << (kPrecision - 1);
          for (int x = 0; x < n; ++x) s += row[(xmin + x) * ch + c] * k[x];
          dst[xx * ch + c] = clip8(s);
        }
      }
    }
  }
  // Row r of the clip (after the horizontal pass, if any), from its first pixel.
  auto srcRow = [&](int r) -> const uint8_t* {
    return needH ? tmp.row(r - yFirst) : in.row(cy + r) + size_t(cx) * size_t(ch);
  };
  out.width = outW, out.height = outH, out.channels = ch;
  out.pixels.resize(size_t(outW) * size_t(outH) * size_t(ch));
  if (!needV) {
    for (int y = 0; y < outH; ++y) std::memcpy(out.row(y), srcRow(y), size_t(outW) * size_t(ch));
    return;
  }
  std::vector<const uint8_t*> rows;
  for (int yy = 0; yy < outH; ++yy) {
    int ymin = vert.bounds[size_t(2 * yy)], n = vert.bounds[size_t(2 * yy + 1)];
    const int* k = vert.k.data() + size_t(yy) * size_t(vert.ksize);
    uint8_t* dst = out.row(yy);
    rows.resize(size_t(n));
    for (int y = 0; y < n; ++y) rows[size_t(y)] = srcRow(ymin + y);
    for (int xx = 0; xx < outW * ch; ++xx) {
      int s = 1 << (kPrecision - 1);
      for (int y = 0; y < n; ++y) s += rows[size_t(y)][xx] * k[y];
      dst[xx] = clip8(s);
    }
  }
}

void randomCropPadded(const Image& in, int outW, int outH, int padding, const Uniform& rng,
                      Image& out) {
  int pw = in.width + 2 * padding, ph = in.height + 2 * padding;
  int i = int(integer(rng, 0, ph - outH + 1)), j = int(integer(rng, 0, pw - outW + 1));
  const int ch = in.channels;
  out.width = outW, out.height = outH, out.channels = ch;
  out.pixels.assign(size_t(outW) * size_t(outH) * size_t(ch), 0);
  for (int y = 0; y < outH; ++y) {
    int sy = i + y - padding;
    if (sy < 0 || sy >= in.height) continue;
    int x0 = std::max(0, padding - j), x1 = std::min(outW, in.width + padding - j);
    if (x1 > x0)
      std::memcpy(out.row(y) + size_t(x0) * size_t(ch), in.row(sy) + size_t(j + x0 - padding) * size_t(ch),
                  size_t(x1 - x0) * size_t(ch));
  }
}

NormalizeTable::NormalizeTable(int channels, const std::vector<float>& mean,
                               const std::vector<float>& stddev) {
  channel.resize(size_t(channels));
  for (int c = 0; c < channels; ++c) {
    float m = mean.empty() ? 0.0f : mean[mean.size() == 1 ? 0 : size_t(c)];
    float s = stddev.empty() ? 1.0f : stddev[stddev.size() == 1 ? 0 : size_t(c)];
    for (int v = 0; v < 256; ++v) channel[size_t(c)][size_t(v)] = (float(v) / 255.0f - m) / s;
  }
}

void writeNormalized(const Image& img, const NormalizeTable& table, bool flip, float* out) {
  const int w = img.width, h = img.height, ch = img.channels;
  for (int c = 0; c < ch; ++c) {
    const float* t = table.channel[size_t(c)].data();
    for (int y = 0; y < h; ++y) {
      const uint8_t* row = img.row(y);
      float* dst = out + (size_t(c) * size_t(h) + size_t(y)) * size_t(w);
      if (flip)
        for (int x = 0; x < w; ++x) dst[x] = t[row[(w - 1 - x) * ch + c]];
      else
        for (int x = 0; x < w; ++x) dst[x] = t[row[x * ch + c]];
    }
  }
}

} // namespace hgp
