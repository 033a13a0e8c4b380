// PlanEmitter.h - lowers IR graphs to the runtime's plan.
//
// Each graph becomes one program. Graph-level values (inputs, parameters, states, constants)
// with the same name across graphs become one persistent plan tensor, so a "train" and an
// "eval" program share weights. Node results are placed in the transient arena by the memory
// plan (passes/MemoryPlan.h); each carry's result takes its state's storage, which requires the
// producing op to update that state in place (inplaceInputFor) after every other read of it.
#pragma once

#include "compiler/ir/Graph.h"
#include "runtime/plan/Plan.h"

#include <map>
#include <string>
#include <vector>

namespace hgp {

struct ProgramSource {
  std::string name;
  const Graph* graph;
};

struct EmitOptions {
  std::string modelName;
  AttrMap meta;
  /// Byte offset in the bundle's ONNX template of each ONNX initializer, by initializer name.
  /// Parameters, states and constants whose data names an initializer found here start from the
  /// template; other data goes to the constant blob.
  std::map<std::string, int64_t> templateOffsets;
  /// Plan binding name -> value name (looked up in the graphs, first match wins).
  std::map<std::string, std::string> bindings;
};

struct EmittedPlan {
  Plan plan;
  /// Bytes for InitKind::Const tensors.
  std::vector<uint8_t> consts;
};

Expected<EmittedPlan> emitPlan(const std::vector<ProgramSource>& programs,
                               const EmitOptions& options);

} // namespace hgp
