// OnnxLoaderFuzzer.cpp - libFuzzer target for the ONNX loader.
//
// Feeds arbitrary bytes to importOnnxBytes with no model folder (so external data is refused) and
// batch 1. The loader must never crash, hang or allocate without bound; whatever it accepts must
// be a graph that verifies and prints. Built by tests/fuzz/CMakeLists.txt with clang,
// AddressSanitizer and UndefinedBehaviorSanitizer; tests/fuzz/smoke.sh runs it.
#include "compiler/ir/Printer.h"
#include "frontends/onnx/OnnxImporter.h"

#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hgp::OnnxImportOptions options;
  options.batch = 1;
  auto r = hgp::importOnnxBytes(std::span<const uint8_t>(data, size), "", options);
  if (!r) {
    if (r.status().code() != hgp::ErrorCode::InvalidModel) {
      std::fprintf(stderr, "unexpected error code: %s\n", r.status().toString().c_str());
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
