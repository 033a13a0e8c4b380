// TarShards.cpp - WebDataset tar shards as an ImageSource (ImageDataset.h).
#include "runtime/runner/ImageDataset.h"
#include "runtime/runner/ShardStream.h"

#include <fcntl.h>
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

namespace hgp {

namespace {

Status bad(const std::string& m) { return Status(ErrorCode::BadData, m); }

/// Expands one {A..B} range (zero-padded as A is) and then shell globbing.
Expected<std::vector<std::string>> expandPattern(const std::string& pattern) {
  std::vector<std::string> names;
  size_t open = pattern.find('{'), dots = pattern.find("..", open), close = pattern.find('}', open);
  if (open != std::string::npos && dots != std::string::npos && close != std::string::npos && dots < close) {
    std::string a = pattern.substr(open + 1, dots - open - 1), b = pattern.substr(dots + 2, close - dots - 2);
    if (a.empty() || b.empty() || a.find_first_not_of("0123456789") != std::string::npos ||
        b.find_first_not_of("0123456789") != std::string::npos)
      return Status(ErrorCode::Usage, "shards: '" + pattern + "' has a brace range that is not {N..M}");
    long lo = std::stol(a), hi = std::stol(b);
    if (hi < lo || hi - lo > 1000000)
      return Status(ErrorCode::Usage, "shards: the range {" + a + ".." + b + "} is empty or too large");
    for (long v = lo; v <= hi; ++v) {
      std::string num = std::to_string(v);
      if (num.size() < a.size()) num = std::string(a.size() - num.size(), '0') + num;
      names.push_back(pattern.substr(0, open) + num + pattern.substr(close + 1));
    }
  } else {
    names.push_back(pattern);
  }
  std::vector<std::string> out;
  for (const std::string& n : names) {
    glob_t g{};
    int rc = ::glob(n.c_str(), 0, nullptr, &g);
    if (rc == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
    globfree(&g);
    if (rc == GLOB_NOMATCH) return bad("shards: no file matches '" + n + "'");
    if (rc != 0) return Status(ErrorCode::Io, "shards: cannot expand '" + n + "'");
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

/// One sample of a shard: where its image member's bytes are, and its label. 24 bytes, no
/// names (name() reads the member's header back for messages).
struct Member {
  int64_t offset = 0;
  int64_t size = 0;
  int32_t label = -1;
  int32_t shard = 0;
};

uint64_t octal(const char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n && p[i]; ++i)
    if (p[i] >= '0' && p[i] <= '7') v = v * 8 + uint64_t(p[i] - '0');
  return v;
}

bool preadAll(int fd, void* buf, size_t n, int64_t at) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, static_cast<char*>(buf) + got, n - got, off_t(at + int64_t(got)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += size_t(r);
  }
  return true;
}

/// Reads every member header of one shard: the image members, with their .cls labels joined.
Status indexShard(const std::string& path, int shard, std::vector<Member>& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status(ErrorCode::Io, "cannot open shard '" + path + "': " + std::strerror(errno));
  off_t end = ::lseek(fd, 0, SEEK_END);
  std::map<std::string, Member> images;
  std::map<std::string, int64_t> labels;
  std::string longName;
  Status st;
  for (int64_t at = 0; at + 512 <= int64_t(end);) {
    char h[512];
    if (!preadAll(fd, h, 512, at)) {
      st = Status(ErrorCode::Io, "cannot read shard '" + path + "'");
      break;
    }
    if (h[0] == 0) break; // the end-of-archive blocks
    uint64_t size = octal(h + 124, 12);
    int64_t data = at + 512, next = data + int64_t((size + 511) / 512 * 512);
    if (next > int64_t(end) || uint64_t(end) < size) {
      st = bad("shard '" + path + "' is truncated (member at byte " + std::to_string(at) + ")");
      break;
    }
    char type = h[156];
    std::string name = longName;
    longName.clear();
    if (name.empty()) {
      std::string prefix(h + 345, strnlen(h + 345, 155)), base(h, strnlen(h, 100));
      name = prefix.empty() || std::memcmp(h + 257, "ustar", 5) != 0 ? base : prefix + "/" + base;
    }
    std::vector<char> small;
    if ((type == 'L' || type == 'x' || (type == '0' || type == 0)) && size <= 4096) {
      small.resize(size_t(size));
      if (size && !preadAll(fd, small.data(), size_t(size), data)) {
        st = Status(ErrorCode::Io, "cannot read shard '" + path + "'");
        break;
      }
    }
    if (type == 'L') {
      longName.assign(small.data(), strnlen(small.data(), small.size()));
    } else if (type == 'x') {
      // A pax header: "LEN path=NAME\n" records; only the path matters here.
      std::string rec(small.begin(), small.end());
      size_t p = rec.find(" path=");
      if (p != std::string::npos) longName = rec.substr(p + 6, rec.find('\n', p) - p - 6);
    } else if (type == '0' || type == 0) {
      size_t slash = name.rfind('/'), dot = name.find('.', slash == std::string::npos ? 0 : slash + 1);
      if (dot != std::string::npos) {
        std::string key = name.substr(0, dot), ext = name.substr(dot + 1);
        std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
        if (ext == "jpg" || ext == "jpeg" || ext == "png") {
          images[key] = Member{data, int64_t(size), -1, shard};
        } else if (ext == "cls") {
          std::string text(small.begin(), small.end());
          char* endp = nullptr;
          long v = std::strtol(text.c_str(), &endp, 10);
          if (text.empty() || endp == text.c_str() || v < 0) {
            st = bad("shard '" + path + "': '" + name + "' does not hold a class index");
            break;
          }
          labels[key] = v;
        }
      }
    }
    at = next;
  }
  ::close(fd);
  HGP_TRY(st);
  // Members in file order, so that reading them in order reads the shard front to back.
  std::vector<Member> found;
  for (auto& [key, m] : images) {
    auto it = labels.find(key);
    if (it == labels.end())
      return bad("shard '" + path + "': image '" + key + "' has no " + key + ".cls");
    if (it->second > INT32_MAX) return bad("shard '" + path + "': the class index of '" + key + "' is too large");
    m.label = int32_t(it->second);
    found.push_back(m);
  }
  std::sort(found.begin(), found.end(), [](const Member& a, const Member& b) { return a.offset < b.offset; });
  out.insert(out.end(), found.begin(), found.end());
  return Status::ok();
}

class TarShardSource final : public ImageSource {
public:
  int64_t size() const override { return int64_t(members_.size()); }
  int64_t label(int64_t i) const override { return members_[size_t(i)].label; }
  std::string name(int64_t i) const override {
    // The member's name, from its header (a ustar name of up to 100 bytes), for messages.
    const Member& m = members_[size_t(i)];
    const std::string& path = shards_[size_t(m.shard)];
    std::vector<uint8_t> h;
    std::string member = "member at byte " + std::to_string(m.offset);
    if (m.offset >= 512 && readOnce(path, m.offset - 512, 512, h))
      member = std::string(reinterpret_cast<const char*>(h.data()), strnlen(reinterpret_cast<const char*>(h.data()), 100));
    return path + ":" + member;
  }
  std::string describe() const override {
    return "tar shards " + pattern_ + " (" + std::to_string(shards_.size()) + " shards, " +
           std::to_string(size()) + " images" + (ranks_ > 1 ? " on this rank" : "") +
           ", shuffle buffer " + std::to_string(buffer_) + ")";
  }
  bool shardedByRank() const override { return ranks_ > 1; }
  std::unique_ptr<SampleStream> stream(bool shuffle, uint64_t seed, int64_t epoch,
                                       int64_t start) const override;
  std::vector<int64_t> order(bool shuffle, uint64_t seed, int64_t epoch) const override {
    ShardSequence seq(groups_, shuffle, seed, epoch, buffer_);
    std::vector<int64_t> out;
    out.reserve(size_t(size()));
    for (int64_t id; (id = seq.next(nullptr)) >= 0;) out.push_back(id);
    return out;
  }

  /// A streamed sample's bytes, taken out of the stream's hand-over; any other sample (a bad
  /// image's replacement, a padded evaluation row) is read on its own.
  Status read(int64_t i, std::vector<uint8_t>& bytes, Image&) const override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = ready_.find(i);
      if (it != ready_.end()) {
        bytes.swap(it->second);
        ready_.erase(it);
        return Status::ok();
      }
    }
    const Member& m = members_[size_t(i)];
    return readOnce(shards_[size_t(m.shard)], m.offset, m.size, bytes);
  }
  /// Hands a streamed sample's bytes to the read() that follows.
  void handOver(int64_t i, std::vector<uint8_t> bytes) const {
    std::lock_guard<std::mutex> lock(mu_);
    ready_[i] = std::move(bytes);
  }

