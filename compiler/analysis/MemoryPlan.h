// MemoryPlan.h - liveness-based placement of a graph's transient tensors in one arena.
//
// Every node result lives from the step that defines it to the last step that reads it (graph
// outputs to the end). Results whose lifetimes do not overlap may share bytes. Placement is
// greedy by size: the largest tensors are placed first, each at the lowest 64-byte-aligned
// offset that does not collide with an already-placed tensor of overlapping lifetime. Results
// that a carry writes back into persistent state take the state's storage instead, so they
// are not placed here. Views (compiler/analysis/Views.h) are not placed either: each tree of
// views is placed as its root, live from the first definition to the last read of any member,
// and every member lies at its offset inside the root.
#pragma once

#include "compiler/analysis/Views.h"
#include "ir/Graph.h"

#include <map>

namespace hgp {

struct MemoryPlan {
  /// Offset of each placed value within the transient arena.
  std::map<const Value*, int64_t> offsets;
  /// The arena size: the peak of simultaneously live bytes, after alignment and fragmentation.
  int64_t arenaBytes = 0;
  /// The sum of all placed tensor sizes, for reporting the reuse the plan achieved.
  int64_t totalBytes = 0;
};

/// Alignment of every placement, in bytes.
constexpr int64_t kTensorAlignment = 64;

inline int64_t alignUp(int64_t v, int64_t a = kTensorAlignment) { return (v + a - 1) / a * a; }

/// Places every node result of `g` except those in `skip` (carry results, which alias state).
/// With `reuse` off every result gets bytes of its own (`hgpc compile --no-buffer-reuse`: every
/// intermediate survives the step, for comparing backends tensor by tensor), except that views
/// still share their root's. `views` (none when null) must have been found with `skip` unplaced.
MemoryPlan planMemory(const Graph& g, const std::vector<const Value*>& skip, bool reuse = true,
                      const ViewPlan* views = nullptr);

} // namespace hgp
