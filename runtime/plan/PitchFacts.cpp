//===- PitchFacts.cpp - which step operands may be pitched views (OpList.def, HGP_PITCHED) --------===//
#include "runtime/plan/Plan.h"

namespace hgp {

bool acceptsPitched(OpKind op, const AttrMap& attrs, int numInputs, bool output, int index) {
  [[maybe_unused]] bool nhwc = attrs.getString("layout") == "nhwc";
  [[maybe_unused]] int nin = numInputs;
  if (index < 0 || index >= 32) return false;
  switch (op) {
#define HGP_OP(...)
#define HGP_PITCHED(Name, InMask, OutMask, When)                                                    \
  case OpKind::Name:                                                                               \
    return ((output ? (OutMask) : (InMask)) >> index & 1) && (When);
#include "runtime/plan/OpList.def"
  default: return false;
  }
}

} // namespace hgp
