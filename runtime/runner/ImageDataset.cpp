#include "runtime/runner/ImageDataset.h"

#include "runtime/runner/ImageTransform.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>

namespace hgp {

namespace {

/// Bad samples met so far, named once each on stderr (the first 20; then a count).
class BadImageLog {
public:
  bool known(int64_t i) const {
    std::lock_guard<std::mutex> lock(mu_);
    return bad_.count(i) != 0;
  }
  void add(int64_t i, const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!bad_.insert(i).second) return;
    if (bad_.size() <= 20)
      std::fprintf(stderr, "warning: skipping bad image %s (--bad-images skip)\n", what.c_str());
    else if (bad_.size() % 1000 == 0)
      std::fprintf(stderr, "warning: %zu bad images skipped so far\n", bad_.size());
  }
  size_t count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bad_.size();
  }

private:
  mutable std::mutex mu_;
  std::set<int64_t> bad_;
};

class ImageDataset final : public Dataset {
public:
  ImageDataset(std::unique_ptr<ImageSource> source, const ImageDatasetOptions& o)
      : src_(std::move(source)), opt_(o), table_(int(o.sampleShape[0]), o.mean, o.stddev) {}
  ~ImageDataset() override {
    if (size_t n = bad_.count())
      std::fprintf(stderr, "note: %zu bad images were skipped in %s\n", n, src_->describe().c_str());
  }

  int64_t size() const override { return src_->size(); }
  const Shape& sampleShape() const override { return opt_.sampleShape; }
  std::string describe() const override {
    return src_->describe() + ", " + (opt_.train ? opt_.augment.describe() : evalDescription());
  }
  const std::vector<std::string>* classNames() const override {
    return src_->classes().empty() ? nullptr : &src_->classes();
  }
  bool shardedByRank() const override { return src_->shardedByRank(); }
  bool decodes() const override { return true; }
  bool givesPixels() const override { return opt_.pixels; }

  /// A streamed source's order (tar shards through their shuffle buffer), else the default.
  std::vector<int64_t> order(bool shuffle, uint64_t seed, int64_t epoch) const override {
    std::vector<int64_t> out = src_->order(shuffle, seed, epoch);
    return out.empty() ? Dataset::order(shuffle, seed, epoch) : out;
  }
  std::unique_ptr<SampleStream> stream(bool shuffle, uint64_t seed, int64_t epoch,
                                       int64_t start) const override {
    return src_->stream(shuffle, seed, epoch, start);
  }

  Expected<ResidentData> resident() const override {
    auto refuse = [&](const std::string& why) {
      return Status(ErrorCode::DataNotOnDevice, "--data-on-device: " + src_->describe() + " " + why);
    };
    ResidentData r;
    Shape img;
    if (!opt_.pixels) return refuse("feeds float samples; the executable must take 8-bit pixels (hgpc compile --pixels u8)");
    if (!src_->residentPixels(r.pixels, r.labels, img))
      return refuse("is decoded from files; only 8-bit data in memory (idx, CIFAR) can be held on the GPU");
    const Shape& s = opt_.sampleShape;
    if (img != Shape{s[1], s[2], s[0]})
      return refuse("has images of " + shapeToString(img) + " (H x W x C) and the model takes " +
                    shapeToString({s[1], s[2], s[0]}) + "; the device does not resize");
    using Crop = AugmentPlan::TrainCrop;
    const AugmentPlan& a = opt_.augment;
    if (opt_.train && a.trainCrop == Crop::RandomResized)
      return refuse("is augmented with RandomResizedCrop, which resamples on the host; use "
                    "--augment cifar or none");
    r.padding = opt_.train && a.trainCrop == Crop::RandomPadded ? a.padding : -1;
    r.flip = opt_.train ? a.flip : 0;
    return r;
  }

  Status get(int64_t index, int64_t epoch, float* image, int64_t* label) const override {
    return sample(index, epoch, image, nullptr, nullptr, label);
  }
  Status getPixels(int64_t index, int64_t epoch, uint8_t* pixels, uint8_t* flip,
                   int64_t* label) const override {
    return sample(index, epoch, nullptr, pixels, flip, label);
  }

private:
  /// One sample, as floats (`image`) or as pixels and a flip flag.
  Status sample(int64_t index, int64_t epoch, float* image, uint8_t* pixels, uint8_t* flip,
                int64_t* label) const {
    // A bad sample is replaced by the next good one; give up after a run of 1000 bad ones.
    for (int64_t tries = 0; tries < std::min<int64_t>(1000, size()); ++tries) {
      int64_t i = (index + tries) % size();
      if (bad_.known(i)) continue;
      Status st = load(i, epoch, image, pixels, flip);
      if (st) {
        *label = src_->label(i);
        return Status::ok();
      }
      std::string what = "'" + src_->name(i) + "': " + st.message();
      if (!opt_.skipBad)
        return Status(st.code(), "image " + what + " (--bad-images skip would skip it)");
      bad_.add(i, what);
    }
    return Status(ErrorCode::BadData, "more than 1000 bad images in a row in " + src_->describe());
  }

  std::string evalDescription() const {
    return "Resize(" + std::to_string(opt_.augment.evalResize) + ") + CenterCrop";
  }

