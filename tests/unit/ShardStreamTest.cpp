// Streaming tar shards (runtime/runner/ShardStream.h): the test writes WebDataset shards of
// PNGs itself (sample i's pixels all equal i % 251, its .cls holds i), then checks what the
// stream and the loader read: every sample once per epoch, each shard read front to back in one
// run of contiguous reads, the same order for the same seed and another for another epoch, a
// resumed stream that continues exactly as the uninterrupted one, and a buffer that never holds
// more than its size.
#include "runtime/runner/BatchLoader.h"
#include "runtime/runner/ImageDataset.h"
#include "runtime/runner/ShardStream.h"

#include <gtest/gtest.h>
#include <png.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace hgp {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> png(int side, uint8_t value) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  img.width = img.height = png_uint_32(side);
  img.format = PNG_FORMAT_GRAY;
  std::vector<uint8_t> pixels(size_t(side * side), value), out;
  png_alloc_size_t size = 0;
  png_image_write_to_memory(&img, nullptr, &size, 0, pixels.data(), 0, nullptr);
  out.resize(size);
  EXPECT_TRUE(png_image_write_to_memory(&img, out.data(), &size, 0, pixels.data(), 0, nullptr));
  out.resize(size);
  return out;
}

void member(std::ofstream& out, const std::string& name, const std::vector<uint8_t>& data) {
  char h[512] = {};
  std::snprintf(h, 100, "%s", name.c_str());
  std::snprintf(h + 100, 8, "%07o", 0644);
  std::snprintf(h + 124, 12, "%011o", unsigned(data.size()));
  h[156] = '0';
  std::memcpy(h + 257, "ustar\0" "00", 8);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (char c : h) sum += uint8_t(c);
  std::snprintf(h + 148, 8, "%06o", sum);
  out.write(h, 512);
  out.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size()));
  std::vector<char> pad((512 - data.size() % 512) % 512, 0);
  out.write(pad.data(), std::streamsize(pad.size()));
}

/// Shards with `counts[s]` samples each; returns the PNG bytes by sample index (shards sorted by
/// name, members in file order, which is how the source numbers them).
std::vector<std::vector<uint8_t>> writeShards(const fs::path& dir, const std::vector<int>& counts) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::vector<uint8_t>> all;
  for (size_t s = 0; s < counts.size(); ++s) {
    std::ofstream out(dir / ("shard-" + std::to_string(s) + ".tar"), std::ios::binary);
    for (int k = 0; k < counts[s]; ++k) {
      int id = int(all.size());
      std::string key = "s" + std::to_string(s) + "/" + std::to_string(1000 + k);
      all.push_back(png(4, uint8_t(id % 251)));
      member(out, key + ".png", all.back());
      std::string cls = std::to_string(id);
      member(out, key + ".cls", std::vector<uint8_t>(cls.begin(), cls.end()));
      if (k % 3 == 0) member(out, key + ".json", std::vector<uint8_t>(700, '{'));
    }
    std::vector<char> end(1024, 0);
    out.write(end.data(), 1024);
  }
  return all;
}

struct Read {
  std::string path;
  int64_t offset, bytes;
  bool streamed;
};

class ShardStreamTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hgp_shard_stream_" + std::to_string(::getpid()));
    bytes_ = writeShards(dir_, {13, 7, 20, 1, 9});
    auto src = openTarShards((dir_ / "shard-*.tar").string(), 0, 1, {}, kBuffer);
    ASSERT_TRUE(src) << src.status().toString();
    src_ = std::move(*src);
    setShardReadHook([this](const std::string& p, int64_t o, int64_t b, bool s) {
      reads_.push_back({p, o, b, s});
    }, /*chunkBytes=*/700);
  }
  void TearDown() override {
    setShardReadHook(nullptr);
    fs::remove_all(dir_);
  }
  /// One epoch from `start`, `step` samples at a time; checks each sample's bytes.
  std::vector<int64_t> epoch(uint64_t seed, int64_t e, int64_t start = 0, int64_t step = 5) {
    auto stream = src_->stream(true, seed, e, start);
    std::vector<int64_t> ids;
    for (size_t before = 1; ids.size() != before;) {
      before = ids.size();
      EXPECT_TRUE(stream->next(step, ids));
    }
    for (int64_t id : ids) {
      std::vector<uint8_t> got;
      Image raw;
      EXPECT_TRUE(src_->read(id, got, raw));
      EXPECT_EQ(got, bytes_[size_t(id)]) << "sample " << id;
    }
    return ids;
  }

  static constexpr int64_t kBuffer = 8;
  fs::path dir_;
  std::vector<std::vector<uint8_t>> bytes_;
  std::unique_ptr<ImageSource> src_;
  std::vector<Read> reads_;
};

