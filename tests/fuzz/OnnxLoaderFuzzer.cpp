// OnnxLoaderFuzzer.cpp - libFuzzer target for the ONNX loader.
//
// Feeds arbitrary bytes to importOnnxBytes with no model folder (so external data is refused) and
// batch 1. The loader must never crash, hang or allocate without bound; what it rejects gets one
// InvalidModel line, and what it accepts must be a graph that verifies and prints. Built by
// tests/fuzz/CMakeLists.txt with clang, AddressSanitizer and UndefinedBehaviorSanitizer;
// tests/fuzz/smoke.sh runs it.
#include "ir/Printer.h"
#include "frontends/onnx/OnnxImporter.h"

#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hgp::OnnxImportOptions options;
  options.batch = 1;
  auto r = hgp::importOnnxBytes(std::span<const uint8_t>(data, size), "", options);
  if (!r) {
    hgp::Status st = r.status();
    const std::string& m = st.message();
    if (st.code() != hgp::ErrorCode::InvalidModel || m.empty() ||
        m.find('\n') != std::string::npos || m.size() > 4096) {
      std::fprintf(stderr, "not one clear InvalidModel line: %s\n", st.toString().c_str());
      std::abort();
    }
    return 0;
  }
  hgp::Status v = hgp::verifyGraph(*r->graph);
  if (!v.isOk()) {
    std::fprintf(stderr, "an imported graph does not verify: %s\n", v.toString().c_str());
    std::abort();
  }
  (void)hgp::printGraph(*r->graph);
  return 0;
}