  std::string pattern_;
  int ranks_ = 1;
  int64_t buffer_ = 1000;
  std::vector<std::string> shards_;
  std::vector<Member> members_;
  std::vector<std::pair<int64_t, int64_t>> groups_;

private:
  mutable std::mutex mu_;
  mutable std::unordered_map<int64_t, std::vector<uint8_t>> ready_;
};

/// One epoch of a TarShardSource: the shards in the sequence's order, each read front to back
/// by one SequentialFile; the buffer's samples are held as bytes until they are taken.
class TarStream final : public SampleStream {
public:
  TarStream(const TarShardSource& src, bool shuffle, uint64_t seed, int64_t epoch, int64_t start)
      : src_(src), seq_(src.groups_, shuffle, seed, epoch, src.buffer_), start_(start) {}

  Status next(int64_t n, std::vector<int64_t>& ids) override {
    if (start_ > 0) HGP_TRY(resume());
    for (int64_t k = 0; k < n; ++k) {
      entered_.clear();
      int64_t id = seq_.next(&entered_);
      for (int64_t e : entered_) {
        const Member& m = src_.members_[size_t(e)];
        if (file_.path().empty() || m.shard != shard_) {
          HGP_TRY(file_.open(src_.shards_[size_t(m.shard)], m.offset));
          shard_ = m.shard;
        }
        HGP_TRY(file_.read(m.offset, m.size, held_[e]));
      }
      if (id < 0) break;
      auto it = held_.find(id);
      src_.handOver(id, std::move(it->second));
      held_.erase(it);
      ids.push_back(id);
    }
    return Status::ok();
  }

private:
  /// Mid-epoch: replays the sequence to `start_` over indices alone, then reads the samples
  /// the buffer holds there, one read each (at most the buffer's size, once per resume).
  Status resume() {
    seq_.skip(start_);
    start_ = 0;
    for (int64_t id : seq_.buffered()) {
      const Member& m = src_.members_[size_t(id)];
      HGP_TRY(readOnce(src_.shards_[size_t(m.shard)], m.offset, m.size, held_[id]));
    }
    return Status::ok();
  }

