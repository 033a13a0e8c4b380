// ShardStream.h - the order in which tar shards are streamed, and the reader that streams them.
//
// Tar shards exist so that a data set larger than memory can be read from slow or network disks
// front to back, one file at a time, as WebDataset reads them. An epoch therefore visits the
// shards in a shuffled order, reads each one sequentially, and shuffles the samples only within
// a bounded buffer: a sample enters the buffer when the reader passes it, and each step of the
// epoch takes a random sample out of the buffer (WebDataset's `shuffle(n)`). Memory holds the
// buffer's samples, never the data set.
//
// Every random choice is a pure function of (seed, epoch, position): the shard order is drawn
// from (seed, epoch), and the sample taken at position p of the epoch from (seed, epoch, p). So
// the sequence is the same on every run with the same seed, and a run resumed at position p can
// recompute the buffer's contents at p from the sample indices alone, without reading anything,
// and then read only the samples that are in the buffer (ShardSequence::skip).
#pragma once

#include "runtime/plan/Types.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace hgp {

/// The sample indices of one epoch over groups of consecutive indices (a tar shard each, its
/// members in file order), as the shuffle buffer emits them. No I/O: the stream reads what
/// `next` says entered the buffer.
class ShardSequence {
public:
  /// `groups` are [first, end) ranges. Without `shuffle`, the groups and their samples come in
  /// order (a buffer of one). `buffer` is the shuffle buffer's size in samples (at least 1).
  ShardSequence(std::vector<std::pair<int64_t, int64_t>> groups, bool shuffle, uint64_t seed,
                int64_t epoch, int64_t buffer);
  /// The next sample of the epoch, or -1 after the last. The samples that entered the buffer
  /// before it was taken (the ones to read, in file order) are appended to `entered`.
  int64_t next(std::vector<int64_t>* entered);
  /// Advances `count` samples without reading: afterwards `buffered()` holds what a run that
  /// read them would hold.
  void skip(int64_t count);
  /// The samples in the buffer now.
  const std::vector<int64_t>& buffered() const { return buf_; }
  /// The epoch's group (shard) order.
  const std::vector<int64_t>& groupOrder() const { return order_; }

private:
  uint64_t draw(uint64_t bound);

  std::vector<std::pair<int64_t, int64_t>> groups_;
  std::vector<int64_t> order_, buf_;
  uint64_t key_;
  int64_t capacity_, pos_ = 0;
  size_t group_ = 0;
  int64_t cursor_ = -1; ///< The next index to enter, within groups_[order_[group_]].
};

/// Observes every read of a shard's bytes during training: the file, the offset, the length,
/// and whether it was part of a sequential stream (false for a single out-of-order read: a
/// resumed run's buffer, or a sample read again). Tests use it to prove the pattern; null (the
/// default) costs nothing. `chunkBytes`, when positive, replaces the 1 MiB a sequential read
/// asks for, so that a test's small shard takes many reads.
using ShardReadHook = std::function<void(const std::string& path, int64_t offset, int64_t bytes,
                                         bool streamed)>;
void setShardReadHook(ShardReadHook hook, int64_t chunkBytes = 0);
/// The installed hook, or null.
const ShardReadHook& shardReadHook();

/// One file read front to back in large chunks. After the first positioning it never seeks: a
/// request further on reads through the bytes in between (tar headers, ignored members).
class SequentialFile {
public:
  SequentialFile() = default;
  ~SequentialFile();
  SequentialFile(const SequentialFile&) = delete;
  SequentialFile& operator=(const SequentialFile&) = delete;
  /// Opens `path` to read from `offset` on.
  Status open(const std::string& path, int64_t offset);
  /// Copies [offset, offset + size) into `out`; `offset` must not lie before what was read.
  Status read(int64_t offset, int64_t size, std::vector<uint8_t>& out);
  const std::string& path() const { return path_; }

private:
  Status refill();

  int fd_ = -1;
  std::string path_;
  std::vector<uint8_t> chunk_;
  int64_t chunkStart_ = 0, chunkLen_ = 0;
};

/// Reads [offset, offset + size) of `path` with one pread (reported to the hook as not streamed).
Status readOnce(const std::string& path, int64_t offset, int64_t size, std::vector<uint8_t>& out);

} // namespace hgp
