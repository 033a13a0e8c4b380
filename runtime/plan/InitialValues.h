// InitialValues.h - the bytes a plan tensor starts with, for every backend.
//
// A plan says how each tensor is initialized (PlanTensor::init): not at all or zero (the backend
// zeroes its regions), a fill value, or bytes of the bundle's data section or of the model file
// it references. Both backends turn that into the same bytes here, so a plan starts from the same
// values wherever it runs; the CPU backend copies them into host memory, the CUDA backend onto the
// device.
#pragma once

#include "runtime/plan/Plan.h"

#include <vector>

namespace hgp {

/// Writes the initial bytes of `t` (t.bytes() of them) into `out`; leaves `out` empty for a
/// tensor that starts as zeros or is written before it is read (InitKind::None and Zero). An
/// InvalidModel error when the data lies outside `data`, an Internal one for a fill of a dtype
/// other than f32 and i64.
Status initialBytes(const PlanTensor& t, const InitData& data, std::vector<uint8_t>& out);

} // namespace hgp
