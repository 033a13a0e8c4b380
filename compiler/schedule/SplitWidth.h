// SplitWidth.h - the intra-layer split: how many sub-batches a convolution phase should run as,
// concurrently on separate streams.
//
// HGP4CNN splits a layer's batch k ways when its kernel leaves the GPU partly idle, so that k
// smaller kernels share the SMs. On an H200 with cuDNN 9 that rarely pays (the anchor study
// ../shared/anchors/h200_conv_split_vs_streams.json): a small-occupancy convolution is latency
// bound, and halving its batch halves neither its tiles' latency nor its launch cost. So the
// analyzer predicts the time of k concurrent sub-batch kernels with the sharing rule of
// KernelModel.h and splits only where that beats the whole batch by `minGain`.
#pragma once

#include "compiler/analysis/CostModel.h"

#include <vector>

namespace hgp {

/// The candidate widths.
inline constexpr int kSplitWidths[] = {1, 2, 4, 8};

/// Predicted seconds of a convolution phase (Conv, ConvBwdData, ConvBwdFilter) run as `k`
/// concurrent sub-batches; 0 when the batch does not divide by k or the step is not one.
double splitSeconds(const Target& t, const Plan& plan, const PlanStep& step, int k,
                    Precision precision, const CostCalibration& cal = {});

/// The width with the lowest predicted time, 1 unless it beats the whole batch by `minGain`.
int chooseSplitWidth(const Target& t, const Plan& plan, const PlanStep& step,
                     Precision precision, double minGain = 1.05,
                     const CostCalibration& cal = {});

} // namespace hgp
