// TrainGraphNames.h - the names the training passes give the values the runner looks for.
//
// The plan binds these (compiler/Pipeline.cpp), and the runner finds them through the
// bindings, so the names only need to be unique within the graph.
#pragma once

namespace hgp::names {

inline constexpr const char* kLabels = "labels";
inline constexpr const char* kLoss = "loss";
inline constexpr const char* kCorrect = "correct";
inline constexpr const char* kIter = "iter";
inline constexpr const char* kOptStep = "opt_step";
inline constexpr const char* kLr = "lr";
inline constexpr const char* kOk = "ok";
inline constexpr const char* kMetrics = "metrics";
/// fp16 loss scaling (passes/MixedPrecision.cpp): the scale the loss gradient starts from, and the
/// count of finite steps in a row since it last changed.
inline constexpr const char* kLossScale = "loss_scale";
inline constexpr const char* kLossScaleGood = "loss_scale.good_steps";

} // namespace hgp::names
