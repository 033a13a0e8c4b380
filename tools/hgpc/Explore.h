// Explore.h - `hgpc compare`, `hgpc explore` and `hgpc compile --batch auto`: the questions asked
// before training (which model, which batch and precision), answered by compiling each
// configuration in-process and reading the analyses (Report.h); docs/explore.md.
#pragma once

#include "tools/hgpc/Report.h"

#include <ostream>
#include <string>
#include <vector>

namespace hgp {

struct ExploreArgs {
  /// The models (compare: two or more; explore: one). `base` carries the batch, precision,
  /// training, fusion and slicing options every configuration shares.
  std::vector<std::string> models;
  CompileOptions base;
  std::string target;         ///< Empty: the local GPU when hgpc knows it, else h200.
  std::string batches;        ///< explore: "32,64,..." or "auto"; empty: 32,64,128,256.
  std::string precisions;     ///< explore: "tf32,bf16"; empty: the base precision.
  double memoryLimitGiB = 0;  ///< 0: the target's memory (with --measure: the device's free memory).
  bool measure = false;
  int measureSteps = 48;
  std::string runner;         ///< The prebuilt runner, for --measure.
  std::string html;           ///< Write the HTML page here.
  bool json = false;          ///< JSON on stdout instead of the table.
};

/// `hgpc compare`: every model at the base configuration, side by side.
Status runCompare(const ExploreArgs& a, std::ostream& os);

/// `hgpc explore`: one model over batches and precisions.
Status runExplore(const ExploreArgs& a, std::ostream& os);

/// `hgpc compile --batch auto`: the largest batch whose plan fits the target's memory (or
/// `memoryLimitGiB`), with a one-line explanation on `log`.
Expected<int64_t> autoBatch(const CompileOptions& base, double memoryLimitGiB, std::ostream& log);

} // namespace hgp
