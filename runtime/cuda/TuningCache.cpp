#include "runtime/cuda/TuningCache.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace hgp::cuda {

namespace {
std::string defaultPath() {
  if (const char* p = std::getenv("HGPC_TUNING_CACHE")) return p;
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return std::string(x) + "/hgpc/tuning.tsv";
  if (const char* h = std::getenv("HOME")) return std::string(h) + "/.cache/hgpc/tuning.tsv";
  return "hgpc-tuning.tsv";
}

void readInto(const std::string& path, std::map<std::string, std::string>& out) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t tab = line.find('\t');
    if (tab != std::string::npos) out.emplace(line.substr(0, tab), line.substr(tab + 1));
  }
}
} // namespace

TuningCache::TuningCache(std::string path) : path_(path.empty() ? defaultPath() : std::move(path)) {
  readInto(path_, entries_);
}

std::optional<std::string> TuningCache::lookup(const std::string& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++misses_;
    return std::nullopt;
  }
  ++hits_;
  return it->second;
}

void TuningCache::insert(const std::string& key, const std::string& value) {
  entries_[key] = value;
  dirty_ = true;
}

void TuningCache::save() {
  if (!dirty_) return;
  std::map<std::string, std::string> merged;
  readInto(path_, merged);
  for (const auto& [k, v] : entries_) merged[k] = v;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
  std::string tmp = path_ + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp);
    for (const auto& [k, v] : merged) out << k << '\t' << v << '\n';
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path_, ec);
  if (ec) std::filesystem::remove(tmp, ec);
  dirty_ = false;
}

} // namespace hgp::cuda
