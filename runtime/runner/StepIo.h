// StepIo.h - what crosses between the runner and the backend around a training run, apart from
// the steps themselves: a batch handed to the plan's input bindings, the host-side scoring of an
// evaluation batch that is only partly real, and the trained model written back as ONNX.
//
// Trainer.cpp drives the run; these are the pieces of it that know the plan's binding names and
// the bundle's save template, so that the run loop reads as a loop.
#pragma once

#include "runtime/Backend.h"
#include "runtime/bundle/Bundle.h"
#include "runtime/runner/BatchLoader.h"

#include <string>

namespace hgp {

/// Hands a batch to the backend: written for the coming run, or prefetched for the one after
/// (Backend::prefetch). A --pixels u8 plan (`pixels`) takes the 8-bit pixels and the flip flags
/// ("input", "input.flip"); others the float samples. The labels go to "labels".
Status feedBatch(Backend& backend, const Plan& plan, const Batch& b, bool pixels, bool prefetch);

/// Scores `rows` rows of logits [rows, classes] against their labels on the host, as the plan's
/// eval program does on the device: adds each row's cross-entropy (log-sum-exp in double) to
/// `lossSum` and 1 to `correct` when the largest logit (the first of equals) is the label's.
/// The runner uses it for the padded last batch of an evaluation, whose padding rows must not
/// count.
void scoreRows(const float* logits, int64_t rows, int64_t classes, const int64_t* labels,
               double& lossSum, double& correct);

/// Writes the bundle's save template with the trained tensors (read from `backend`) spliced in,
/// streaming to `path`.tmp, which is synced and renamed over `path` once complete, so that an
/// interrupted write never leaves a half model under the final name.
Status saveTrainedOnnx(const MappedBundle& bundle, const Plan& plan, Backend& backend,
                       const std::string& path);

} // namespace hgp
