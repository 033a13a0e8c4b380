#include "runtime/plan/Types.h"

namespace hgp {

namespace {
struct DTypeInfo {
  DType t;
  const char* name;
  int64_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::F32, "f32", 4}, {DType::F64, "f64", 8}, {DType::F16, "f16", 2},
    {DType::BF16, "bf16", 2}, {DType::I64, "i64", 8}, {DType::I32, "i32", 4},
    {DType::I8, "i8", 1},   {DType::U8, "u8", 1},   {DType::Bool, "bool", 1},
};
constexpr const char* kRoles[] = {"input", "param", "state", "const", "act", "grad"};
} // namespace

const char* dtypeName(DType t) { return kDTypes[int(t)].name; }
int64_t dtypeSize(DType t) { return kDTypes[int(t)].size; }
bool isFloatDType(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
}

Expected<DType> parseDType(std::string_view s) {
  for (const auto& d : kDTypes)
    if (s == d.name) return d.t;
  return Status(ErrorCode::InvalidModel, "unknown dtype '" + std::string(s) + "'");
}

int64_t numElements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shapeToString(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(s[i]);
  }
  return out + "]";
}

std::string typeToString(const TensorType& t) { return dtypeName(t.dtype) + shapeToString(t.shape); }

const char* roleName(TensorRole r) { return kRoles[int(r)]; }

Expected<TensorRole> parseRole(std::string_view s) {
  for (int i = 0; i < int(std::size(kRoles)); ++i)
    if (s == kRoles[i]) return TensorRole(i);
  return Status(ErrorCode::InvalidModel, "unknown tensor role '" + std::string(s) + "'");
}

} // namespace hgp
