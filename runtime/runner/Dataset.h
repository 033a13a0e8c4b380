// Dataset.h - the training and evaluation data the runner reads.
//
// A data spec names a format and where the files are:
//   fashion-mnist:DIR, mnist:DIR   idx files (train-images-idx3-ubyte[.gz], t10k-...), gzipped or not
//   cifar10:DIR                    the binary batches (data_batch_1..5.bin, test_batch.bin)
//   npy:IMAGES.npy,LABELS.npy      float32 N x C x H x W and int64 (or int32) N
//   synthetic[:N]                  N deterministic random samples (default 64 batches)
// Every reader checks what it reads: sizes against headers, files against truncation, labels
// against the number of classes. Bad data is ErrorCode::BadData (exit code 5), reported before
// training starts.
#pragma once

#include "runtime/plan/Types.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hgp {

class Dataset {
public:
  virtual ~Dataset() = default;
  /// Number of samples.
  virtual int64_t size() const = 0;
  /// The shape of one sample, e.g. [1, 28, 28].
  virtual const Shape& sampleShape() const = 0;
  /// Writes sample `index`'s pixels (float32, sampleShape) and label.
  virtual void get(int64_t index, float* image, int64_t* label) const = 0;
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
};

/// Opens and validates a data set. The error says which file and what is wrong.
Expected<std::unique_ptr<Dataset>> openDataset(const std::string& spec, Split split,
                                               const DatasetRequirements& req);

} // namespace hgp
