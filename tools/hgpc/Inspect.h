// Inspect.h - `hgpc inspect`: a model summary for people choosing what to train.
#pragma once

#include "runtime/support/Status.h"

#include <ostream>
#include <string>

namespace hgp {

/// Prints inputs, outputs, parameter count, an op histogram and per-layer output shapes and
/// FLOPs of the imported forward graph.
Status inspectModel(const std::string& path, int64_t batch, std::ostream& os);

} // namespace hgp
