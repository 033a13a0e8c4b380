#include "runtime/plan/InitialValues.h"

#include <cstring>

namespace hgp {

Status initialBytes(const PlanTensor& t, const InitData& data, std::vector<uint8_t>& out) {
  out.clear();
  switch (t.init) {
  case InitKind::None:
  case InitKind::Zero:
    return Status::ok();
  case InitKind::Fill: {
    out.resize(size_t(t.bytes()));
    for (int64_t e = 0; e < t.type.numElements(); ++e) {
      if (t.type.dtype == DType::F32) {
        float v = float(t.fillValue);
        std::memcpy(out.data() + 4 * e, &v, 4);
      } else if (t.type.dtype == DType::I64) {
        int64_t v = int64_t(t.fillValue);
        std::memcpy(out.data() + 8 * e, &v, 8);
      } else {
        out.clear();
        return Status(ErrorCode::Internal, "fill of " + std::string(dtypeName(t.type.dtype)) +
                                               " tensor '" + t.name + "' is not supported");
      }
    }
    return Status::ok();
  }
  case InitKind::Data:
  case InitKind::File: {
    std::span<const uint8_t> src = t.init == InitKind::Data ? data.data : data.file;
    if (t.dataOffset < 0 || size_t(t.dataOffset) + size_t(t.bytes()) > src.size())
      return Status(ErrorCode::InvalidModel,
                    "initial value of '" + t.name + "' lies outside the bundled data");
    out.assign(src.begin() + t.dataOffset, src.begin() + t.dataOffset + t.bytes());
    return Status::ok();
  }
  }
  return Status::ok();
}

} // namespace hgp
