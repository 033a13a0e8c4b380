#include "runtime/bundle/Bundle.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <memory>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hgp {

namespace {

constexpr char kPayloadMagic[8] = {'H', 'G', 'P', 'C', 'B', 'N', 'D', 'L'};
constexpr char kTrailerMagic[8] = {'H', 'G', 'P', 'C', 'T', 'R', 'L', 'R'};
constexpr uint64_t kVersion = 1;
constexpr size_t kNameLen = 16;
constexpr uint64_t kAlign = 64;

struct Trailer {
  char magic[8];
  uint64_t payloadOffset;
  uint64_t payloadSize;
  uint64_t reserved;
};
static_assert(sizeof(Trailer) == 32);

uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}
void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}

Status bad(const std::string& m) { return Status(ErrorCode::InvalidModel, "bundle: " + m); }

/// Buffered writes to a file, remembering the first failure.
class Writer {
public:
  explicit Writer(FILE* f) : f_(f) {}
  void write(const void* p, size_t n) {
    if (ok_ && n && std::fwrite(p, 1, n, f_) != n) ok_ = false;
    at_ += n;
  }
  /// Pads to a multiple of `align` counted from `base` (the payload's start).
  void pad(uint64_t align, uint64_t base) {
    static const uint8_t zeros[64] = {};
    write(zeros, size_t((align - (at_ - base) % align) % align));
  }
  uint64_t at() const { return at_; }
  bool ok() const { return ok_; }

private:
  FILE* f_;
  uint64_t at_ = 0;
  bool ok_ = true;
};

} // namespace

Status writeExecutable(const std::string& runnerPath, const Bundle& b, const std::string& outPath) {
  FILE* in = std::fopen(runnerPath.c_str(), "rb");
  if (!in) return Status(ErrorCode::Io, "cannot read the runner '" + runnerPath + "'");
  std::unique_ptr<FILE, int (*)(FILE*)> inGuard(in, &std::fclose);
  std::fseek(in, 0, SEEK_END);
  long runnerSize = std::ftell(in);
  // A runner that already carries a bundle is cut back to its own bytes.
  if (runnerSize >= long(sizeof(Trailer))) {
    Trailer t;
    std::fseek(in, runnerSize - long(sizeof t), SEEK_SET);
    if (std::fread(&t, 1, sizeof t, in) == sizeof t && std::memcmp(t.magic, kTrailerMagic, 8) == 0 &&
        t.payloadOffset <= uint64_t(runnerSize))
      runnerSize = long(t.payloadOffset);
  }
  std::fseek(in, 0, SEEK_SET);

  std::string splices;
  for (const auto& s : b.splices)
    splices += std::to_string(s.offset) + " " + std::to_string(s.bytes) + " " + s.tensor + "\n";
  std::string fileref =
      b.fileRefPath.empty() ? std::string() : std::to_string(b.fileRefSize) + " " + b.fileRefPath;
  struct Section {
    const char* name;
    const uint8_t* bytes;
    size_t size;
  };
  auto bytesOf = [](const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); };
  const Section sections[] = {
      {"plan", bytesOf(b.planText), b.planText.size()},
      {"data", b.data.data(), b.data.size()},
      {"template", b.saveTemplate.data(), b.saveTemplate.size()},
      {"splices", bytesOf(splices), splices.size()},
      {"fileref", bytesOf(fileref), fileref.size()},
  };
  constexpr size_t n = std::size(sections);
  // The header: magic, version, count, then a (name, offset, size) entry per section, with
  // offsets relative to the payload start and each section 64-byte aligned.
  std::vector<uint8_t> header(24 + n * (kNameLen + 16), 0);
  std::memcpy(header.data(), kPayloadMagic, 8);
  put64(header.data() + 8, kVersion);
  put64(header.data() + 16, n);
  uint64_t at = (header.size() + kAlign - 1) / kAlign * kAlign;
  for (size_t i = 0; i < n; ++i) {
    uint8_t* e = header.data() + 24 + i * (kNameLen + 16);
    std::memcpy(e, sections[i].name, std::strlen(sections[i].name));
    put64(e + kNameLen, at);
    put64(e + kNameLen + 8, sections[i].size);
    at = (at + sections[i].size + kAlign - 1) / kAlign * kAlign;
  }

  std::string tmp = outPath + ".tmp" + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status(ErrorCode::Io, "cannot write '" + outPath + "': " + std::strerror(errno));
  Writer w(f);
  std::vector<uint8_t> buf(size_t(1) << 20);
  for (long left = runnerSize; left > 0;) {
    size_t got = std::fread(buf.data(), 1, std::min<size_t>(buf.size(), size_t(left)), in);
    if (got == 0) break;
    w.write(buf.data(), got);
    left -= long(got);
  }
  uint64_t payloadStart = w.at();
  w.write(header.data(), header.size());
  for (const Section& s : sections) {
    w.pad(kAlign, payloadStart);
    w.write(s.bytes, s.size);
  }
  w.pad(kAlign, payloadStart);
  Trailer t;
  std::memcpy(t.magic, kTrailerMagic, 8);
  t.payloadOffset = payloadStart;
  t.payloadSize = w.at() - payloadStart;
  t.reserved = 0;
  w.write(&t, sizeof t);
  bool ok = w.ok() && w.at() == payloadStart + t.payloadSize + sizeof t &&
            uint64_t(runnerSize) == payloadStart;
  ok = std::fflush(f) == 0 && ok;
  ok = fsync(fileno(f)) == 0 && ok;
  ok = std::fclose(f) == 0 && ok;
  if (!ok || chmod(tmp.c_str(), 0755) != 0 || std::rename(tmp.c_str(), outPath.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status(ErrorCode::Io, "cannot write '" + outPath + "': " + why);
  }
  return Status::ok();
}

