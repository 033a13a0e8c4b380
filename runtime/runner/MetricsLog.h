// MetricsLog.h - `--metrics OUT.jsonl`: one JSON object per line.
//
//   {"step": 12, "epoch": 0, "loss": 0.731, "lr": 0.01, "images_per_s": 5210.4, "ok": true}
//   {"eval": true, "step": 938, "epoch": 0, "loss": 0.412, "accuracy": 0.8534}
//
// Non-finite numbers are written as null, which keeps every line valid JSON. Each line is
// flushed, so a crashed run keeps what it logged.
#pragma once

#include "runtime/support/Status.h"

#include <cstdio>
#include <memory>
#include <string>

namespace hgp {

class MetricsLog {
public:
  static Expected<std::unique_ptr<MetricsLog>> open(const std::string& path);
  ~MetricsLog();
  void step(int64_t step, int64_t epoch, double loss, double lr, double imagesPerSecond, bool ok);
  void eval(int64_t step, int64_t epoch, double loss, double accuracy);

private:
  explicit MetricsLog(FILE* f) : f_(f) {}
  FILE* f_;
};

} // namespace hgp
