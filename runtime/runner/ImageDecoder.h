// ImageDecoder.h - JPEG and PNG files in memory to 8-bit pixels with the model's channel count.
//
// JPEG goes through libjpeg-turbo's TurboJPEG API and PNG through libpng, both linked statically
// into the runner. The output is always interleaved 8-bit (HWC) with 1 or 3 channels, whatever
// the file holds: grayscale is replicated to RGB, RGB becomes luma for a one-channel model, CMYK
// JPEGs (Adobe's inverted form, the usual one) become RGB, palette and 16-bit PNGs become 8-bit,
// and alpha is dropped (as PIL's convert("RGB") does). Decoding matches PIL's: TurboJPEG's
// defaults (accurate integer DCT, fancy upsampling) are libjpeg's, which Pillow uses too.
//
// A JPEG can be decoded at a reduced DCT scale (1/2, 1/4, 1/8) when the crop that will be taken
// from it is much larger than the output, as FFCV and DALI do: the decode costs a fraction, and
// the later resize has fewer pixels to filter. probeImage reads only the header, so the caller
// can pick the scale after choosing the crop, and can refuse a decompression bomb (a 30,000 x
// 30,000 header in a 100-byte file) before anything is allocated.
#pragma once

#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hgp {

/// An 8-bit interleaved image: height x width x channels.
struct Image {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;
  uint8_t* row(int y) { return pixels.data() + size_t(y) * size_t(width) * size_t(channels); }
  const uint8_t* row(int y) const {
    return pixels.data() + size_t(y) * size_t(width) * size_t(channels);
  }
};

enum class ImageFormat { Unknown, Jpeg, Png };

/// What a file's header says.
struct ImageInfo {
  ImageFormat format = ImageFormat::Unknown;
  int width = 0, height = 0;
};

/// The largest image accepted, in pixels: PIL's decompression-bomb limit (2 x 89,478,485).
constexpr int64_t kMaxImagePixels = 178956970;

/// Reads the header of the JPEG or PNG file in `bytes` (by magic number, not by name). A file
/// that is neither, a zero-size image, or one over kMaxImagePixels is ErrorCode::BadData.
Expected<ImageInfo> probeImage(const uint8_t* bytes, size_t size);

/// Decodes `bytes` into `out` with `channels` (1 or 3) channels. `scaleDenom` (1, 2, 4 or 8)
/// asks for a JPEG decoded at 1/scaleDenom of its size (rounded up, as libjpeg rounds); PNGs
/// ignore it and come out at full size, so the caller reads out.width, not its own guess. A
/// corrupt or truncated file is ErrorCode::BadData, with libjpeg's or libpng's message.
Status decodeImage(const uint8_t* bytes, size_t size, int channels, int scaleDenom, Image& out);

/// The largest DCT scale denominator (1, 2, 4 or 8) at which a crop of `cropW` x `cropH` source
/// pixels still has at least `outW` x `outH` pixels, so that the resize after it only shrinks.
int chooseScaleDenom(double cropW, double cropH, int outW, int outH);

} // namespace hgp
