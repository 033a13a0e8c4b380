#include "runtime/plan/Precision.h"

namespace hgp {

const char* precisionName(Precision p) {
  switch (p) {
  case Precision::FP32:
    return "fp32";
  case Precision::TF32:
    return "tf32";
  case Precision::BF16:
    return "bf16";
  case Precision::FP16:
    return "fp16";
  }
  return "?";
}

Expected<Precision> parsePrecision(std::string_view s) {
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::FP16})
    if (s == precisionName(p)) return p;
  return Status(ErrorCode::Usage,
                "--precision must be fp32, tf32, bf16 or fp16, not '" + std::string(s) + "'");
}

Expected<Precision> planPrecision(const AttrMap& meta) {
  if (!meta.has("precision")) return Precision::TF32;
  return parsePrecision(meta.getString("precision"));
}

DType activationDType(Precision p) {
  return p == Precision::BF16 ? DType::BF16 : p == Precision::FP16 ? DType::F16 : DType::F32;
}

bool runsOnTensorCores(Precision p, int smArch) {
  switch (p) {
  case Precision::FP32:
    return false;
  case Precision::FP16:
    return smArch >= 70;
  case Precision::TF32:
  case Precision::BF16:
    return smArch >= 80;
  }
  return false;
}

} // namespace hgp
