// Clone.h - deep copies of IR graphs.
//
// The compiler builds the training and evaluation programs from the same imported forward
// graph; each pipeline transforms its own copy. Initial data is shared, not copied.
#pragma once

#include "ir/Graph.h"

#include <memory>

namespace hgp {

/// A copy of `g` with the same names, types, roles, attributes, order, outputs and carries.
Expected<std::unique_ptr<Graph>> cloneGraph(const Graph& g);

} // namespace hgp
