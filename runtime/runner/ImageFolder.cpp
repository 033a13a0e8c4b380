// ImageFolder.cpp - torchvision's ImageFolder layout as an ImageSource (ImageDataset.h).
#include "runtime/runner/ImageDataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

namespace hgp {

namespace fs = std::filesystem;

namespace {

Status bad(const std::string& m) { return Status(ErrorCode::BadData, m); }

bool hasImageExtension(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (const char* ext : {".jpg", ".jpeg", ".png"})
    if (lower.size() >= std::strlen(ext) && lower.compare(lower.size() - std::strlen(ext), std::string::npos, ext) == 0)
      return true;
  return false;
}

/// Formats torchvision would read that this runner cannot decode.
bool hasOtherImageExtension(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  for (const char* ext : {".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"})
    if (lower.size() >= std::strlen(ext) && lower.compare(lower.size() - std::strlen(ext), std::string::npos, ext) == 0)
      return true;
  return false;
}

class ImageFolderSource final : public ImageSource {
public:
  int64_t size() const override { return int64_t(paths_.size()); }
  int64_t label(int64_t i) const override { return labels_[size_t(i)]; }
  std::string name(int64_t i) const override { return paths_[size_t(i)]; }
  std::string describe() const override {
    return "image folder " + dir_ + " (" + std::to_string(size()) + " images, " +
           std::to_string(classes_.size()) + " classes)";
  }

  Status read(int64_t i, std::vector<uint8_t>& bytes, Image&) const override {
    const std::string& path = paths_[size_t(i)];
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status(ErrorCode::Io, std::string("cannot open: ") + std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      return Status(ErrorCode::Io, std::string("cannot stat: ") + std::strerror(errno));
    }
    bytes.resize(size_t(st.st_size));
    size_t got = 0;
    while (got < bytes.size()) {
      ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += size_t(n);
    }
    ::close(fd);
    bytes.resize(got);
    return Status::ok();
  }

  void setClasses(std::vector<std::string> names) { classes_ = std::move(names); }

  std::string dir_;
  std::vector<std::string> paths_;
  std::vector<int64_t> labels_;
};

} // namespace

Expected<std::unique_ptr<ImageSource>> openImageFolder(const std::string& dir,
                                                       const std::vector<std::string>& trainClasses,
                                                       bool skipBad) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return bad("image folder '" + dir + "' is not a directory");
  auto src = std::make_unique<ImageFolderSource>();
  src->dir_ = dir;
  std::vector<std::string> classes;
  for (const auto& e : fs::directory_iterator(dir, fs::directory_options::follow_directory_symlink, ec))
    if (e.is_directory()) classes.push_back(e.path().filename().string());
  if (ec) return Status(ErrorCode::Io, "cannot list '" + dir + "': " + ec.message());
  std::sort(classes.begin(), classes.end());
  if (classes.empty())
    return bad("image folder '" + dir + "' has no class folders; lay it out as DIR/<class>/<image> "
               "(docs/data.md)");
  std::map<std::string, int64_t> index;
  const std::vector<std::string>& names = trainClasses.empty() ? classes : trainClasses;
  for (size_t c = 0; c < names.size(); ++c) index[names[c]] = int64_t(c);
  size_t other = 0;
  for (const std::string& cls : classes) {
    auto it = index.find(cls);
    if (it == index.end())
      return bad("evaluation folder '" + dir + "' has class '" + cls +
                 "', which the training data does not have");
    std::vector<std::string> files;
    fs::recursive_directory_iterator walk(fs::path(dir) / cls,
                                          fs::directory_options::follow_directory_symlink, ec);
    for (; !ec && walk != fs::recursive_directory_iterator(); walk.increment(ec)) {
      if (!walk->is_regular_file(ec)) continue;
      std::string name = walk->path().filename().string();
      if (hasImageExtension(name)) files.push_back(walk->path().string());
      else other += hasOtherImageExtension(name);
    }
    if (ec) return Status(ErrorCode::Io, "cannot list '" + (fs::path(dir) / cls).string() + "': " + ec.message());
    // torchvision sorts os.walk's (folder, files) tuples by folder, then each folder's files.
    std::sort(files.begin(), files.end(), [](const std::string& a, const std::string& b) {
      fs::path pa(a), pb(b);
      std::string da = pa.parent_path().string(), db = pb.parent_path().string();
      return da != db ? da < db : pa.filename().string() < pb.filename().string();
    });
    if (files.empty()) {
      std::string m = "class folder '" + (fs::path(dir) / cls).string() + "' holds no .jpg, .jpeg or .png";
      if (!skipBad) return bad(m + " (--bad-images skip would go on without it)");
      std::fprintf(stderr, "warning: %s; class %lld ('%s') has no samples\n", m.c_str(),
                   (long long)it->second, cls.c_str());
    }
    for (auto& f : files) {
      src->paths_.push_back(std::move(f));
      src->labels_.push_back(it->second);
    }
  }
  if (other)
    std::fprintf(stderr, "warning: %zu images in '%s' are in a format other than JPEG or PNG "
                 "(BMP, TIFF, WebP, PPM) and are left out\n", other, dir.c_str());
  if (src->paths_.empty()) return bad("image folder '" + dir + "' holds no .jpg, .jpeg or .png images");
  if (trainClasses.empty() && classes.size() < 2)
    return bad("image folder '" + dir + "' has one class only ('" + classes[0] +
               "'); a classifier needs two or more");
  src->setClasses(names);
  return std::unique_ptr<ImageSource>(std::move(src));
}

} // namespace hgp
