// PlanEmitter.h - lowers IR graphs to the runtime's plan.
//
// Each graph becomes one program. Graph-level values (inputs, parameters, states, constants)
// with the same name across graphs become one persistent plan tensor, so a "train" and an
// "eval" program share weights. Node results are placed in the transient arena by the memory
// plan (compiler/analysis/MemoryPlan.h), views inside the value they alias, and a node whose
// results are all views (or a Concat written in place) becomes no step. Each carry's result
// takes its state's storage, which requires the producing op to update that state in place
// (InPlace in OpList.def) after every other read of it.
// A transient name that an earlier program already used is prefixed with "<program>/".
#pragma once

#include "ir/Graph.h"
#include "runtime/plan/Plan.h"

#include <map>
#include <string>
#include <vector>

namespace hgp {

struct ProgramSource {
  std::string name;
  const Graph* graph;
  /// Plan binding name -> name of a value in this graph.
  std::map<std::string, std::string> bindings;
};

struct EmitOptions {
  std::string modelName;
  AttrMap meta;
  /// With `hgpc compile --weights reference`: the byte offset of each ONNX initializer's
  /// raw data within the model file, by initializer name. Tensors whose data names an
  /// initializer found here are read from the file at start (InitKind::File); all other
  /// initial data is copied into the bundle's data section (InitKind::Data).
  std::map<std::string, int64_t> fileOffsets;
  /// Off: no two transient tensors share bytes (planMemory's `reuse`), views aside.
  bool reuseMemory = true;
  /// Off (`--no-views`): every Reshape, Slice, Split and Concat runs as a copy step; on, those
  /// that can be views (compiler/analysis/Views.h) run no step, and their tensors share bytes.
  bool views = true;
  /// On (`--strided-views`): channel ranges of a batch become pitched views where every step
  /// that touches them accepts one (compiler/analysis/Views.h); the Concats, Splits and Slices
  /// that stay copies say why in a `copy` attribute.
  bool stridedViews = false;
};

struct EmittedPlan {
  Plan plan;
  /// The data section: bytes for InitKind::Data tensors, each 64-byte aligned.
  std::vector<uint8_t> data;
};

Expected<EmittedPlan> emitPlan(const std::vector<ProgramSource>& programs,
                               const EmitOptions& options);

} // namespace hgp
