#include "runtime/runner/Dataset.h"

#include "runtime/runner/BatchLoader.h"
#include "runtime/runner/ImageDataset.h"

#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace hgp {

namespace {

Status badData(const std::string& m) { return Status(ErrorCode::BadData, m); }

/// Reads a whole file, inflating it when it is gzip-compressed (by magic, not by name).
Expected<std::vector<uint8_t>> readMaybeGzip(const std::string& path) {
  std::ifstream probe(path, std::ios::binary);
  if (!probe) return badData("cannot open '" + path + "'");
  unsigned char magic[2] = {0, 0};
  probe.read(reinterpret_cast<char*>(magic), 2);
  probe.close();
  std::vector<uint8_t> out;
  if (magic[0] == 0x1f && magic[1] == 0x8b) {
    gzFile gz = gzopen(path.c_str(), "rb");
    if (!gz) return badData("cannot open '" + path + "'");
    uint8_t buf[1 << 16];
    for (;;) {
      int n = gzread(gz, buf, sizeof buf);
      if (n < 0) {
        int err = 0;
        std::string why = gzerror(gz, &err);
        gzclose(gz);
        return badData("'" + path + "' is not valid gzip data: " + why);
      }
      if (n == 0) break;
      out.insert(out.end(), buf, buf + n);
    }
    gzclose(gz);
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return out;
}

uint32_t bigEndian32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

/// The first of `names` that exists in `dir`.
Expected<std::string> findFile(const std::string& dir, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    auto p = std::filesystem::path(dir) / n;
    if (std::filesystem::exists(p)) return p.string();
  }
  return badData("no " + std::string(*names.begin()) + " (or .gz) in '" + dir + "'");
}

Status checkLabels(const std::vector<int64_t>& labels, int64_t classes, const std::string& what) {
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] < 0 || (classes > 0 && labels[i] >= classes))
      return badData(what + ": label " + std::to_string(labels[i]) + " of sample " +
                     std::to_string(i) + " is outside [0, " + std::to_string(classes) +
                     ") (the model has " + std::to_string(classes) + " classes)");
  return Status::ok();
}

/// Images in memory as bytes (scaled to [0, 1]) or floats, with int64 labels.
class MemoryDataset final : public Dataset {
public:
  MemoryDataset(std::string what, Shape shape, std::vector<uint8_t> bytes,
                std::vector<float> floats, std::vector<int64_t> labels)
      : what_(std::move(what)), shape_(std::move(shape)), bytes_(std::move(bytes)),
        floats_(std::move(floats)), labels_(std::move(labels)) {}
  int64_t size() const override { return int64_t(labels_.size()); }
  const Shape& sampleShape() const override { return shape_; }
  Status get(int64_t i, int64_t, float* image, int64_t* label) const override {
    int64_t n = numElements(shape_);
    if (!floats_.empty()) std::memcpy(image, floats_.data() + i * n, size_t(n) * sizeof(float));
    else
      for (int64_t k = 0; k < n; ++k) image[k] = float(bytes_[size_t(i * n + k)]) / 255.0f;
    *label = labels_[size_t(i)];
    return Status::ok();
  }
  /// 8-bit data (idx, CIFAR) as an image source, for augmentation; null for float data.
  std::unique_ptr<ImageSource> takeImages() {
    if (bytes_.empty()) return nullptr;
    return memoryImageSource(what_, shape_, std::move(bytes_), std::move(labels_));
  }
  std::string describe() const override {
    return what_ + " (" + std::to_string(size()) + " samples of " + shapeToString(shape_) + ")";
  }

private:
  std::string what_;
  Shape shape_;
  std::vector<uint8_t> bytes_;
  std::vector<float> floats_;
  std::vector<int64_t> labels_;
};

