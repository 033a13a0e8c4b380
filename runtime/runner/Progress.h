// Progress.h - what a person watching a run sees.
//
// On a terminal: one live line redrawn in place, with step, epoch, loss, images/s and ETA.
// Otherwise (logs, CI): a plain line every few seconds or percent. `--progress none` is silent.
// Messages (evaluation results, skipped steps) go through note(), which keeps the bar intact.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace hgp {

enum class ProgressMode { Auto, Bar, Plain, None };

class Progress {
public:
  Progress(ProgressMode mode, int64_t totalSteps);
  /// Called after each reported step.
  void update(int64_t step, int64_t epoch, double loss, double imagesPerSecond);
  /// Prints a message on its own line.
  void note(const std::string& message);
  /// Ends the live line.
  void finish();

private:
  ProgressMode mode_;
  int64_t total_;
  bool live_ = false;
  std::chrono::steady_clock::time_point start_, lastPrint_;
  int64_t lastPlainStep_ = -1;
};

} // namespace hgp
