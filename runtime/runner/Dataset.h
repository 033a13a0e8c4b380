// Dataset.h - the training and evaluation data the runner reads.
//
// A data spec names a format and where the files are:
//   fashion-mnist:DIR, mnist:DIR   idx files (train-images-idx3-ubyte[.gz], t10k-...), gzipped or not
//   cifar10:DIR                    the binary batches (data_batch_1..5.bin, test_batch.bin)
//   cifar100:DIR                   train.bin and test.bin, with the 100 fine labels
//   imagefolder:DIR                DIR/<class>/<image>.jpg|png, torchvision's ImageFolder
//                                  (ImageDataset.h); the same spec serves --data and --eval
//   shards:PATTERN                 WebDataset tar shards, key.jpg|png + key.cls (TarShards.h)
//   npy:IMAGES.npy,LABELS.npy      float32 N x C x H x W and int64 (or int32) N
//   synthetic[:N]                  N deterministic random samples (default 64 batches)
// Every reader checks what it reads: sizes against headers, files against truncation, labels
// against the number of classes. Bad data is ErrorCode::BadData (exit code 5), reported before
// training starts.
#pragma once

#include "runtime/plan/Types.h"
#include "runtime/runner/ImageAugment.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hgp {

/// The samples of one epoch in the order a streamed source (tar shards) reads them: the source
/// reads their bytes front to back ahead of the loader (ShardStream.h), so each sample must be
/// asked for through Dataset::get or getPixels once, in this order.
class SampleStream {
public:
  virtual ~SampleStream() = default;
  /// Appends the next `n` samples' indices to `ids` (fewer at the epoch's end) and reads their
  /// data, so that the get calls that follow find it in memory.
  virtual Status next(int64_t n, std::vector<int64_t>& ids) = 0;
};

/// A training set held whole in memory as 8-bit pixels, for --data-on-device
/// (runtime/runner/DeviceData.h): D images of the model's H x W x C, channels last, their
/// labels, and the augmentation the device applies (RandomCrop's padding, -1 for none; the flip
/// probability).
struct ResidentData {
  std::vector<uint8_t> pixels;
  std::vector<int64_t> labels;
  int padding = -1;
  double flip = 0;
};

class Dataset {
public:
  virtual ~Dataset() = default;
  /// Number of samples.
  virtual int64_t size() const = 0;
  /// The shape of one sample, e.g. [1, 28, 28].
  virtual const Shape& sampleShape() const = 0;
  /// Writes sample `index`'s pixels (float32, sampleShape) and label, as augmented in `epoch`
  /// (data without augmentation ignores it). Called from several loader threads at once. Fails
  /// only for data decoded on the fly (a corrupt image under --bad-images fail).
  virtual Status get(int64_t index, int64_t epoch, float* image, int64_t* label) const = 0;
  /// The class names in label order, for data that has them (image folders, shards).
  virtual const std::vector<std::string>* classNames() const { return nullptr; }
  /// The sample order of `epoch`: by default epochOrder (BatchLoader.h) over all samples. Tar
  /// shards give their streamed order (stream), computed without reading.
  virtual std::vector<int64_t> order(bool shuffle, uint64_t seed, int64_t epoch) const;
  /// For data that must be read front to back (tar shards), the stream of `epoch` from sample
  /// `start` of its order on (a resumed run starts mid-epoch); null for data read by index,
  /// whose order is `order`.
  virtual std::unique_ptr<SampleStream> stream(bool shuffle, uint64_t seed, int64_t epoch,
                                               int64_t start) const {
    (void)shuffle, (void)seed, (void)epoch, (void)start;
    return nullptr;
  }
  /// True when this data set holds only this rank's part of the data (tar shards split by
  /// rank): the loader then reads all of it instead of every ranks-th batch.
  virtual bool shardedByRank() const { return false; }
  /// Decoding costs enough that the loader should spread a batch over --loader-threads.
  virtual bool decodes() const { return false; }
  /// True for image data opened for a --pixels u8 plan: the loader calls getPixels.
  virtual bool givesPixels() const { return false; }
  /// Sample `index` as 8-bit pixels, H x W x C (cropped and resized, not flipped or normalized:
  /// the plan's ImageInput node does that), its flip flag and its label.
  virtual Status getPixels(int64_t index, int64_t epoch, uint8_t* pixels, uint8_t* flip,
                           int64_t* label) const;
  /// The whole set for --data-on-device, or ErrorCode::DataNotOnDevice saying why it cannot be
  /// held there (not 8-bit data in memory, images to resize, a resampling crop).
  virtual Expected<ResidentData> resident() const;
  /// "fashion-mnist train (60000 samples)".
  virtual std::string describe() const = 0;
};

/// Which half of a data set: the training files or the test files.
enum class Split { Train, Test };

struct DatasetRequirements {
  Shape sampleShape;    ///< What the model's input wants (without the batch dim).
  int64_t classes = 0;  ///< Labels must lie in [0, classes).
  int64_t batch = 1;    ///< For sizing synthetic data.
  uint64_t seed = 0;    ///< For synthetic data.
  /// Per-channel standardization applied to every sample, (x - mean) / std, as torchvision's
  /// Normalize does; empty means none. One value applies to every channel.
  std::vector<float> mean, stddev;
  /// How image data (image folders, shards, and CIFAR or idx with --augment) is cropped,
  /// resized and flipped; training data gets the random pieces, evaluation data the fixed ones.
  AugmentPlan augment;
  /// --bad-images skip: a corrupt image is replaced by the next good one, and named once.
  bool skipBadImages = true;
  /// Evaluation data: the training data's class names, so that an evaluation folder's labels
  /// follow the training folder's indices (a folder missing a class would shift them).
  std::vector<std::string> trainClasses;
  /// Data parallelism: tar shards are split over the ranks, rank `rank` of `ranks` reading its own.
  int rank = 0, ranks = 1;
  /// The plan takes 8-bit pixels (hgpc compile --pixels u8): only image data (image folders,
  /// shards, or 8-bit idx and CIFAR) can feed it; sampleShape is still [C, H, W].
  bool u8Pixels = false;
  /// Tar shards: the shuffle buffer's size in samples (--shuffle-buffer, ShardStream.h).
  int64_t shuffleBuffer = 1000;
};

/// Opens and validates a data set. The error says which file and what is wrong.
Expected<std::unique_ptr<Dataset>> openDataset(const std::string& spec, Split split,
                                               const DatasetRequirements& req);

} // namespace hgp
