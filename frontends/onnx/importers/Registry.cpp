// The importer registry: OnnxOps.def turned into a lookup table.
#include "frontends/onnx/importers/Importers.h"

#include <cstring>

namespace hgp {

namespace {
const OnnxOpEntry kOps[] = {
#define ONNX_OP(OpType, Family, MinIn, MaxIn, MinOut, MaxOut, Static)                              \
  {#OpType, import##OpType, MinIn, MaxIn, MinOut, MaxOut, Static},
#include "frontends/onnx/importers/OnnxOps.def"
};
} // namespace

const OnnxOpEntry* findOnnxOp(const std::string& opType) {
  for (const OnnxOpEntry& e : kOps)
    if (opType == e.opType) return &e;
  return nullptr;
}

bool isStaticOperand(const std::string& opType, int index) {
  const OnnxOpEntry* e = findOnnxOp(opType);
  return e && index >= 0 && index < 32 && (e->staticInputs >> index) & 1;
}

} // namespace hgp
