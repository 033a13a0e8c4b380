// TuningCache.h - remembered algorithm choices, so a second start does no timing.
//
// HyConv's point: the best algorithm differs per layer and per phase (forward, backward-data,
// backward-filter), so each is timed separately. Timing costs seconds on a big model; the cache
// keeps the winners in a text file, one "key<TAB>value" per line. Keys name everything the choice
// depends on: GPU name and SM count, cuDNN version, phase, shapes, attributes, math mode and
// determinism. The default file is $HGPC_TUNING_CACHE, else $XDG_CACHE_HOME/hgpc/tuning.tsv,
// else ~/.cache/hgpc/tuning.tsv. A file that cannot be read or written only costs re-timing.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace hgp::cuda {

class TuningCache {
public:
  /// Reads `path` ("" = the default location) if it exists.
  explicit TuningCache(std::string path = "");

  std::optional<std::string> lookup(const std::string& key);
  void insert(const std::string& key, const std::string& value);
  /// Writes the file back if something was inserted (atomically, merging entries written by
  /// others meanwhile).
  void save();

  int hits() const { return hits_; }
  int misses() const { return misses_; }
  const std::string& path() const { return path_; }

private:
  std::string path_;
  std::map<std::string, std::string> entries_;
  bool dirty_ = false;
  int hits_ = 0, misses_ = 0;
};

} // namespace hgp::cuda