  Status load(int64_t i, int64_t epoch, float* out, uint8_t* pixels, uint8_t* flipOut) const {
    thread_local std::vector<uint8_t> bytes;
    thread_local Image raw, decoded, resized, cropped;
    const int outH = int(opt_.sampleShape[1]), outW = int(opt_.sampleShape[2]);
    const int channels = int(opt_.sampleShape[0]);
    bytes.clear();
    raw.pixels.clear();
    HGP_TRY(src_->read(i, bytes, raw));
    int width = raw.width, height = raw.height;
    const bool encoded = raw.pixels.empty();
    if (encoded) {
      HGP_ASSIGN_OR_RETURN(ImageInfo info, probeImage(bytes.data(), bytes.size()));
      width = info.width, height = info.height;
    } else if (raw.channels != channels) {
      return Status(ErrorCode::BadData, "the images have " + std::to_string(raw.channels) +
                                            " channels, the model wants " + std::to_string(channels));
    }
    SampleRng gen(opt_.seed, epoch, i);
    Uniform rng = [&gen] { return gen.uniform(); };
    using Crop = AugmentPlan::TrainCrop;
    const AugmentPlan& a = opt_.augment;
    Crop crop = opt_.train ? a.trainCrop : Crop::CenterResize;
    Box box;
    int denom = 1;
    if (crop == Crop::RandomResized) {
      box = randomResizedCropBox(width, height, a.scaleLo, a.scaleHi, a.ratioLo, a.ratioHi, rng);
      if (a.dctScale) denom = chooseScaleDenom(box.width(), box.height(), outW, outH);
    } else {
      int resize = crop == Crop::RandomPadded || opt_.train ? std::min(outW, outH) : a.evalResize;
      box = resizeCenterCropBox(width, height, resize, outW, outH);
    }
    const Image* img = &raw;
    if (encoded) {
      HGP_TRY(decodeImage(bytes.data(), bytes.size(), channels, denom, decoded));
      img = &decoded;
    }
    // A reduced-scale decode moves the box; the clip is the crop's pixels, rounded outward.
    double fx = double(img->width) / width, fy = double(img->height) / height;
    Box scaled{box.x0 * fx, box.y0 * fy, box.x1 * fx, box.y1 * fy};
    std::array<int, 4> clip{0, 0, img->width, img->height};
    if (crop == Crop::RandomResized)
      clip = {int(scaled.x0), int(scaled.y0), std::min(img->width, int(std::ceil(scaled.x1))),
              std::min(img->height, int(std::ceil(scaled.y1)))};
    resample(*img, clip, scaled, outW, outH, resized);
    const Image* done = &resized;
    if (crop == Crop::RandomPadded) {
      randomCropPadded(resized, outW, outH, a.padding, rng, cropped);
      done = &cropped;
    }
    bool flip = opt_.train && a.flip > 0 && rng() < a.flip;
    if (pixels) {
      std::memcpy(pixels, done->pixels.data(), done->pixels.size());
      *flipOut = flip ? 1 : 0;
    } else {
      writeNormalized(*done, table_, flip, out);
    }
    return Status::ok();
  }

  std::unique_ptr<ImageSource> src_;
  ImageDatasetOptions opt_;
  NormalizeTable table_;
  mutable BadImageLog bad_;
};

/// CHW bytes in memory, handed out as HWC images.
class MemoryImageSource final : public ImageSource {
public:
  MemoryImageSource(std::string what, Shape shape, std::vector<uint8_t> pixels,
                    std::vector<int64_t> labels)
      : what_(std::move(what)), shape_(std::move(shape)), pixels_(std::move(pixels)),
        labels_(std::move(labels)) {}
  int64_t size() const override { return int64_t(labels_.size()); }
  int64_t label(int64_t i) const override { return labels_[size_t(i)]; }
  std::string name(int64_t i) const override { return what_ + " sample " + std::to_string(i); }
  std::string describe() const override { return what_; }
  bool residentPixels(std::vector<uint8_t>& hwc, std::vector<int64_t>& labels,
                      Shape& imageShape) const override {
    const int64_t c = shape_[0], hw = shape_[1] * shape_[2], per = c * hw;
    hwc.resize(pixels_.size());
    for (size_t i = 0; i < labels_.size(); ++i)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t p = 0; p < hw; ++p)
          hwc[i * size_t(per) + size_t(p * c + ch)] = pixels_[i * size_t(per) + size_t(ch * hw + p)];
    labels = labels_;
    imageShape = {shape_[1], shape_[2], c};
    return true;
  }
  Status read(int64_t i, std::vector<uint8_t>&, Image& raw) const override {
    const int c = int(shape_[0]), h = int(shape_[1]), w = int(shape_[2]);
    const uint8_t* src = pixels_.data() + size_t(i) * size_t(c * h * w);
    raw.width = w, raw.height = h, raw.channels = c;
    raw.pixels.resize(size_t(c * h * w));
    for (int ch = 0; ch < c; ++ch)
      for (int p = 0; p < h * w; ++p) raw.pixels[size_t(p * c + ch)] = src[size_t(ch * h * w + p)];
    return Status::ok();
  }

private:
  std::string what_;
  Shape shape_;
  std::vector<uint8_t> pixels_;
  std::vector<int64_t> labels_;
};

} // namespace

std::unique_ptr<Dataset> makeImageDataset(std::unique_ptr<ImageSource> source,
                                          const ImageDatasetOptions& options) {
  return std::make_unique<ImageDataset>(std::move(source), options);
}

std::unique_ptr<ImageSource> memoryImageSource(std::string what, Shape shape,
                                               std::vector<uint8_t> pixels,
                                               std::vector<int64_t> labels) {
  return std::make_unique<MemoryImageSource>(std::move(what), std::move(shape), std::move(pixels),
                                             std::move(labels));
}

} // namespace hgp
