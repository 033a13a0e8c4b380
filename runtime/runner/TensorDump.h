// TensorDump.h - `--dump-tensors DIR`: every tensor of the plan, as it stands after the run's
// last step, written to a folder for comparing two runs value by value.
//
// Training parity against PyTorch says that a model's updates are off, not where. Two runs of
// one executable, on the CPU backend and on CUDA, start from the same weights and read the same
// batch; their tensors after one step can be compared in the order the training program writes
// them, and the first one whose difference jumps above float32 rounding names the executor that
// is wrong (tests/parity/step_diff.py does that). For intermediates to survive the step, compile
// with `hgpc compile --no-buffer-reuse`; otherwise transient tensors share bytes and a dump shows
// whichever tensor wrote them last.
//
// The folder gets index.tsv, one line per plan tensor that has bytes of its own or is a dense
// view:
//   id  name  dtype  shape  role  step  op  inputs  file
// where `step` is the index in the "train" program of the first step that writes the tensor
// (-1: none, e.g. a parameter's initial value or an input), `op` that step's op and `inputs`
// its operands' ids, and `file` the raw bytes' name (t<id>.bin, the tensor's dense row-major elements in its dtype). Pitched
// views are left out (their elements are not contiguous; their parent is dumped).
#pragma once

#include "runtime/Backend.h"
#include "runtime/plan/Plan.h"

#include <string>

namespace hgp {

/// Writes the tensors of `plan` as `backend` holds them now into `dir` (which must exist and be
/// writable: the runner checks --dump-tensors before the first step).
Status dumpTensors(const Plan& plan, Backend& backend, const std::string& dir);

} // namespace hgp
