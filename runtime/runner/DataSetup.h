// DataSetup.h - what the trainer tells the data sets about image data, and the class list it
// writes beside the trained model (docs/data.md).
#pragma once

#include "runtime/plan/Plan.h"
#include "runtime/runner/Dataset.h"
#include "runtime/runner/Trainer.h"

namespace hgp {

/// Fills the image parts of `req` from the run's flags: the resolved augmentation, the bad-image
/// policy and the rank split. For a --pixels u8 plan (`pixels`) the normalization is compiled
/// in: a --normalize that differs from the plan's is a usage error, and the data sets then
/// normalize nothing. Otherwise --augment imagenet brings ImageNet's mean and std unless
/// --normalize gives others.
Status imageRequirements(const RunOptions& opt, const Plan& plan, bool pixels, int rank, int ranks,
                         DatasetRequirements& req);

/// Writes the training data's class names (image folders have them) beside the saved model, one
/// a line in label order: trained.onnx -> trained.classes.txt. Data without names writes nothing.
Status saveClassNames(const Dataset& train, const std::string& model);

} // namespace hgp
