#include "runtime/runner/ImageDecoder.h"

#include <png.h>
#include <turbojpeg.h>

#include <csetjmp>
#include <cstring>
#include <memory>

namespace hgp {

namespace {

Status bad(const std::string& m) { return Status(ErrorCode::BadData, m); }

bool isJpeg(const uint8_t* b, size_t n) { return n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF; }
bool isPng(const uint8_t* b, size_t n) { return n >= 8 && png_sig_cmp(b, 0, 8) == 0; }

/// One TurboJPEG decompressor per thread: handles are not thread-safe, and cheap to keep. A
/// handle that has failed on a corrupt file is replaced: TurboJPEG 2.1 leaves it unusable.
struct JpegHandle {
  tjhandle h = tjInitDecompress();
  ~JpegHandle() {
    if (h) tjDestroy(h);
  }
};
thread_local JpegHandle tlsJpeg;

tjhandle jpegHandle() { return tlsJpeg.h; }

/// The error message of the thread's handle, which is then replaced by a fresh one.
std::string jpegFailure() {
  std::string why = tjGetErrorStr2(tlsJpeg.h);
  tjDestroy(tlsJpeg.h);
  tlsJpeg.h = tjInitDecompress();
  return why;
}

Status checkSize(int w, int h) {
  if (w <= 0 || h <= 0) return bad("zero-size image (" + std::to_string(w) + "x" + std::to_string(h) + ")");
  if (int64_t(w) * int64_t(h) > kMaxImagePixels)
    return bad(std::to_string(w) + "x" + std::to_string(h) + " pixels is over the limit of " +
               std::to_string(kMaxImagePixels) + " (a decompression bomb?)");
  return Status::ok();
}

/// PIL's RGB to L: ITU-R 601-2 luma in 16-bit fixed point.
inline uint8_t pilLuma(const uint8_t* rgb) {
  return uint8_t((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
}

/// PIL's CMYK to RGB, applied to the inverted (Adobe) values libjpeg returns.
uint8_t cmykChannel(uint8_t inverted, uint8_t invertedK) {
  int c = 255 - inverted, nk = invertedK, t = c * nk + 128;
  int v = nk - (((t >> 8) + t) >> 8);
  return uint8_t(v < 0 ? 0 : v);
}

Status decodeJpeg(const uint8_t* bytes, size_t size, int channels, int denom, Image& out) {
  tjhandle h = jpegHandle();
  if (!h) return Status(ErrorCode::Internal, "TurboJPEG could not start a decompressor");
  int w = 0, ht = 0, sub = 0, cs = 0;
  if (tjDecompressHeader3(h, bytes, (unsigned long)size, &w, &ht, &sub, &cs) != 0)
    return bad("not a readable JPEG: " + jpegFailure());
  HGP_TRY(checkSize(w, ht));
  tjscalingfactor f{1, denom};
  int sw = TJSCALED(w, f), sh = TJSCALED(ht, f);
  bool cmyk = cs == TJCS_CMYK || cs == TJCS_YCCK;
  // A colour JPEG for a one-channel model decodes to RGB and converts as PIL's convert("L")
  // does, rather than keeping libjpeg's Y, so that the pixels equal torchvision's.
  bool toGray = channels == 1 && cs != TJCS_GRAY;
  int pf = cmyk ? TJPF_CMYK : channels == 1 && !toGray ? TJPF_GRAY : TJPF_RGB;
  int stored = cmyk ? 4 : toGray ? 3 : channels;
  std::vector<uint8_t> buf(size_t(sw) * size_t(sh) * size_t(stored));
  if (tjDecompress2(h, bytes, (unsigned long)size, buf.data(), sw, 0, sh, pf, 0) != 0) {
    bool fatal = tjGetErrorCode(h) == TJERR_FATAL;
    std::string why = jpegFailure();
    // libjpeg's warnings (extraneous bytes, a bad restart marker) leave a usable image, as they
    // do in PIL; a file that ends early does not.
    if (fatal || why.find("Premature end") != std::string::npos)
      return bad("corrupt or truncated JPEG: " + why);
  }
  out.width = sw;
  out.height = sh;
  out.channels = channels;
  if (!cmyk && !toGray) {
    out.pixels = std::move(buf);
    return Status::ok();
  }
  out.pixels.resize(size_t(sw) * size_t(sh) * size_t(channels));
  for (size_t p = 0, n = size_t(sw) * size_t(sh); p < n; ++p) {
    const uint8_t* s = buf.data() + size_t(stored) * p;
    uint8_t r = s[0], g = s[1], b = s[2];
    if (cmyk) r = cmykChannel(s[0], s[3]), g = cmykChannel(s[1], s[3]), b = cmykChannel(s[2], s[3]);
    if (channels == 3) {
      out.pixels[3 * p] = r, out.pixels[3 * p + 1] = g, out.pixels[3 * p + 2] = b;
    } else {
      uint8_t rgb[3] = {r, g, b};
      out.pixels[p] = pilLuma(rgb);
    }
  }
  return Status::ok();
}

/// libpng reports errors through longjmp; the message is kept here.
struct PngReader {
  const uint8_t* data;
  size_t size, pos = 0;
  char error[256] = "";
};

void pngRead(png_structp png, png_bytep dst, png_size_t n) {
  auto* r = static_cast<PngReader*>(png_get_io_ptr(png));
  if (r->size - r->pos < n) png_error(png, "the file ends early (truncated)");
  std::memcpy(dst, r->data + r->pos, n);
  r->pos += n;
}

void pngError(png_structp png, png_const_charp msg) {
  auto* r = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(r->error, sizeof r->error, "%s", msg);
  png_longjmp(png, 1);
}

void pngWarning(png_structp, png_const_charp) {}

/// The libpng part, in C style: nothing with a destructor lives across the setjmp.
/// Colour decodes to RGB even for channels == 1 (*decoded says which), as decodeImage
/// converts it the way PIL does.
bool pngDecode(PngReader& r, int channels, bool probeOnly, int* w, int* h, int* decoded,
               std::vector<uint8_t>* pixels) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, pngError, pngWarning);
  if (!png) return std::snprintf(r.error, sizeof r.error, "libpng could not start"), false;
  png_infop info = png_create_info_struct(png);
  png_bytep* rows = nullptr;
  if (!info || setjmp(png_jmpbuf(png))) {
    delete[] rows;
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, &r, pngRead);
  png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
  png_read_info(png, info);
  *w = int(png_get_image_width(png, info));
  *h = int(png_get_image_height(png, info));
  if (probeOnly || int64_t(*w) * int64_t(*h) > kMaxImagePixels || *w <= 0 || *h <= 0) {
    png_destroy_read_struct(&png, &info, nullptr);
    return true;
  }
  int type = png_get_color_type(png, info);
  png_set_scale_16(png);
  png_set_packing(png);
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (type == PNG_COLOR_TYPE_GRAY) png_set_expand_gray_1_2_4_to_8(png);
  png_set_strip_alpha(png);
  bool color = type == PNG_COLOR_TYPE_PALETTE || (type & PNG_COLOR_MASK_COLOR);
  if (channels == 3 && !color) png_set_gray_to_rgb(png);
  *decoded = color ? 3 : channels;
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (int(png_get_rowbytes(png, info)) != *w * *decoded)
    png_error(png, "unexpected row size after conversion");
  pixels->resize(size_t(*w) * size_t(*h) * size_t(*decoded));
  rows = new png_bytep[size_t(*h)];
  for (int y = 0; y < *h; ++y) rows[y] = pixels->data() + size_t(y) * size_t(*w) * size_t(*decoded);
  png_read_image(png, rows);
  png_read_end(png, nullptr);
  delete[] rows;
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

/// The size from IHDR (always the first chunk), so that a bomb is refused by its header.
Status checkPngHeader(const uint8_t* bytes, size_t size) {
  if (size < 24 || std::memcmp(bytes + 12, "IHDR", 4) != 0) return Status::ok(); // libpng says why
  auto be = [&](size_t o) {
    return int64_t(bytes[o]) << 24 | int64_t(bytes[o + 1]) << 16 | int64_t(bytes[o + 2]) << 8 | bytes[o + 3];
  };
  if (be(16) > 0x7fffffff || be(20) > 0x7fffffff) return bad("PNG dimensions out of range");
  return checkSize(int(be(16)), int(be(20)));
}

} // namespace

Expected<ImageInfo> probeImage(const uint8_t* bytes, size_t size) {
  ImageInfo info;
  if (size == 0) return bad("empty file");
  if (isJpeg(bytes, size)) {
    int sub = 0, cs = 0;
    tjhandle h = jpegHandle();
    if (!h) return Status(ErrorCode::Internal, "TurboJPEG could not start a decompressor");
    if (tjDecompressHeader3(h, bytes, (unsigned long)size, &info.width, &info.height, &sub, &cs) != 0)
      return bad("not a readable JPEG: " + jpegFailure());
    info.format = ImageFormat::Jpeg;
  } else if (isPng(bytes, size)) {
    HGP_TRY(checkPngHeader(bytes, size));
    PngReader r{bytes, size};
    int decoded = 0;
    if (!pngDecode(r, 3, /*probeOnly=*/true, &info.width, &info.height, &decoded, nullptr))
      return bad(std::string("not a readable PNG: ") + r.error);
    info.format = ImageFormat::Png;
  } else {
    return bad("not a JPEG or PNG file");
  }
  HGP_TRY(checkSize(info.width, info.height));
  return info;
}

Status decodeImage(const uint8_t* bytes, size_t size, int channels, int scaleDenom, Image& out) {
  if (channels != 1 && channels != 3)
    return Status(ErrorCode::Usage, "images decode to 1 or 3 channels, the model wants " +
                                        std::to_string(channels));
  if (isJpeg(bytes, size)) return decodeJpeg(bytes, size, channels, scaleDenom, out);
  if (!isPng(bytes, size)) return bad(size == 0 ? "empty file" : "not a JPEG or PNG file");
  HGP_TRY(checkPngHeader(bytes, size));
  PngReader r{bytes, size};
  int w = 0, h = 0, decoded = 0;
  if (!pngDecode(r, channels, /*probeOnly=*/false, &w, &h, &decoded, &out.pixels))
    return bad(std::string("corrupt or truncated PNG: ") + r.error);
  HGP_TRY(checkSize(w, h));
  if (decoded == 3 && channels == 1) {
    for (size_t p = 0, n = size_t(w) * size_t(h); p < n; ++p) out.pixels[p] = pilLuma(out.pixels.data() + 3 * p);
    out.pixels.resize(size_t(w) * size_t(h));
  }
  out.width = w;
  out.height = h;
  out.channels = channels;
  return Status::ok();
}

int chooseScaleDenom(double cropW, double cropH, int outW, int outH) {
  int denom = 1;
  while (denom < 8 && cropW / (2 * denom) >= outW && cropH / (2 * denom) >= outH) denom *= 2;
  return denom;
}

} // namespace hgp
