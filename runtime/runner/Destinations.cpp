#include "runtime/runner/Destinations.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace hgp {

namespace fs = std::filesystem;

namespace {

Status writableFolder(const fs::path& dir, const std::string& what) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status(ErrorCode::Io, what + ": cannot create the folder '" + dir.string() +
                                           "': " + ec.message());
  if (!fs::is_directory(dir, ec))
    return Status(ErrorCode::Io, what + ": '" + dir.string() + "' is not a folder");
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    return Status(ErrorCode::Io, what + ": cannot write into '" + dir.string() + "': " +
                                     std::strerror(errno));
  return Status::ok();
}

} // namespace

Status prepareFileDestination(const std::string& path, const std::string& flag) {
  if (path.empty()) return Status::ok();
  std::string what = flag + " '" + path + "'";
  std::error_code ec;
  if (fs::is_directory(path, ec))
    return Status(ErrorCode::Io, what + " is a folder; give the name of a file to write");
  fs::path dir = fs::path(path).parent_path();
  return writableFolder(dir.empty() ? fs::path(".") : dir, what);
}

Status prepareFolderDestination(const std::string& dir, const std::string& flag) {
  if (dir.empty()) return Status::ok();
  return writableFolder(dir, flag + " '" + dir + "'");
}

} // namespace hgp