MappedBundle& MappedBundle::operator=(MappedBundle&& o) noexcept {
  if (this == &o) return *this;
  if (map_) munmap(map_, mapSize_);
  planText = std::move(o.planText);
  data = o.data;
  saveTemplate = o.saveTemplate;
  splices = std::move(o.splices);
  fileRefPath = std::move(o.fileRefPath);
  fileRefSize = o.fileRefSize;
  map_ = o.map_;
  mapSize_ = o.mapSize_;
  o.map_ = nullptr;
  o.mapSize_ = 0;
  return *this;
}

MappedBundle::~MappedBundle() {
  if (map_) munmap(map_, mapSize_);
}

Expected<MappedBundle> readBundleFromExecutable(const std::string& exePath) {
  int fd = ::open(exePath.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status(ErrorCode::Io, "cannot open '" + exePath + "': " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Status(ErrorCode::Io, "cannot stat '" + exePath + "'");
  }
  size_t size = size_t(st.st_size);
  void* map = size ? mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  ::close(fd);
  if (map == MAP_FAILED) return Status(ErrorCode::Io, "cannot map '" + exePath + "'");
  MappedBundle b;
  b.map_ = map;
  b.mapSize_ = size;
  const uint8_t* file = static_cast<const uint8_t*>(map);
  Trailer t;
  if (size < sizeof t || (std::memcpy(&t, file + size - sizeof t, sizeof t), false) ||
      std::memcmp(t.magic, kTrailerMagic, 8) != 0)
    return Status(ErrorCode::InvalidModel,
                  "'" + exePath + "' carries no model: it is the bare runner. Make a training "
                  "executable with: hgpc compile MODEL.onnx -o EXE");
  if (t.payloadOffset > size || t.payloadSize > size - t.payloadOffset ||
      t.payloadOffset + t.payloadSize + sizeof t != size)
    return bad("the trailer does not match the file size (truncated executable?)");
  const uint8_t* p = file + t.payloadOffset;
  size_t psize = size_t(t.payloadSize);
  if (psize < 24 || std::memcmp(p, kPayloadMagic, 8) != 0) return bad("bad magic");
  if (get64(p + 8) != kVersion)
    return bad("version " + std::to_string(get64(p + 8)) + " is not supported by this runner");
  uint64_t n = get64(p + 16);
  if (n > 64 || 24 + n * (kNameLen + 16) > psize) return bad("bad section table");
  std::map<std::string, std::span<const uint8_t>> sec;
  for (uint64_t i = 0; i < n; ++i) {
    const uint8_t* e = p + 24 + i * (kNameLen + 16);
    std::string name(reinterpret_cast<const char*>(e), strnlen(reinterpret_cast<const char*>(e), kNameLen));
    uint64_t off = get64(e + kNameLen), len = get64(e + kNameLen + 8);
    if (off > psize || len > psize - off) return bad("section '" + name + "' is out of bounds");
    sec[name] = {p + off, size_t(len)};
  }
  for (const char* required : {"plan", "data", "template", "splices", "fileref"})
    if (!sec.count(required)) return bad(std::string("missing section '") + required + "'");
  auto text = [&](const char* name) {
    return std::string(reinterpret_cast<const char*>(sec[name].data()), sec[name].size());
  };
  b.planText = text("plan");
  b.data = sec["data"];
  b.saveTemplate = sec["template"];
  std::istringstream splices(text("splices"));
  SpliceEntry e;
  int64_t last = -1;
  while (splices >> e.offset >> e.bytes >> std::ws && std::getline(splices, e.tensor)) {
    if (e.offset < last || e.bytes < 0 || size_t(e.offset) > b.saveTemplate.size())
      return bad("bad splice table");
    last = e.offset;
    b.splices.push_back(e);
  }
  std::string fileref = text("fileref");
  if (!fileref.empty()) {
    size_t sp = fileref.find(' ');
    if (sp == std::string::npos) return bad("bad file reference");
    b.fileRefSize = std::stoll(fileref.substr(0, sp));
    b.fileRefPath = fileref.substr(sp + 1);
  }
  return b;
}

} // namespace hgp
