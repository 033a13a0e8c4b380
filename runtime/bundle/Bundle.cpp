#include "runtime/bundle/Bundle.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace hgp {

namespace {

constexpr char kPayloadMagic[8] = {'H', 'G', 'P', 'C', 'B', 'N', 'D', 'L'};
constexpr char kTrailerMagic[8] = {'H', 'G', 'P', 'C', 'T', 'R', 'L', 'R'};
constexpr uint32_t kVersion = 1;
constexpr size_t kNameLen = 16;
constexpr int64_t kAlign = 64;

struct Trailer {
  char magic[8];
  uint64_t payloadOffset;
  uint64_t payloadSize;
  uint64_t reserved;
};
static_assert(sizeof(Trailer) == 32);

void put64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(uint8_t(v >> (8 * i)));
}
uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

Status bad(const std::string& m) { return Status(ErrorCode::InvalidModel, "bundle: " + m); }

} // namespace

std::vector<uint8_t> serializeBundle(const Bundle& b) {
  std::string splices;
  for (const auto& s : b.splices)
    splices += std::to_string(s.offset) + " " + std::to_string(s.bytes) + " " + s.tensor + "\n";
  std::string fileref = b.fileRefPath.empty()
                            ? std::string()
                            : std::to_string(b.fileRefSize) + " " + b.fileRefPath;
  std::vector<std::pair<std::string, std::pair<const uint8_t*, size_t>>> sections = {
      {"plan", {reinterpret_cast<const uint8_t*>(b.planText.data()), b.planText.size()}},
      {"data", {b.data.data(), b.data.size()}},
      {"template", {b.saveTemplate.data(), b.saveTemplate.size()}},
      {"splices", {reinterpret_cast<const uint8_t*>(splices.data()), splices.size()}},
      {"fileref", {reinterpret_cast<const uint8_t*>(fileref.data()), fileref.size()}},
  };
  std::vector<uint8_t> out(kPayloadMagic, kPayloadMagic + 8);
  put64(out, kVersion);
  put64(out, sections.size());
  size_t tableAt = out.size();
  out.resize(tableAt + sections.size() * (kNameLen + 16));
  for (size_t i = 0; i < sections.size(); ++i) {
    out.resize(size_t((int64_t(out.size()) + kAlign - 1) / kAlign * kAlign));
    uint8_t* entry = out.data() + tableAt + i * (kNameLen + 16);
    std::memset(entry, 0, kNameLen);
    std::memcpy(entry, sections[i].first.data(), sections[i].first.size());
    uint64_t off = out.size(), size = sections[i].second.second;
    for (int k = 0; k < 8; ++k) {
      entry[kNameLen + k] = uint8_t(off >> (8 * k));
      entry[kNameLen + 8 + k] = uint8_t(size >> (8 * k));
    }
    out.insert(out.end(), sections[i].second.first, sections[i].second.first + size);
  }
  return out;
}

Expected<Bundle> parseBundle(const uint8_t* p, size_t size) {
  if (size < 24 || std::memcmp(p, kPayloadMagic, 8) != 0) return bad("bad magic");
  if (get64(p + 8) != kVersion)
    return bad("version " + std::to_string(get64(p + 8)) + " is not supported by this runner");
  uint64_t n = get64(p + 16);
  if (n > 64 || 24 + n * (kNameLen + 16) > size) return bad("bad section table");
  std::map<std::string, std::pair<const uint8_t*, size_t>> sec;
  for (uint64_t i = 0; i < n; ++i) {
    const uint8_t* e = p + 24 + i * (kNameLen + 16);
    std::string name(reinterpret_cast<const char*>(e), strnlen(reinterpret_cast<const char*>(e), kNameLen));
    uint64_t off = get64(e + kNameLen), len = get64(e + kNameLen + 8);
    if (off > size || len > size - off) return bad("section '" + name + "' is out of bounds");
    sec[name] = {p + off, size_t(len)};
  }
  for (const char* required : {"plan", "data", "template", "splices", "fileref"})
    if (!sec.count(required)) return bad(std::string("missing section '") + required + "'");
  Bundle b;
  auto bytes = [&](const char* name) { return sec[name]; };
  b.planText.assign(reinterpret_cast<const char*>(bytes("plan").first), bytes("plan").second);
  b.data.assign(bytes("data").first, bytes("data").first + bytes("data").second);
  b.saveTemplate.assign(bytes("template").first, bytes("template").first + bytes("template").second);
  std::istringstream splices(std::string(reinterpret_cast<const char*>(bytes("splices").first),
                                         bytes("splices").second));
  SpliceEntry e;
  int64_t last = -1;
  while (splices >> e.offset >> e.bytes >> std::ws && std::getline(splices, e.tensor)) {
    if (e.offset < last || e.bytes < 0 || size_t(e.offset) > b.saveTemplate.size())
      return bad("bad splice table");
    last = e.offset;
    b.splices.push_back(e);
  }
  std::string fileref(reinterpret_cast<const char*>(bytes("fileref").first), bytes("fileref").second);
  if (!fileref.empty()) {
    size_t sp = fileref.find(' ');
    if (sp == std::string::npos) return bad("bad file reference");
    b.fileRefSize = std::stoll(fileref.substr(0, sp));
    b.fileRefPath = fileref.substr(sp + 1);
  }
  return b;
}

