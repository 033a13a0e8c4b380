#include "runtime/runner/Checkpoint.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace hgp {

namespace {
constexpr char kMagic[8] = {'H', 'G', 'P', 'C', 'C', 'K', 'P', 'T'};
constexpr uint64_t kVersion = 1;

void put64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(uint8_t(v >> (8 * i)));
}

bool isCheckpointed(const PlanTensor& t) {
  return t.role == TensorRole::Param || t.role == TensorRole::State;
}
} // namespace

uint64_t planFingerprint(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

Status writeFileAtomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Status(ErrorCode::Io, "cannot write '" + tmp + "': " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status(ErrorCode::Io, "cannot write '" + tmp + "': " + why);
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Status(ErrorCode::Io, "cannot write '" + path + "': " + why);
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

Status writeCheckpoint(const std::string& path, const Plan& plan, uint64_t fingerprint,
                       const CheckpointPosition& pos, Backend& backend) {
  std::vector<uint8_t> out(kMagic, kMagic + 8);
  put64(out, kVersion);
  put64(out, fingerprint);
  put64(out, uint64_t(pos.epoch));
  put64(out, uint64_t(pos.batch));
  put64(out, uint64_t(pos.step));
  uint64_t count = 0;
  for (const auto& t : plan.tensors) count += isCheckpointed(t);
  put64(out, count);
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const PlanTensor& t = plan.tensors[i];
    if (!isCheckpointed(t)) continue;
    put64(out, t.name.size());
    out.insert(out.end(), t.name.begin(), t.name.end());
    put64(out, uint64_t(t.bytes()));
    size_t at = out.size();
    out.resize(at + size_t(t.bytes()));
    HGP_TRY(backend.read(int(i), out.data() + at));
  }
  return writeFileAtomically(path, out);
}

Expected<CheckpointPosition> readCheckpoint(const std::string& path, const Plan& plan,
                                            uint64_t fingerprint, Backend& backend) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(ErrorCode::Io, "cannot open checkpoint '" + path + "'");
  std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t at = 0;
  auto bad = [&](const std::string& m) {
    return Status(ErrorCode::BadData, "checkpoint '" + path + "': " + m);
  };
  auto get64 = [&](uint64_t& v) {
    if (at + 8 > b.size()) return false;
    v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(b[at + size_t(i)]) << (8 * i);
    at += 8;
    return true;
  };
  uint64_t version, fp, epoch, batch, step, count;
  if (b.size() < 8 || std::memcmp(b.data(), kMagic, 8) != 0) return bad("not an hgpc checkpoint");
  at = 8;
  if (!get64(version) || version != kVersion) return bad("unsupported version");
  if (!get64(fp) || !get64(epoch) || !get64(batch) || !get64(step) || !get64(count))
    return bad("truncated header");
  if (fp != fingerprint)
    return bad("it belongs to a different compiled plan (model, batch or training options "
               "changed); resume with the executable that wrote it");
  for (uint64_t k = 0; k < count; ++k) {
    uint64_t len, bytes;
    if (!get64(len) || at + len > b.size()) return bad("truncated");
    std::string name(b.begin() + long(at), b.begin() + long(at + len));
    at += len;
    if (!get64(bytes) || at + bytes > b.size()) return bad("truncated");
    int idx = plan.findTensor(name);
    if (idx < 0 || uint64_t(plan.tensors[size_t(idx)].bytes()) != bytes)
      return bad("tensor '" + name + "' does not match the plan");
    HGP_TRY(backend.write(idx, b.data() + at));
    at += bytes;
  }
  return CheckpointPosition{int64_t(epoch), int64_t(batch), int64_t(step)};
}

} // namespace hgp
