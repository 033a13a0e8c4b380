// ImageDataset.h - data sets of images decoded and augmented on the fly.
//
// An ImageSource says where the images are and what their labels are: an image folder
// (ImageFolder.cpp), tar shards (TarShards.cpp), or pixels already in memory (CIFAR, idx) when
// they are augmented. The image data set on top decodes a sample when the loader asks for it
// (on the loader's threads, --loader-threads), crops and resizes it as the AugmentPlan says,
// flips it, and writes it normalized. A sample whose file is corrupt is, under --bad-images
// skip, replaced by the next good sample and named once on stderr; under --bad-images fail, the
// run stops with ErrorCode::BadData (exit code 5) naming the file.
#pragma once

#include "runtime/runner/Dataset.h"
#include "runtime/runner/ImageAugment.h"
#include "runtime/runner/ImageDecoder.h"

#include <memory>
#include <string>
#include <vector>

namespace hgp {

class ImageSource {
public:
  virtual ~ImageSource() = default;
  virtual int64_t size() const = 0;
  virtual int64_t label(int64_t index) const = 0;
  /// The file (or shard member) sample `index` comes from, for messages.
  virtual std::string name(int64_t index) const = 0;
  /// Reads sample `index`: its encoded file into `bytes`, or, for a source of raw pixels, the
  /// image into `raw` (and `bytes` left empty). Safe to call from several threads.
  virtual Status read(int64_t index, std::vector<uint8_t>& bytes, Image& raw) const = 0;
  /// A source of raw pixels in memory: every image, H x W x C and channels last, and the
  /// labels, for --data-on-device; false for sources that decode files.
  virtual bool residentPixels(std::vector<uint8_t>& hwc, std::vector<int64_t>& labels,
                              Shape& imageShape) const {
    (void)hwc, (void)labels, (void)imageShape;
    return false;
  }
  /// "image folder ./train (1000 images, 10 classes)".
  virtual std::string describe() const = 0;
  /// Class names in label order; empty for sources without names.
  const std::vector<std::string>& classes() const { return classes_; }
  /// True for a source that holds only this rank's part of the data (Dataset::shardedByRank).
  virtual bool shardedByRank() const { return false; }
  /// For a source read front to back (tar shards): the epoch's stream from position `start`
  /// (Dataset::stream), and the same order computed without reading; null and empty otherwise.
  virtual std::unique_ptr<SampleStream> stream(bool shuffle, uint64_t seed, int64_t epoch,
                                               int64_t start) const {
    (void)shuffle, (void)seed, (void)epoch, (void)start;
    return nullptr;
  }
  virtual std::vector<int64_t> order(bool shuffle, uint64_t seed, int64_t epoch) const {
    (void)shuffle, (void)seed, (void)epoch;
    return {};
  }

protected:
  std::vector<std::string> classes_;
};

struct ImageDatasetOptions {
  Shape sampleShape;              ///< [C, H, W] of the model's input; C is 1 or 3.
  AugmentPlan augment;
  bool train = true;              ///< Random crops and flips (training) or the fixed ones.
  uint64_t seed = 0;              ///< With the epoch and the index, keys every random choice.
  std::vector<float> mean, stddev; ///< Normalize; empty for none.
  bool skipBad = true;
  bool pixels = false;            ///< Samples go out as 8-bit pixels (Dataset::getPixels).
};

/// The data set over `source`. The sample shape is the model's, whatever the images' sizes.
std::unique_ptr<Dataset> makeImageDataset(std::unique_ptr<ImageSource> source,
                                          const ImageDatasetOptions& options);

/// torchvision's ImageFolder over DIR: classes are DIR's subfolders sorted by name, samples
/// their .jpg/.jpeg/.png files (any case, in subfolders too) in sorted path order, so that
/// indices equal torchvision's. With `trainClasses`, labels follow that list instead (an
/// evaluation folder), and a class it does not know is an error. No classes, no images, or one
/// class only is ErrorCode::BadData; an empty class folder is one unless `skipBad`, where it is
/// a warning.
Expected<std::unique_ptr<ImageSource>> openImageFolder(const std::string& dir,
                                                       const std::vector<std::string>& trainClasses,
                                                       bool skipBad);

/// WebDataset tar shards: PATTERN is a file, a glob (train-*.tar) or a brace range
/// (train-{000..099}.tar). Each sample is the members sharing a key: key.jpg, key.jpeg or
/// key.png, and key.cls (the class index as text). With ranks > 1, rank r takes shards r,
/// r + ranks, ... (sorted by name), so ranks read disjoint files. A shard's headers are indexed
/// once at open (an offset, a size and a label per sample; no names, no pixels); an epoch then
/// streams the shards front to back through a shuffle buffer of `shuffleBuffer` samples
/// (ShardStream.h). `trainClasses` is unused: shards carry indices, not names.
Expected<std::unique_ptr<ImageSource>> openTarShards(const std::string& pattern, int rank, int ranks,
                                                     const std::vector<std::string>& trainClasses,
                                                     int64_t shuffleBuffer = 1000);

/// A source over 8-bit images already in memory: `pixels` holds `count` CHW images of `shape`.
std::unique_ptr<ImageSource> memoryImageSource(std::string what, Shape shape,
                                               std::vector<uint8_t> pixels,
                                               std::vector<int64_t> labels);

} // namespace hgp