Status writeExecutable(const std::string& runnerPath, const Bundle& b, const std::string& outPath) {
  std::ifstream in(runnerPath, std::ios::binary);
  if (!in) return Status(ErrorCode::Io, "cannot read the runner '" + runnerPath + "'");
  std::vector<uint8_t> runner((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A runner that already carries a bundle is cut back to its own bytes.
  if (runner.size() >= sizeof(Trailer)) {
    Trailer t;
    std::memcpy(&t, runner.data() + runner.size() - sizeof t, sizeof t);
    if (std::memcmp(t.magic, kTrailerMagic, 8) == 0 && t.payloadOffset <= runner.size())
      runner.resize(size_t(t.payloadOffset));
  }
  std::vector<uint8_t> payload = serializeBundle(b);
  Trailer t;
  std::memcpy(t.magic, kTrailerMagic, 8);
  t.payloadOffset = runner.size();
  t.payloadSize = payload.size();
  t.reserved = 0;

  std::string tmp = outPath + ".tmp" + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status(ErrorCode::Io, "cannot write '" + outPath + "': " + std::strerror(errno));
  bool ok = std::fwrite(runner.data(), 1, runner.size(), f) == runner.size() &&
            std::fwrite(payload.data(), 1, payload.size(), f) == payload.size() &&
            std::fwrite(&t, 1, sizeof t, f) == sizeof t;
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

Expected<Bundle> readBundleFromExecutable(const std::string& exePath) {
  FILE* f = std::fopen(exePath.c_str(), "rb");
  if (!f) return Status(ErrorCode::Io, "cannot open '" + exePath + "'");
  std::unique_ptr<FILE, int (*)(FILE*)> guard(f, &std::fclose);
  if (std::fseek(f, 0, SEEK_END) != 0) return Status(ErrorCode::Io, "cannot seek '" + exePath + "'");
  long size = std::ftell(f);
  Trailer t;
  if (size < long(sizeof t) || std::fseek(f, size - long(sizeof t), SEEK_SET) != 0 ||
      std::fread(&t, 1, sizeof t, f) != sizeof t || std::memcmp(t.magic, kTrailerMagic, 8) != 0)
    return Status(ErrorCode::InvalidModel,
                  "'" + exePath + "' carries no model: it is the bare runner. Make a training "
                  "executable with: hgpc compile MODEL.onnx -o EXE");
  if (t.payloadOffset + t.payloadSize + sizeof t != uint64_t(size))
    return bad("the trailer does not match the file size (truncated executable?)");
  std::vector<uint8_t> payload(size_t(t.payloadSize));
  if (std::fseek(f, long(t.payloadOffset), SEEK_SET) != 0 ||
      std::fread(payload.data(), 1, payload.size(), f) != payload.size())
    return Status(ErrorCode::Io, "cannot read the bundle of '" + exePath + "'");
  return parseBundle(payload.data(), payload.size());
}

} // namespace hgp