Expected<std::unique_ptr<Dataset>> openIdx(const std::string& kind, const std::string& dir,
                                           Split split, const DatasetRequirements& req) {
  const bool train = split == Split::Train;
  HGP_ASSIGN_OR_RETURN(std::string imgPath,
                       train ? findFile(dir, {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz"})
                             : findFile(dir, {"t10k-images-idx3-ubyte", "t10k-images-idx3-ubyte.gz"}));
  HGP_ASSIGN_OR_RETURN(std::string lblPath,
                       train ? findFile(dir, {"train-labels-idx1-ubyte", "train-labels-idx1-ubyte.gz"})
                             : findFile(dir, {"t10k-labels-idx1-ubyte", "t10k-labels-idx1-ubyte.gz"}));
  HGP_ASSIGN_OR_RETURN(auto img, readMaybeGzip(imgPath));
  HGP_ASSIGN_OR_RETURN(auto lbl, readMaybeGzip(lblPath));
  if (img.size() < 16 || bigEndian32(img.data()) != 0x803)
    return badData("'" + imgPath + "' is not an idx3 image file");
  if (lbl.size() < 8 || bigEndian32(lbl.data()) != 0x801)
    return badData("'" + lblPath + "' is not an idx1 label file");
  uint64_t n = bigEndian32(img.data() + 4), h = bigEndian32(img.data() + 8),
           w = bigEndian32(img.data() + 12);
  if (img.size() - 16 != n * h * w)
    return badData("'" + imgPath + "' is truncated: its header promises " + std::to_string(n) +
                   " images of " + std::to_string(h) + "x" + std::to_string(w) + " (" +
                   std::to_string(n * h * w) + " bytes), the file holds " +
                   std::to_string(img.size() - 16));
  if (bigEndian32(lbl.data() + 4) != n || lbl.size() - 8 != n)
    return badData("'" + lblPath + "' holds " + std::to_string(lbl.size() - 8) + " labels for " +
                   std::to_string(n) + " images");
  std::vector<int64_t> labels(lbl.begin() + 8, lbl.end());
  HGP_TRY(checkLabels(labels, req.classes, lblPath));
  img.erase(img.begin(), img.begin() + 16);
  return std::unique_ptr<Dataset>(new MemoryDataset(
      kind + (train ? " train" : " test"), Shape{1, int64_t(h), int64_t(w)}, std::move(img), {},
      std::move(labels)));
}

/// CIFAR-10's batches (a label byte per record) or CIFAR-100's train.bin/test.bin (a coarse
/// and a fine label byte per record; the fine label is the class).
Expected<std::unique_ptr<Dataset>> openCifar(const std::string& dir, bool hundred, Split split,
                                             const DatasetRequirements& req) {
  std::vector<std::string> files;
  if (hundred) files.push_back(split == Split::Train ? "train.bin" : "test.bin");
  else if (split == Split::Train)
    for (int i = 1; i <= 5; ++i) files.push_back("data_batch_" + std::to_string(i) + ".bin");
  else
    files.push_back("test_batch.bin");
  const size_t labelBytes = hundred ? 2 : 1, record = labelBytes + 3 * 32 * 32;
  const std::string name = hundred ? "cifar100" : "cifar10";
  std::vector<uint8_t> pixels;
  std::vector<int64_t> labels;
  for (const auto& f : files) {
    std::string path = (std::filesystem::path(dir) / f).string();
    HGP_ASSIGN_OR_RETURN(auto bytes, readMaybeGzip(path));
    if (bytes.empty() || bytes.size() % record != 0)
      return badData("'" + path + "' is not a " + (hundred ? "CIFAR-100" : "CIFAR-10") +
                     " binary file (size " + std::to_string(bytes.size()) +
                     " is not a multiple of " + std::to_string(record) + ")");
    for (size_t r = 0; r < bytes.size(); r += record) {
      labels.push_back(bytes[r + labelBytes - 1]);
      pixels.insert(pixels.end(), bytes.begin() + long(r + labelBytes), bytes.begin() + long(r + record));
    }
  }
  HGP_TRY(checkLabels(labels, req.classes, name + " in '" + dir + "'"));
  return std::unique_ptr<Dataset>(new MemoryDataset(
      name + (split == Split::Train ? " train" : " test"), Shape{3, 32, 32}, std::move(pixels), {},
      std::move(labels)));
}

/// A parsed .npy header: dtype descr, shape, and where the data starts.
struct NpyArray {
  std::string descr;
  Shape shape;
  std::vector<uint8_t> bytes;
};

Expected<NpyArray> readNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return badData("cannot open '" + path + "'");
  std::vector<uint8_t> all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (all.size() < 10 || std::memcmp(all.data(), "\x93NUMPY", 6) != 0)
    return badData("'" + path + "' is not a .npy file");
  size_t headerLen = all[6] == 1 ? size_t(all[8] | all[9] << 8) : 0, start = 10;
  if (all[6] >= 2) {
    if (all.size() < 12) return badData("'" + path + "' is truncated");
    headerLen = size_t(all[8]) | size_t(all[9]) << 8 | size_t(all[10]) << 16 | size_t(all[11]) << 24;
    start = 12;
  }
  if (start + headerLen > all.size()) return badData("'" + path + "' has a truncated header");
  std::string header(all.begin() + long(start), all.begin() + long(start + headerLen));
  NpyArray a;
  auto field = [&](const std::string& key) -> std::string {
    size_t k = header.find("'" + key + "'");
    if (k == std::string::npos) return "";
    size_t c = header.find(':', k);
    return c == std::string::npos ? "" : header.substr(c + 1);
  };
  std::string descr = field("descr");
  size_t q1 = descr.find('\''), q2 = descr.find('\'', q1 + 1);
  if (q1 == std::string::npos || q2 == std::string::npos) return badData("'" + path + "': no dtype");
  a.descr = descr.substr(q1 + 1, q2 - q1 - 1);
  if (field("fortran_order").find("True") < field("fortran_order").find(','))
    return badData("'" + path + "' is in Fortran order; save it C-contiguous");
  std::string shape = field("shape");
  size_t p1 = shape.find('('), p2 = shape.find(')');
  if (p1 == std::string::npos || p2 == std::string::npos) return badData("'" + path + "': no shape");
  std::string dims = shape.substr(p1 + 1, p2 - p1 - 1);
  for (size_t b = 0; b < dims.size();) {
    size_t e = dims.find(',', b);
    if (e == std::string::npos) e = dims.size();
    std::string d = dims.substr(b, e - b);
    if (d.find_first_of("0123456789") != std::string::npos) a.shape.push_back(std::stoll(d));
    b = e + 1;
  }
  int64_t itemSize = a.descr.size() >= 3 ? std::atoi(a.descr.c_str() + 2) : 0;
  size_t need = size_t(numElements(a.shape) * itemSize);
  if (all.size() - start - headerLen != need)
    return badData("'" + path + "' holds " + std::to_string(all.size() - start - headerLen) +
                   " data bytes; its header " + shapeToString(a.shape) + " " + a.descr + " needs " +
                   std::to_string(need));
  a.bytes.assign(all.begin() + long(start + headerLen), all.end());
  return a;
}

Expected<std::unique_ptr<Dataset>> openNpy(const std::string& spec, const DatasetRequirements& req) {
  size_t comma = spec.find(',');
  if (comma == std::string::npos)
    return badData("npy: expects npy:IMAGES.npy,LABELS.npy, got 'npy:" + spec + "'");
  std::string imgPath = spec.substr(0, comma), lblPath = spec.substr(comma + 1);
  HGP_ASSIGN_OR_RETURN(NpyArray img, readNpy(imgPath));
  HGP_ASSIGN_OR_RETURN(NpyArray lbl, readNpy(lblPath));
  if (img.descr != "<f4")
    return badData("'" + imgPath + "' has dtype " + img.descr + "; images must be float32 (<f4)");
  if (img.shape.size() < 2) return badData("'" + imgPath + "' must be N x C x H x W");
  if (lbl.shape.size() != 1 || lbl.shape[0] != img.shape[0])
    return badData("'" + lblPath + "' must hold one label per image (" + std::to_string(img.shape[0]) +
                   "), its shape is " + shapeToString(lbl.shape));
  std::vector<int64_t> labels(size_t(lbl.shape[0]));
  for (size_t i = 0; i < labels.size(); ++i) {
    if (lbl.descr == "<i8") std::memcpy(&labels[i], lbl.bytes.data() + 8 * i, 8);
    else if (lbl.descr == "<i4") {
      int32_t v;
      std::memcpy(&v, lbl.bytes.data() + 4 * i, 4);
      labels[i] = v;
    } else {
      return badData("'" + lblPath + "' has dtype " + lbl.descr + "; labels must be int64 or int32");
    }
  }
  HGP_TRY(checkLabels(labels, req.classes, lblPath));
  std::vector<float> floats(img.bytes.size() / 4);
  std::memcpy(floats.data(), img.bytes.data(), img.bytes.size());
  Shape sample(img.shape.begin() + 1, img.shape.end());
  return std::unique_ptr<Dataset>(new MemoryDataset("npy " + imgPath, sample, {}, std::move(floats),
                                                    std::move(labels)));
}

/// Deterministic pseudo-random samples: uniform pixels with unit variance and uniform labels.
/// A pool of at most 256 distinct samples is generated once and repeated, so that feeding
/// synthetic data (for benchmarks) costs the host a copy, not a random number per pixel.
class SyntheticDataset final : public Dataset {
public:
  SyntheticDataset(Shape shape, int64_t n, int64_t classes, uint64_t seed)
      : shape_(std::move(shape)), n_(n) {
    int64_t per = numElements(shape_), pool = std::min<int64_t>(n, 256);
    pixels_.resize(size_t(pool * per));
    labels_.resize(size_t(pool));
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    auto next = [&] {
      uint64_t z = (s += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      return z ^ (z >> 31);
    };
    for (float& p : pixels_) p = float((double(next() >> 11) * 0x1.0p-53 - 0.5) * 3.4641016);
    for (int64_t& l : labels_) l = int64_t(next() % uint64_t(std::max<int64_t>(classes, 1)));
  }
  int64_t size() const override { return n_; }
  const Shape& sampleShape() const override { return shape_; }
  Status get(int64_t i, int64_t, float* image, int64_t* label) const override {
    int64_t per = numElements(shape_), k = i % int64_t(labels_.size());
    std::memcpy(image, pixels_.data() + k * per, size_t(per) * sizeof(float));
    *label = labels_[size_t(k)];
    return Status::ok();
  }
  std::string describe() const override {
    return "synthetic (" + std::to_string(n_) + " samples of " + shapeToString(shape_) + ")";
  }

private:
  Shape shape_;
  int64_t n_;
  std::vector<float> pixels_;
  std::vector<int64_t> labels_;
};

/// Standardizes the samples of another data set channel by channel.
class NormalizedDataset final : public Dataset {
public:
  NormalizedDataset(std::unique_ptr<Dataset> base, std::vector<float> mean, std::vector<float> sd)
      : base_(std::move(base)), mean_(std::move(mean)), sd_(std::move(sd)) {}
  int64_t size() const override { return base_->size(); }
  const Shape& sampleShape() const override { return base_->sampleShape(); }
  Status get(int64_t i, int64_t epoch, float* image, int64_t* label) const override {
    HGP_TRY(base_->get(i, epoch, image, label));
    const Shape& s = sampleShape();
    int64_t channels = s.empty() ? 1 : s[0], per = numElements(s) / std::max<int64_t>(channels, 1);
    for (int64_t c = 0; c < channels; ++c) {
      float m = mean_[size_t(mean_.size() == 1 ? 0 : c)], inv = 1.0f / sd_[size_t(sd_.size() == 1 ? 0 : c)];
      for (int64_t k = 0; k < per; ++k) image[c * per + k] = (image[c * per + k] - m) * inv;
    }
    return Status::ok();
  }
  std::string describe() const override { return base_->describe() + ", standardized"; }

private:
  std::unique_ptr<Dataset> base_;
  std::vector<float> mean_, sd_;
};

Status checkNormalize(const DatasetRequirements& req, const Shape& sample) {
  int64_t channels = sample.empty() ? 1 : sample[0];
  auto fits = [&](size_t n) { return n == 1 || int64_t(n) == channels; };
  if (!fits(req.mean.size()) || !fits(req.stddev.size()))
    return Status(ErrorCode::Usage, "--normalize needs one mean and one std, or one of each per "
                                    "channel (" + std::to_string(channels) + ")");
  for (float sd : req.stddev)
    if (!(sd > 0)) return Status(ErrorCode::Usage, "--normalize: std must be positive");
  return Status::ok();
}

/// Image data decoded (or taken from memory) and augmented per sample, at the model's shape.
Expected<std::unique_ptr<Dataset>> imageData(std::unique_ptr<ImageSource> src, Split split,
                                             const DatasetRequirements& req) {
  const Shape& shape = req.sampleShape;
  if (shape.size() != 3 || (shape[0] != 1 && shape[0] != 3))
    return badData(src->describe() + ": image data feeds models whose input is N x C x H x W "
                   "with 1 or 3 channels; this model's sample is " + shapeToString(shape));
  if (req.classes > 0 && int64_t(src->classes().size()) > req.classes)
    return badData(src->describe() + " has " + std::to_string(src->classes().size()) +
                   " classes; the model has " + std::to_string(req.classes) + " outputs");
  for (int64_t i = 0; i < src->size() && src->classes().empty(); ++i)
    if (src->label(i) < 0 || (req.classes > 0 && src->label(i) >= req.classes))
      return badData(src->name(i) + ": label " + std::to_string(src->label(i)) + " is outside [0, " +
                     std::to_string(req.classes) + ")");
  ImageDatasetOptions o;
  o.sampleShape = shape;
  o.augment = req.augment;
  o.train = split == Split::Train;
  o.seed = req.seed;
  o.skipBad = req.skipBadImages;
  o.pixels = req.u8Pixels;
  if (!req.mean.empty()) {
    HGP_TRY(checkNormalize(req, shape));
    o.mean = req.mean, o.stddev = req.stddev;
  }
  return makeImageDataset(std::move(src), o);
}

} // namespace

std::vector<int64_t> Dataset::order(bool shuffle, uint64_t seed, int64_t epoch) const {
  return epochOrder(size(), shuffle, seed, epoch);
}

Expected<ResidentData> Dataset::resident() const {
  return Status(ErrorCode::DataNotOnDevice,
                "--data-on-device holds 8-bit data sets that are in memory (idx, CIFAR) on the "
                "GPU; " + describe() + " is not one");
}

Status Dataset::getPixels(int64_t, int64_t, uint8_t*, uint8_t*, int64_t*) const {
  return Status(ErrorCode::Internal, describe() + " gives float samples, not 8-bit pixels");
}

Expected<std::unique_ptr<Dataset>> openDataset(const std::string& spec, Split split,
                                               const DatasetRequirements& req) {
  size_t colon = spec.find(':');
  std::string kind = spec.substr(0, colon), rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  std::unique_ptr<Dataset> ds;
  if (kind == "fashion-mnist" || kind == "mnist") {
    if (rest.empty()) return Status(ErrorCode::Usage, kind + ": expects " + kind + ":DIR");
    HGP_ASSIGN_OR_RETURN(ds, openIdx(kind, rest, split, req));
  } else if (kind == "cifar10" || kind == "cifar100") {
    if (rest.empty()) return Status(ErrorCode::Usage, kind + ": expects " + kind + ":DIR");
    HGP_ASSIGN_OR_RETURN(ds, openCifar(rest, kind == "cifar100", split, req));
  } else if (kind == "imagefolder" || kind == "shards") {
    if (rest.empty()) return Status(ErrorCode::Usage, kind + ": expects " + kind + (kind == "shards" ? ":PATTERN" : ":DIR"));
    std::unique_ptr<ImageSource> src;
    if (kind == "imagefolder") {
      HGP_ASSIGN_OR_RETURN(src, openImageFolder(rest, split == Split::Test ? req.trainClasses
                                                                              : std::vector<std::string>{},
                                                req.skipBadImages));
    } else {
      HGP_ASSIGN_OR_RETURN(src, openTarShards(rest, req.rank, req.ranks, split == Split::Test ? req.trainClasses
                                                                              : std::vector<std::string>{},
                                              req.shuffleBuffer));
    }
    return imageData(std::move(src), split, req);
  } else if (kind == "npy") {
    HGP_ASSIGN_OR_RETURN(ds, openNpy(rest, req));
  } else if (kind == "synthetic") {
    int64_t n = rest.empty() ? 64 * req.batch : std::atoll(rest.c_str());
    if (n < 1) return Status(ErrorCode::Usage, "synthetic:N needs N >= 1");
    ds.reset(new SyntheticDataset(req.sampleShape, n, req.classes,
                                  req.seed + (split == Split::Test ? 1 : 0)));
  } else {
    return Status(ErrorCode::Usage, "unknown data spec '" + spec +
                                        "' (expected fashion-mnist:DIR, mnist:DIR, cifar10:DIR, "
                                        "cifar100:DIR, imagefolder:DIR, shards:PATTERN, "
                                        "npy:IMAGES.npy,LABELS.npy or synthetic)");
  }
  if (!req.sampleShape.empty() && ds->sampleShape() != req.sampleShape)
    return badData(ds->describe() + " does not fit the model: its samples are " +
                   shapeToString(ds->sampleShape()) + ", the model's input wants " +
                   shapeToString(req.sampleShape));
  if ((split == Split::Train && req.augment.random()) || req.u8Pixels) {
    auto* mem = dynamic_cast<MemoryDataset*>(ds.get());
    std::unique_ptr<ImageSource> src = mem ? mem->takeImages() : nullptr;
    if (!src)
      return Status(ErrorCode::Usage,
                    (req.u8Pixels ? std::string("this executable takes 8-bit pixels (hgpc compile --pixels u8) and")
                                  : "--augment " + req.augment.recipe) +
                        " needs 8-bit images (idx, CIFAR, image folders or shards), not " + ds->describe());
    return imageData(std::move(src), split, req);
  }
  if (!req.mean.empty()) {
    HGP_TRY(checkNormalize(req, ds->sampleShape()));
    ds.reset(new NormalizedDataset(std::move(ds), req.mean, req.stddev));
  }
  return ds;
}

} // namespace hgp
