// Precision.h - the math mode a plan trains in: fp32, tf32, bf16 or fp16, as one typed value.
//
// `hgpc compile --precision` parses it once; the passes, the schedule analyses and the CUDA
// backend all read this enum rather than the string. The plan records it by name in its meta
// (`precision="tf32"`, docs/plan-format.md), and the runtime parses that name back with
// parsePrecision, so the spelling is defined here and nowhere else. docs/precision.md describes
// what each mode does.
#pragma once

#include "runtime/plan/Attr.h"
#include "runtime/plan/Types.h"

#include <string>
#include <string_view>

namespace hgp {

/// How convolutions and matrix products round, and what dtype activations are stored in.
enum class Precision : uint8_t {
  FP32, ///< float32 everywhere; tensor cores forbidden (no TF32 rounding).
  TF32, ///< float32 tensors; convolutions and GEMMs may round inputs to TF32 (PyTorch's default).
  BF16, ///< mixed precision: bf16 activations and gradients, float32 master weights and loss.
  FP16, ///< mixed precision: f16 activations and gradients, float32 master weights, loss scaling.
};

/// "fp32", "tf32", "bf16" or "fp16": the spelling of the flag and of the plan's meta.
const char* precisionName(Precision p);
/// Parses a spelling; a usage error (exit code 2) names the four that exist.
Expected<Precision> parsePrecision(std::string_view s);

/// The precision a plan was compiled for: its meta's `precision` (docs/plan-format.md). A plan
/// that records none (a hand-made test plan) is tf32, hgpc's default; a name this build does not
/// know is an error (a usage error, as parsePrecision's).
Expected<Precision> planPrecision(const AttrMap& meta);

/// The dtype of activations and their gradients: F32 for fp32 and tf32, else BF16 or F16.
DType activationDType(Precision p);
/// Whether the steps are 16-bit mixed precision (bf16 or fp16).
inline bool isMixedPrecision(Precision p) {
  return p == Precision::BF16 || p == Precision::FP16;
}
/// Whether convolutions and matrix products may use TF32 tensor cores for float32 inputs: every
/// mode but fp32 (in bf16 and fp16 this covers the float32 ops that remain).
inline bool allowsTf32(Precision p) {
  return p != Precision::FP32;
}
/// Whether the mode's convolutions run on the tensor cores of an sm_<smArch> GPU: fp16 from
/// Volta (sm70), bf16 and TF32 from Ampere (sm80), fp32 never.
bool runsOnTensorCores(Precision p, int smArch);

} // namespace hgp