  const TarShardSource& src_;
  ShardSequence seq_;
  int64_t start_;
  SequentialFile file_;
  int32_t shard_ = -1;
  std::vector<int64_t> entered_;
  std::unordered_map<int64_t, std::vector<uint8_t>> held_;
};

std::unique_ptr<SampleStream> TarShardSource::stream(bool shuffle, uint64_t seed, int64_t epoch,
                                                     int64_t start) const {
  return std::make_unique<TarStream>(*this, shuffle, seed, epoch, start);
}

} // namespace

Expected<std::unique_ptr<ImageSource>> openTarShards(const std::string& pattern, int rank, int ranks,
                                                     const std::vector<std::string>&,
                                                     int64_t shuffleBuffer) {
  if (shuffleBuffer < 1) return Status(ErrorCode::Usage, "--shuffle-buffer must be at least 1");
  HGP_ASSIGN_OR_RETURN(std::vector<std::string> all, expandPattern(pattern));
  if (int(all.size()) < ranks)
    return bad("shards: " + std::to_string(all.size()) + " shards cannot be split over " +
               std::to_string(ranks) + " ranks; make at least one shard per rank");
  // Every rank indexes every shard (headers only), so that all agree on how many samples a rank
  // trains on: the fewest any rank has, or the ranks would run different numbers of steps.
  auto src = std::make_unique<TarShardSource>();
  src->pattern_ = pattern;
  src->ranks_ = ranks;
  src->buffer_ = shuffleBuffer;
  std::vector<int64_t> perRank(size_t(ranks), 0);
  int64_t maxLabel = -1;
  for (size_t s = 0; s < all.size(); ++s) {
    std::vector<Member> members;
    HGP_TRY(indexShard(all[s], 0, members));
    perRank[s % size_t(ranks)] += int64_t(members.size());
    for (const Member& m : members) maxLabel = std::max<int64_t>(maxLabel, m.label);
    if (int(s % size_t(ranks)) != rank) continue;
    int shard = int(src->shards_.size());
    src->shards_.push_back(all[s]);
    int64_t first = int64_t(src->members_.size());
    for (Member& m : members) {
      m.shard = shard;
      src->members_.push_back(std::move(m));
    }
    src->groups_.push_back({first, int64_t(src->members_.size())});
  }
  int64_t keep = *std::min_element(perRank.begin(), perRank.end());
  if (keep == 0) return bad("shards: '" + pattern + "' holds no images with .cls labels" +
                            (ranks > 1 ? " for some rank" : ""));
  if (maxLabel < 1) return bad("shards: '" + pattern + "' has one class only; a classifier needs two or more");
  if (int64_t(src->members_.size()) > keep) {
    src->members_.resize(size_t(keep));
    while (!src->groups_.empty() && src->groups_.back().first >= keep) src->groups_.pop_back();
    if (!src->groups_.empty()) src->groups_.back().second = std::min(src->groups_.back().second, keep);
  }
  return std::unique_ptr<ImageSource>(std::move(src));
}

} // namespace hgp
