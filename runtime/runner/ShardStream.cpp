#include "runtime/runner/ShardStream.h"

#include "runtime/runner/BatchLoader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hgp {

namespace {

uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int64_t chunkBytes = int64_t(1) << 20;

ShardReadHook& hookSlot() {
  static ShardReadHook hook;
  return hook;
}

} // namespace

void setShardReadHook(ShardReadHook hook, int64_t chunk) {
  hookSlot() = std::move(hook);
  chunkBytes = chunk > 0 ? chunk : int64_t(1) << 20;
}
const ShardReadHook& shardReadHook() { return hookSlot(); }

ShardSequence::ShardSequence(std::vector<std::pair<int64_t, int64_t>> groups, bool shuffle,
                             uint64_t seed, int64_t epoch, int64_t buffer)
    : groups_(std::move(groups)), key_(mix(mix(seed ^ 0x5851F42D4C957F2Dull) + uint64_t(epoch))),
      capacity_(shuffle ? std::max<int64_t>(1, buffer) : 1) {
  // The shard order has its own stream of draws, apart from the buffer's.
  order_ = epochOrder(int64_t(groups_.size()), shuffle, seed ^ 0xA24BAED4963EE407ull, epoch);
  if (!order_.empty()) cursor_ = groups_[size_t(order_[0])].first;
}

uint64_t ShardSequence::draw(uint64_t bound) {
  // Position p's draw: SplitMix64 keyed by (seed, epoch, p), unbiased by rejection.
  uint64_t limit = UINT64_MAX - UINT64_MAX % bound, state = key_ ^ mix(uint64_t(pos_)), r;
  do r = mix(state += 0x9E3779B97F4A7C15ull);
  while (r >= limit);
  return r % bound;
}

int64_t ShardSequence::next(std::vector<int64_t>* entered) {
  while (int64_t(buf_.size()) < capacity_ && group_ < order_.size()) {
    buf_.push_back(cursor_);
    if (entered) entered->push_back(cursor_);
    if (++cursor_ == groups_[size_t(order_[group_])].second && ++group_ < order_.size())
      cursor_ = groups_[size_t(order_[group_])].first;
  }
  if (buf_.empty()) return -1;
  size_t k = size_t(draw(uint64_t(buf_.size())));
  int64_t out = buf_[k];
  buf_[k] = buf_.back();
  buf_.pop_back();
  ++pos_;
  return out;
}

void ShardSequence::skip(int64_t count) {
  for (int64_t i = 0; i < count && next(nullptr) >= 0; ++i) {
  }
}

SequentialFile::~SequentialFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status SequentialFile::open(const std::string& path, int64_t offset) {
  if (fd_ >= 0) ::close(fd_);
  path_ = path;
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return Status(ErrorCode::Io, "cannot open shard '" + path + "': " + std::strerror(errno));
  if (offset > 0 && ::lseek(fd_, off_t(offset), SEEK_SET) < 0)
    return Status(ErrorCode::Io, "cannot read shard '" + path + "': " + std::strerror(errno));
#ifdef POSIX_FADV_SEQUENTIAL
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
  chunk_.resize(size_t(chunkBytes));
  chunkStart_ = offset, chunkLen_ = 0;
  return Status::ok();
}

Status SequentialFile::refill() {
  chunkStart_ += chunkLen_;
  chunkLen_ = 0;
  for (;;) {
    ssize_t r = ::read(fd_, chunk_.data(), chunk_.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status(ErrorCode::Io, "cannot read shard '" + path_ + "': " + std::strerror(errno));
    if (r == 0) return Status(ErrorCode::BadData, "shard '" + path_ + "' ends early (truncated?)");
    chunkLen_ = r;
    if (const ShardReadHook& hook = shardReadHook()) hook(path_, chunkStart_, r, /*streamed=*/true);
    return Status::ok();
  }
}

Status SequentialFile::read(int64_t offset, int64_t size, std::vector<uint8_t>& out) {
  if (fd_ < 0 || offset < chunkStart_)
    return Status(ErrorCode::Internal, "shard '" + path_ + "' was asked to read backwards");
  out.resize(size_t(size));
  for (int64_t done = 0; done < size;) {
    int64_t at = offset + done;
    if (at >= chunkStart_ + chunkLen_) {
      HGP_TRY(refill());
      continue;
    }
    int64_t n = std::min(size - done, chunkStart_ + chunkLen_ - at);
    std::memcpy(out.data() + done, chunk_.data() + (at - chunkStart_), size_t(n));
    done += n;
  }
  return Status::ok();
}

Status readOnce(const std::string& path, int64_t offset, int64_t size, std::vector<uint8_t>& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status(ErrorCode::Io, "cannot open shard '" + path + "': " + std::strerror(errno));
  out.resize(size_t(size));
  int64_t got = 0;
  while (got < size) {
    ssize_t r = ::pread(fd, out.data() + got, size_t(size - got), off_t(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += r;
  }
  ::close(fd);
  if (const ShardReadHook& hook = shardReadHook()) hook(path, offset, size, /*streamed=*/false);
  if (got < size) return Status(ErrorCode::Io, "cannot read " + std::to_string(size) +
                                                   " bytes at " + std::to_string(offset) +
                                                   " of shard '" + path + "'");
  return Status::ok();
}

} // namespace hgp
