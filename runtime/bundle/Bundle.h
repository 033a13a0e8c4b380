// Bundle.h - what a generated executable carries: the plan, initial data and the save template.
//
// `hgpc compile -o EXE` writes EXE as the prebuilt runner's bytes followed by a bundle payload
// and a fixed-size trailer. At start the runner reads its own file (/proc/self/exe), finds the
// trailer at the end, and loads the payload. The payload is a small section table followed by
// 64-byte-aligned sections:
//
//   plan      the plan in its text form (runtime/plan/Plan.h)
//   data      initial bytes of InitKind::Data tensors
//   template  the model as ONNX, in inference form, with the bytes of every trained tensor cut
//             out; --save splices the current values back in (see SpliceEntry)
//   splices   where those cuts are, as text lines "<offset> <bytes> <tensor name>"
//   fileref   with --weights reference: the referenced model file, as text "<size> <path>"
//
// The runtime owns this format; the compiler writes it with writeExecutable. Neither side
// needs ONNX to read or write it.
#pragma once

#include "runtime/support/Status.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hgp {

/// One cut in the save template: at `offset`, `bytes` bytes of tensor `tensor` belong.
struct SpliceEntry {
  int64_t offset = 0;
  int64_t bytes = 0;
  std::string tensor;
};

struct Bundle {
  std::string planText;
  std::vector<uint8_t> data;
  std::vector<uint8_t> saveTemplate;
  std::vector<SpliceEntry> splices; ///< Sorted by offset.
  /// The model file that InitKind::File offsets point into, and its size when compiled; empty
  /// when weights are embedded.
  std::string fileRefPath;
  int64_t fileRefSize = 0;
};

/// A bundle as an executable reads it: its file is mapped, not copied, so a 500 MB model starts
/// in the time the page cache takes, and the large sections are views into the mapping.
class MappedBundle {
public:
  MappedBundle() = default;
  MappedBundle(MappedBundle&& o) noexcept { *this = std::move(o); }
  MappedBundle& operator=(MappedBundle&& o) noexcept;
  ~MappedBundle();

  std::string planText;
  std::span<const uint8_t> data, saveTemplate;
  std::vector<SpliceEntry> splices;
  std::string fileRefPath;
  int64_t fileRefSize = 0;

private:
  friend Expected<MappedBundle> readBundleFromExecutable(const std::string& exePath);
  void* map_ = nullptr;
  size_t mapSize_ = 0;
};

/// Writes `runnerPath`'s bytes, the bundle and the trailer to `outPath`, streaming the sections
/// (through a temporary file and a rename, so a failed compile never leaves a half-written
/// executable), mode 0755.
Status writeExecutable(const std::string& runnerPath, const Bundle& b, const std::string& outPath);

/// Maps the bundle appended to an executable; ErrorCode::InvalidModel when it has none.
Expected<MappedBundle> readBundleFromExecutable(const std::string& exePath);

} // namespace hgp
