#include "runtime/support/Status.h"

#include <cstdarg>
#include <cstdio>

namespace hgp {

const char* errorCodeName(ErrorCode c) {
  switch (c) {
  case ErrorCode::Ok: return "ok";
  case ErrorCode::Internal: return "internal error";
  case ErrorCode::Usage: return "usage error";
  case ErrorCode::InvalidModel: return "invalid model";
  case ErrorCode::Io: return "i/o error";
  case ErrorCode::BadData: return "bad data";
  case ErrorCode::Device: return "device error";
  case ErrorCode::Diverged: return "training diverged";
  case ErrorCode::OutOfMemory: return "out of memory";
  case ErrorCode::PeerFailed: return "peer rank failed";
  case ErrorCode::DataNotOnDevice: return "data not on device";
  }
  return "error";
}

std::string Status::toString() const {
  if (isOk()) return "ok";
  return std::string(errorCodeName(code_)) + ": " + message_;
}

Status makeError(ErrorCode code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string s(n > 0 ? size_t(n) : 0, '\0');
  if (n > 0) std::vsnprintf(s.data(), s.size() + 1, fmt, ap2);
  va_end(ap2);
  return Status(code, std::move(s));
}

} // namespace hgp
