// FusedProgram.h - the program a FusedElementwise step runs, shared by the compiler (the
// fuse-elementwise pass, the shape rule, the CUDA code generator) and the backends.
//
// A FusedElementwise step applies a chain of elementwise ops to N same-shape inputs and writes M
// same-shape results in one pass over memory. Its program is a list of instructions over
// numbered values: %0 .. %N-1 are the step's inputs, %N + k is the result of instruction k.
// Each instruction is one of the IR's elementwise ops with its operands and the dtype of the
// tensor the unfused op wrote, so the program says exactly where the unfused graph rounded:
// every value is computed in float32, and a value of a 16-bit dtype is rounded to nearest even
// at the point where the unfused op stored it (the same "store 16-bit, compute in float"
// contract as docs/precision.md). Fused and unfused therefore agree bit for bit.
//
// The program is stored in the step's attributes in a printable form:
//   program="Add bf16 %0 %1; Relu bf16 %2; LeakyRelu f32 %3 alpha=0.01"
//   results=[3, 2]            the values the step writes, in output order
//   kernel=fe0                (CUDA) the generated kernel in the plan's kernel table
// Float attributes (alpha, beta, min, max) are printed as the float32 the op uses, exactly.
//
// Activations (Sigmoid, Tanh, HardSigmoid, HardSwish, Erf, Exp, Log, Sqrt, Reciprocal) and their
// gradients are instructions too, so SiLU (x * sigmoid(x)), HardSwish and the squeeze-excitation
// gates fuse. Each is computed with the unfused CPU executor's float formula (evalFusedInstr);
// the generated CUDA code uses the unfused CUDA executor's functions (expf, tanhf, erff, logf),
// which are not glibc's, so CUDA and CPU agree within those functions' ulp bounds, not bit for
// bit (docs/fusion.md, "Numerics").
//
// Gelu and GeluBwd (ConvNeXt) carry their form, approximate=none (the erf form) or tanh, and
// GlobalAveragePoolBwd its spread count=H*W: it reads dY[N,C,1,1] as a broadcast input and
// divides by the count, so the pooling's gradient (every squeeze-excitation block's) joins the
// program that adds it to the gated gradient instead of being written at full size.
//
// Broadcast inputs (squeeze-excitation's Mul of [N,C,H,W] by a [N,C,1,1] gate, and its
// backward): an input whose shape is the result shape with one run of dims after the first set
// to 1 is read by element (i / bk) * k + i % k for result element i (FusedOperandMap), where k is
// the product of the dims after the run and bk that times the run's. [N,C,1,1] against
// [N,C,H,W] is bk = H*W, k = 1; channels-last [N,1,1,C] against [N,H,W,C] is bk = H*W*C, k = C.
// Such an input keeps the batch dim, so a batch slice of the step reads the slice of the gate.
// Per-channel inputs broadcast along the batch too, as numpy does (a lower rank is padded with
// leading 1s): a bias [C] against channels-last [N,H,W,C] is element i % C, and ConvNeXt's layer
// scale [C,1,1] ([1,C,1,1]) against [N,C,H,W] element (i / (H*W)) % C; in general
// ((i / bk) % m) * k + i % k, m the product of the kept dims between a leading run of 1s and the
// inner run. Batch slicing leaves a step with such an input whole (it has no batch rows).
// Only instructions of ops marked FusedBroadcast (the numpy-broadcasting binary ops and Sum) may
// read such an input, as their unfused form did.
//
// Dropout and DropoutBwd (the "dropout epilogue" of a classifier's Relu, and the start of its
// gradient) are members too. Their mask is counter-based (runtime/cuda/RandomOps.cu): a pure
// function of (seed, key, the iteration counter, the element's flat index), so a fused kernel
// recomputes exactly the unfused op's mask. The iteration counter is the one operand that is not
// an element-wise tensor: an i64 scalar input of the step, read once per thread on the device so
// that a replayed CUDA graph draws a new mask every step. The instruction names it as its second
// operand and carries the op's attributes, the ratio printed so that it reads back as the same
// double:
//   program="Relu bf16 %0; Dropout bf16 %2 %1 ratio=0.5 seed=42 key=7"
// An i64 input may be read only as that counter operand, and the counter operand must be an i64
// input: nothing else in a program is not a float value of the result's shape.
#pragma once

#include "runtime/plan/Attr.h"
#include "runtime/plan/OpKind.h"
#include "runtime/plan/Types.h"

#include <string>
#include <vector>

