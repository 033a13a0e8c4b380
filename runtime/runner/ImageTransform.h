// ImageTransform.h - torchvision's image augmentations, on 8-bit pixels at decode time.
//
// The runner crops and resizes on the CPU, before anything crosses to the device, so that the
// fewest bytes move. Each piece has torchvision's semantics and parameters:
//   RandomResizedCrop(size, scale, ratio)  randomResizedCropBox, then resample
//   RandomCrop(size, padding)              zero padding, then a random size x size window
//   RandomHorizontalFlip(p)                applied when the pixels are written out
//   Resize(r) + CenterCrop(size)           resizeCenterCropBox (evaluation)
//   ToTensor + Normalize(mean, std)        writeNormalized: x / 255, then (x - mean) / std
// Resampling is PIL's bilinear filter (torchvision's default for PIL images), which
// antialiases: its triangle widens by the shrink factor. resample reproduces PIL's fixed-point
// arithmetic (22-bit coefficients, a horizontal pass to 8 bits, then a vertical one), so the
// pixels equal PIL's, not tensor-mode torchvision's, whose antialiasing differs.
//
// Random choices come from SampleRng, a counter-based generator keyed by the seed, the epoch
// and the sample index: the same sample in the same epoch gets the same crop and flip in any
// thread, in any order, and after a resume.
#pragma once

#include "runtime/runner/ImageDecoder.h"
#include "runtime/support/SampleDraws.h"

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

namespace hgp {

/// Uniform doubles in [0, 1) from SplitMix64, seeded by (seed, epoch, index): SampleDraws
/// (runtime/support/SampleDraws.h), which the DeviceBatch op draws on the GPU too.
class SampleRng {
public:
  SampleRng(uint64_t seed, int64_t epoch, int64_t index);
  double uniform();

private:
  SampleDraws draws_;
};

/// Where the transforms draw their random numbers: uniform doubles in [0, 1). torchvision's
/// torch.empty(1).uniform_(a, b) is a + u * (b - a) and torch.randint(lo, hi) is
/// lo + floor(u * (hi - lo)); the tests replay the same draws through both.
using Uniform = std::function<double()>;

/// A rectangle of source pixels, [x0, x1) x [y0, y1); fractional where a resize put it.
struct Box {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  double width() const { return x1 - x0; }
  double height() const { return y1 - y0; }
};

/// torchvision's RandomResizedCrop.get_params: up to ten tries at an area fraction drawn from
/// [scaleLo, scaleHi] and a log-uniform aspect ratio in [ratioLo, ratioHi], then a central crop
/// of the nearest allowed ratio. Returns an integer box of the width x height image.
Box randomResizedCropBox(int width, int height, double scaleLo, double scaleHi, double ratioLo,
                         double ratioHi, const Uniform& rng);

/// Resize(resize) then CenterCrop(cropH, cropW), as the box of source pixels the crop covers:
/// the shorter side goes to `resize` (the longer to int(resize * long / short)), and the crop
/// is centred with torchvision's rounding.
Box resizeCenterCropBox(int width, int height, int resize, int cropW, int cropH);

/// PIL's bilinear resize of the pixels under `box` to outW x outH. Source pixels outside
/// `clip` (integer bounds, e.g. a crop taken before the resize) are never read; `box` lies
/// within `clip`. Writes `out` with in.channels channels.
void resample(const Image& in, const std::array<int, 4>& clip, const Box& box, int outW, int outH,
              Image& out);

/// torchvision's RandomCrop((outH, outW), padding): pads `in` with `padding` zero pixels on
/// every side and takes the outW x outH window at a random offset. `in` must be at least
/// (out - 2 * padding) on each side.
void randomCropPadded(const Image& in, int outW, int outH, int padding, const Uniform& rng,
                      Image& out);

/// Per-channel lookup tables for ToTensor + Normalize: table[c][v] = (v / 255 - mean) / std.
struct NormalizeTable {
  std::vector<std::array<float, 256>> channel;
  /// `mean` and `stddev` hold one value, or one per channel; empty means no normalization.
  NormalizeTable(int channels, const std::vector<float>& mean, const std::vector<float>& stddev);
};

/// Writes `img` (HWC) as float CHW through `table`, mirrored left to right when `flip`.
void writeNormalized(const Image& img, const NormalizeTable& table, bool flip, float* out);

} // namespace hgp