TEST_F(ShardStreamTest, EverySampleOncePerEpochEachShardReadFrontToBack) {
  const int64_t n = int64_t(bytes_.size());
  ASSERT_EQ(src_->size(), n);
  for (int64_t e = 0; e < 3; ++e) {
    reads_.clear();
    std::vector<int64_t> ids = epoch(42, e);
    std::vector<int64_t> sorted = ids;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(int64_t(sorted.size()), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[size_t(i)], i) << "epoch " << e;
    // Each shard is one run of reads that continue where the last one ended, from its first
    // member's data (just after the first header) on, and no shard is read twice.
    std::set<std::string> done;
    for (size_t k = 0; k < reads_.size(); ++k) {
      const Read& r = reads_[k];
      EXPECT_TRUE(r.streamed) << r.path << " at " << r.offset;
      if (k == 0 || reads_[k - 1].path != r.path) {
        EXPECT_TRUE(done.insert(r.path).second) << r.path << " read twice in epoch " << e;
        EXPECT_EQ(r.offset, 512) << r.path;
      } else {
        EXPECT_EQ(r.offset, reads_[k - 1].offset + reads_[k - 1].bytes) << r.path;
      }
    }
    EXPECT_EQ(done.size(), 5u);
  }
}

TEST_F(ShardStreamTest, SameSeedSameOrderOtherEpochsAndSeedsDiffer) {
  std::vector<int64_t> a = epoch(42, 0), b = epoch(42, 0);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, epoch(42, 1));
  EXPECT_NE(a, epoch(43, 0));
  // The order the data set reports (for tools) is the streamed one, computed without reading.
  EXPECT_EQ(src_->order(true, 42, 0), a);
  std::vector<int64_t> identity(bytes_.size());
  for (size_t i = 0; i < identity.size(); ++i) identity[i] = int64_t(i);
  EXPECT_EQ(src_->order(false, 42, 0), identity);
}

TEST_F(ShardStreamTest, ResumedMidEpochContinuesTheSameSequence) {
  std::vector<int64_t> whole = epoch(42, 2);
  for (int64_t start : {1, 8, 17, 33, 49}) {
    reads_.clear();
    std::vector<int64_t> rest = epoch(42, 2, start, 3);
    EXPECT_EQ(rest, std::vector<int64_t>(whole.begin() + start, whole.end())) << "from " << start;
    int64_t single = 0;
    for (const Read& r : reads_) single += r.streamed ? 0 : 1;
    EXPECT_LE(single, kBuffer) << "a resume reads at most the buffer's samples on their own";
  }
}

TEST(ShardSequence, TheBufferHoldsAtMostItsSizeAndShufflesWithinIt) {
  std::vector<std::pair<int64_t, int64_t>> groups{{0, 30}, {30, 31}, {31, 75}, {75, 100}};
  for (int64_t buffer : {1, 4, 16, 1000}) {
    ShardSequence seq(groups, true, 9, 0, buffer);
    std::vector<int64_t> entered, emitted;
    std::set<int64_t> held;
    for (int64_t id; (id = seq.next(&entered)) >= 0;) {
      for (size_t k = held.size() + emitted.size(); k < entered.size(); ++k) held.insert(entered[k]);
      EXPECT_LE(int64_t(held.size()), buffer);
      EXPECT_EQ(held.erase(id), 1u) << "emitted before it was read";
      emitted.push_back(id);
    }
    EXPECT_EQ(emitted.size(), 100u);
    // What enters the buffer is the shards, in the epoch's shard order, front to back.
    std::vector<int64_t> expect;
    for (int64_t g : seq.groupOrder())
      for (int64_t i = groups[size_t(g)].first; i < groups[size_t(g)].second; ++i) expect.push_back(i);
    EXPECT_EQ(entered, expect);
    if (buffer == 1) {
      EXPECT_EQ(emitted, expect);
    } else {
      EXPECT_NE(emitted, expect);
    }
  }
}

TEST_F(ShardStreamTest, TheLoaderTrainsOnTheStreamAndResumesIt) {
  ImageDatasetOptions o;
  o.sampleShape = {1, 4, 4};
  o.pixels = true;
  auto data = makeImageDataset(std::move(src_), o);
  const int64_t batch = 4;
  auto run = [&](int64_t epoch, int64_t index, int64_t batches) -> std::vector<int64_t> {
    BatchLoader loader(*data, batch, /*shuffle=*/true, 42, /*dropLast=*/true, epoch, index, 0, 1, 2);
    EXPECT_EQ(loader.batchesPerEpoch(), int64_t(bytes_.size()) / batch);
    std::vector<int64_t> labels;
    for (int64_t k = 0; k < batches; ++k) {
      auto b = loader.next();
      EXPECT_TRUE(b->status) << b->status.toString();
      for (int64_t r = 0; r < batch; ++r) {
        int64_t id = b->labels[size_t(r)];
        labels.push_back(id);
        for (int p = 0; p < 16; ++p) EXPECT_EQ(b->pixels[size_t(r * 16 + p)], uint8_t(id % 251));
      }
      loader.recycle(std::move(b));
    }
    return labels;
  };
  std::vector<int64_t> two = run(0, 0, 2 * 12), expect = data->order(true, 42, 0);
  expect.resize(12 * batch);
  std::vector<int64_t> second = data->order(true, 42, 1);
  expect.insert(expect.end(), second.begin(), second.begin() + 12 * batch);
  EXPECT_EQ(two, expect);
  std::vector<int64_t> resumed = run(1, 5, 7);
  EXPECT_EQ(resumed, std::vector<int64_t>(two.begin() + (12 + 5) * batch, two.end()));
}

} // namespace
} // namespace hgp
