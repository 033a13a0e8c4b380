#include "runtime/plan/OpKind.h"

namespace hgp {

namespace {
constexpr bool Diff = true, NoDiff = false;
using namespace opprops;
constexpr OpTraits kTraits[] = {
#define HGP_OP(Name, Family, MinIn, MaxIn, MinOut, MaxOut, Grad, Props)                            \
  {#Name, #Family, MinIn, MaxIn, MinOut, MaxOut, Grad, Props},
#include "runtime/plan/OpList.def"
};
} // namespace

const OpTraits& opTraits(OpKind op) { return kTraits[int(op)]; }

Expected<OpKind> parseOpKind(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i)
    if (name == kTraits[i].name) return OpKind(i);
  return Status(ErrorCode::InvalidModel, "unknown op '" + std::string(name) + "'");
}

} // namespace hgp
