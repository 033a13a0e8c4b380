#include "runtime/runner/StepIo.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace hgp {

Status feedBatch(Backend& backend, const Plan& plan, const Batch& b, bool pixels, bool prefetch) {
  auto put = [&](int binding, const void* src) {
    return prefetch ? backend.prefetch(binding, src) : backend.write(binding, src);
  };
  HGP_TRY(put(plan.binding("input"), pixels ? static_cast<const void*>(b.pixels.data())
                                            : static_cast<const void*>(b.images.data())));
  if (pixels) HGP_TRY(put(plan.binding("input.flip"), b.flips.data()));
  return put(plan.binding("labels"), b.labels.data());
}

void scoreRows(const float* logits, int64_t rows, int64_t classes, const int64_t* labels,
               double& lossSum, double& correct) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * classes;
    int64_t best = 0;
    double mx = row[0];
    for (int64_t c = 1; c < classes; ++c)
      if (row[c] > row[best]) best = c;
    for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, double(row[c]));
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(double(row[c]) - mx);
    lossSum += std::log(sum) + mx - double(row[labels[r]]);
    correct += best == labels[r];
  }
}

Status saveTrainedOnnx(const MappedBundle& bundle, const Plan& plan, Backend& backend,
                       const std::string& path) {
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status(ErrorCode::Io, "cannot write '" + path + "': " + std::strerror(errno));
  bool ok = true;
  auto put = [&](const uint8_t* p, size_t n) { ok = ok && std::fwrite(p, 1, n, f) == n; };
  size_t from = 0;
  std::vector<uint8_t> tensor;
  Status st;
  for (const SpliceEntry& s : bundle.splices) {
    put(bundle.saveTemplate.data() + from, size_t(s.offset) - from);
    int idx = plan.findTensor(s.tensor);
    if (idx < 0 || plan.tensors[size_t(idx)].bytes() != s.bytes) {
      st = Status(ErrorCode::Internal, "the save template names unknown tensor '" + s.tensor + "'");
      break;
    }
    tensor.resize(size_t(s.bytes));
    if (!(st = backend.read(idx, tensor.data()))) break;
    put(tensor.data(), tensor.size());
    from = size_t(s.offset);
  }
  if (st) put(bundle.saveTemplate.data() + from, bundle.saveTemplate.size() - from);
  ok = std::fflush(f) == 0 && ok;
  ok = fsync(fileno(f)) == 0 && ok;
  ok = std::fclose(f) == 0 && ok;
  if (st && (!ok || std::rename(tmp.c_str(), path.c_str()) != 0))
    st = Status(ErrorCode::Io, "cannot write '" + path + "': " + std::strerror(errno));
  if (!st) std::remove(tmp.c_str());
  return st;
}

} // namespace hgp
