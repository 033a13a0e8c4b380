// TrainFlags.h - the training flags (--loss, --optimizer, --lr, the schedule, --ranks, ...) as
// CLI11 options over a TrainOptions, so that `hgpc compile`, `hgpc plan` and `hgp-opt` spell
// and check them the same way.
#pragma once

#include "passes/Pass.h"

#include <CLI/CLI.hpp>

namespace hgp {

/// Adds every TrainOptions field to `cmd` as a flag that writes into `t`.
void addTrainingOptions(CLI::App* cmd, TrainOptions& t);

/// Adds `--precision` (fp32, tf32, bf16 or fp16), parsed into `p`; `help` says what it means to
/// the command.
void addPrecisionOption(CLI::App* cmd, Precision& p, const std::string& help);

} // namespace hgp