namespace hgp {

struct FusedInstr {
  OpKind op = OpKind::Add;
  DType dtype = DType::F32; ///< The dtype of the result (Cast: its `to`).
  std::vector<int> args;    ///< Value numbers.
  float alpha = 0;          ///< The ops marked FusedAlpha: LeakyRelu(Bwd), Scale, HardSigmoid(Bwd).
  float beta = 0;           ///< The ops marked FusedBeta: HardSigmoid(Bwd).
  bool hasLo = false, hasHi = false; ///< Clip, ClipBwd: which bounds are present.
  float lo = 0, hi = 0;
  bool tanhForm = false;             ///< FusedApprox (Gelu, GeluBwd): approximate="tanh".
  int64_t count = 0;                 ///< FusedCount (GlobalAveragePoolBwd): H * W, >= 1.
  double ratio = 0;                  ///< Dropout, DropoutBwd: the drop probability, in [0, 1).
  int64_t seed = 0, key = 0;         ///< Dropout, DropoutBwd: the RNG's seed and site key.
};

/// Dropout's constants, derived from the instruction's attributes exactly as the unfused executors
/// derive them: element i is kept when its uniform draw is >= threshold = float(ratio), and then
/// multiplied by scale = float(1 / (1 - ratio)); philoxKey = seed ^ (key * 0x9E3779B97F4A7C15)
/// (its low and high words are Philox's two key words). With ratio 0 the op is the identity.
struct FusedDropout {
  float threshold = 0, scale = 1;
  uint64_t philoxKey = 0;
};
FusedDropout fusedDropout(const FusedInstr& ins);

/// Whether `op` is Dropout or DropoutBwd: an instruction whose second operand is the iteration
/// counter (an i64 scalar input) rather than an element-wise value.
bool isFusedDropout(OpKind op);

struct FusedProgram {
  int numInputs = 0;
  std::vector<FusedInstr> instrs;
  std::vector<int> results;

  int numValues() const { return numInputs + int(instrs.size()); }
  /// The text of the `program` attribute.
  std::string text() const;
  /// Writes `program` and `results` into `attrs`.
  void store(AttrMap& attrs) const;
};

/// How a step input is read for result element i: element (i / bk) * k + i % k, wrapped as
/// ((i / bk) % m) * k + i % k when the input also broadcasts along leading dims (m > 0; the batch
/// among them), or element i itself when bk == 0 (an input of the result's shape).
struct FusedOperandMap {
  int64_t bk = 0, k = 1, m = 0;
  bool broadcast() const { return bk != 0; }
  int64_t index(int64_t i) const {
    if (!bk) return i;
    int64_t q = i / bk;
    return (m ? q % m : q) * k + i % k;
  }
};

/// The map of an input of shape `in` for results of shape `out`: the identity when the shapes are
/// equal; a broadcast when `in` (padded with leading 1s to out's rank, as numpy does) is `out`
/// with one run of dims set to 1, or with a leading run (from the batch dim on) and one more
/// run after it; an error otherwise.
Expected<FusedOperandMap> fusedOperandMap(const Shape& in, const Shape& out);

/// Reads the program of a step with `numInputs` inputs; checks value numbers (operands defined
/// before use), operand counts, and the result list. Dtypes are checked by checkFusedTypes.
Expected<FusedProgram> parseFusedProgram(const AttrMap& attrs, int numInputs);

/// The dtype of every value, given the inputs' dtypes; an error when an instruction's operands do
/// not have the dtype the op requires (all equal to the result's, except for Cast; a dropout's
/// counter operand an i64 input), when an i64 input is anything but a dropout's counter, or when
/// a result is a counter.
Expected<std::vector<DType>> checkFusedTypes(const FusedProgram& p, const std::vector<DType>& in);

/// Checks that every broadcast input (maps[k].broadcast()) is read only by instructions of ops
/// marked FusedBroadcast and is no result of the step.
Status checkFusedBroadcasts(const FusedProgram& p, const std::vector<FusedOperandMap>& maps);

/// Instruction `ins` over float operands, in float32, exactly as the unfused CPU executor
/// computes it (before any rounding to the result's dtype). For Dropout and DropoutBwd, args[1]
/// is not the counter but the element's uniform draw in [0, 1) (cpu::dropoutUniform of the
/// element's flat index and the counter's value).
float evalFusedInstr(const FusedInstr& ins, const float* args);

/// Elements per thread and iteration in a generated kernel's vector path, from the dtypes of the
/// step's inputs and results: 8 when all float ones are 16-bit (16-byte accesses), else 4. The
/// i64 counter is read once per thread, not per element, so it does not count.
int fusedVectorWidth(const std::vector<DType>& tensorTypes);

/// A short name for the op chain, "Add+Relu", for plan reports.
std::string fusedSummary(const FusedProgram& p);

} // namespace hgp
