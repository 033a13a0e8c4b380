// Plan.h - the plan: what the compiler hands the runtime.
//
// A plan is a table of tensors with their storage, plus named programs, each a list of steps in
// an order that respects every dependency. The runtime owns this schema (as IREE's runtime owns
// its flatbuffer schemas): the compiler writes it, the backends execute it, and neither side
// needs the other's code. docs/plan-format.md describes the text form, which is also the form a
// bundle carries, so that what the tests compare is exactly what the executable runs.
#pragma once

#include "runtime/plan/Attr.h"
#include "runtime/plan/OpKind.h"
#include "runtime/plan/Types.h"

#include <map>
#include <span>
#include <string>
#include <vector>

namespace hgp {

/// Where a tensor's bytes live. Persistent tensors (inputs, weights, state) keep their values
/// across steps; transient ones (activations, gradients, scratch) are placed by the memory plan
/// so that tensors with disjoint lifetimes share bytes.
enum class StorageClass : uint8_t { Persistent, Transient };

/// How a persistent tensor gets its first value.
enum class InitKind : uint8_t {
  None, ///< Written before use (inputs) or by the program itself.
  Zero, ///< Zero-filled.
  Fill, ///< Every element set to `fillValue`.
  Data, ///< Copied from the bundle's data section at byte `dataOffset`.
  File, ///< Copied from the model file the bundle references, at byte `dataOffset`
        ///< (hgpc compile --weights reference).
};

/// The bytes that InitKind::Data and InitKind::File offsets point into.
struct InitData {
  std::span<const uint8_t> data;
  std::span<const uint8_t> file;
};

/// Why a transient tensor lies inside another tensor's bytes (docs/plan-format.md, "Views"): the
/// memory plan made it a view, so that no step copies it. Batch slices (BatchSlicing.h) share
/// their parent's bytes too but are not marked: they are the same data, cut by rows.
enum class AliasKind : uint8_t {
  None,
  View, ///< A Reshape, Slice or Split result, read where its source's bytes lie (`view=`).
  Part, ///< A Concat operand, written by its producer into its slice of the result (`part=`).
};

struct PlanTensor {
  std::string name;
  TensorRole role = TensorRole::Activation;
  TensorType type;
  StorageClass storage = StorageClass::Transient;
  int64_t offset = 0; ///< Byte offset within its storage class's region.
  InitKind init = InitKind::None;
  double fillValue = 0;
  int64_t dataOffset = -1; ///< For InitKind::Data and InitKind::File.
  AliasKind alias = AliasKind::None;
  /// With an alias: the tensor whose bytes contain this one's (itself possibly a view).
  int aliasOf = -1;
  /// A pitched (strided) view: the tensor's row-major elements are stored in rows of `row`
  /// consecutive elements, each row `pitch` elements after the previous one, so that element i
  /// lies at (i / row) * pitch + i % row. It is a channel range of an NCHW tensor (row = the
  /// range's C * H * W, pitch = the whole tensor's, one row per sample) or of an NHWC one (row =
  /// the range's channels, pitch = the whole tensor's, one row per pixel). 0: dense. Only views
  /// are pitched, and only steps whose op accepts a pitched operand there (acceptsPitched) touch
  /// one (docs/plan-format.md, "Views").
  int64_t row = 0, pitch = 0;

  int64_t bytes() const { return type.bytes(); }
  bool pitched() const { return pitch != 0; }
  /// The bytes from the first element to one past the last: bytes() unless pitched.
  int64_t spanBytes() const {
    if (!pitched() || type.numElements() == 0) return bytes();
    return ((type.numElements() / row - 1) * pitch + row) * dtypeSize(type.dtype);
  }
};

/// Whether step operand `index` (a result when `output`) of op `op` may be a pitched tensor:
/// the op's HGP_PITCHED entry in OpList.def, evaluated on the step's attributes and operand
/// count. Both backends execute such steps; the memory plan makes a view pitched only where
/// every step that touches it says yes here.
bool acceptsPitched(OpKind op, const AttrMap& attrs, int numInputs, bool output, int index);

/// The most streams a program may use (a runtime resource bound: each is a stream with its own
/// library handles and scratch memory).
constexpr int kMaxPlanStreams = 16;

/// One op invocation. Inputs and outputs index Plan::tensors.
struct PlanStep {
  OpKind op = OpKind::Relu;
  AttrMap attrs;
  std::vector<int> inputs, outputs;
  std::string loc; ///< The source node's name, for errors and traces.
  int stream = 0;  ///< The stream it runs on (0 unless the scheduler spreads work).
  /// Earlier steps of the same program, on other streams, that this step waits for (through an
  /// event recorded after each of them). Together with stream order these are all of the
  /// step's dependencies; the scheduler keeps the fewest that imply the rest.
  std::vector<int> waits;
};

/// A named sequence of steps: "forward", "train" or "eval".
struct PlanProgram {
  std::string name;
  std::vector<PlanStep> steps;
};

/// Machine code a plan carries for its generated kernels (docs/fusion.md): one CUDA kernel per
/// distinct FusedElementwise program, compiled ahead of time by NVRTC for one SM architecture.
/// Steps name it with their `kernel` attribute. The text form keeps the source (for reading and
/// debugging) and the cubin in base64.
struct PlanKernel {
  std::string name;   ///< "fe0", "fe1", ...
  int arch = 0;       ///< Compute capability as one number: 90 for sm_90.
  std::string entry;  ///< The kernel's function name in the cubin.
  std::string source; ///< The CUDA C it was compiled from.
  std::vector<uint8_t> cubin;
};

struct Plan {
  static constexpr int kVersion = 1;

  std::string modelName;
  /// Compile-time settings the runner reports or needs (batch, loss, optimizer, ...).
  AttrMap meta;
  std::vector<PlanTensor> tensors;
  std::vector<PlanProgram> programs;
  /// Generated kernels, by name (empty when the plan has no fused steps or was made without them).
  std::vector<PlanKernel> kernels;
  /// Named tensors the runner uses: "input", "labels", "loss", "logits", "metrics", "iter",
  /// "output.0", ... Sorted by name.
  std::map<std::string, int> bindings;
  /// Sizes of the two storage regions, in bytes.
  int64_t persistentBytes = 0, transientBytes = 0;

  /// The tensor index for a name, or -1.
  int findTensor(const std::string& name) const;
  /// The program with that name, or nullptr.
  const PlanProgram* findProgram(const std::string& name) const;
  /// The kernel with that name, or nullptr.
  const PlanKernel* findKernel(const std::string& name) const;
  /// The tensor bound to `name`, or -1.
  int binding(const std::string& name) const;
  /// Checks the structural invariants: indices in range, operand counts within the op table,
  /// storage inside its region, 64-byte alignment, bindings valid, in-place steps aliased, views
  /// inside the tensor they alias.
  Status validate() const;
};


/// Prints the stable text form.
std::string printPlan(const Plan& plan);
/// Parses the text form; errors carry line and column.
Expected<Plan> parsePlan(std::string_view text, const std::string& sourceName = "<plan>");

} // namespace hgp
