// Status.h - errors as values, shared by the compiler and the runtime.
//
// Every fallible function in hgpc returns a Status or an Expected<T>. A Status carries an
// ErrorCode, which decides the process exit code, and a message that reads as one line:
// "context: context: what went wrong". Callers add context as the error travels up, the way
// LLVM's Expected and IREE's status annotations do. Nothing here throws.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace hgp {

/// The error categories. Each maps to one process exit code (docs/exit-codes.md), so a script that
/// drives hgpc or a generated executable can tell a bad model from bad data from a device fault.
enum class ErrorCode : int {
  Ok = 0,
  Internal = 1,     ///< A bug in hgpc: an invariant did not hold.
  Usage = 2,        ///< Bad command-line flags or arguments.
  InvalidModel = 3, ///< The model is malformed, inconsistent or uses something unsupported.
  Io = 4,           ///< A file could not be read or written.
  BadData = 5,      ///< The training or evaluation data is malformed or does not fit the model.
  Device = 6,       ///< The GPU or a GPU library reported an error.
  Diverged = 7,     ///< Training stopped after too many non-finite steps in a row.
  OutOfMemory = 8,  ///< The memory plan does not fit the device.
  PeerFailed = 9,   ///< Data parallelism: another rank failed, went away or stopped progressing.
  /// --data-on-device: the data set does not fit in GPU memory beside the plan, or is not a
  /// kind the device can hold; the same run works without the flag.
  DataNotOnDevice = 10,
};

/// The process exit code for an error category.
inline int exitCodeFor(ErrorCode c) { return static_cast<int>(c); }

/// A short lower-case name for an error category, used as a message prefix ("invalid model").
const char* errorCodeName(ErrorCode c);

/// The result of an operation that returns nothing: success, or an error with a message.
class [[nodiscard]] Status {
public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }

  bool isOk() const { return code_ == ErrorCode::Ok; }
  explicit operator bool() const { return isOk(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  /// Prefixes the message with "context: ". Use it where an error crosses a layer, naming what
  /// was being done ("loading model.onnx", "node Conv_3").
  Status& addContext(const std::string& context) {
    if (!isOk()) message_ = context + ": " + message_;
    return *this;
  }
  Status withContext(const std::string& context) && {
    addContext(context);
    return std::move(*this);
  }

  /// "invalid model: node 'Conv_0': ...": the form printed to users.
  std::string toString() const;

private:
  ErrorCode code_ = ErrorCode::Ok;
  std::string message_;
};

/// Builds an error Status from a printf-style format.
Status makeError(ErrorCode code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/// Either a value or an error Status.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : v_(std::move(value)) {}
  Expected(Status status) : v_(std::move(status)) {
    assert(!std::get<Status>(v_).isOk() && "an Expected cannot hold an Ok status");
  }

  bool hasValue() const { return v_.index() == 0; }
  explicit operator bool() const { return hasValue(); }

  T& operator*() & { return std::get<T>(v_); }
  const T& operator*() const& { return std::get<T>(v_); }
  T&& operator*() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &std::get<T>(v_); }
  const T* operator->() const { return &std::get<T>(v_); }

  /// The error; Ok when a value is held.
  Status status() const { return hasValue() ? Status() : std::get<Status>(v_); }
  Status takeStatus() { return hasValue() ? Status() : std::move(std::get<Status>(v_)); }

private:
  std::variant<T, Status> v_;
};

} // namespace hgp

#define HGP_CONCAT_IMPL(a, b) a##b
#define HGP_CONCAT(a, b) HGP_CONCAT_IMPL(a, b)

/// Returns the Status of `expr` from the enclosing function when it is an error.
#define HGP_TRY(expr)                                                                              \
  do {                                                                                             \
    ::hgp::Status _hgp_status = (expr);                                                            \
    if (!_hgp_status.isOk()) return _hgp_status;                                                   \
  } while (0)

/// Like HGP_TRY, adding context to the error on the way out.
#define HGP_TRY_CTX(expr, ctx)                                                                     \
  do {                                                                                             \
    ::hgp::Status _hgp_status = (expr);                                                            \
    if (!_hgp_status.isOk()) return std::move(_hgp_status).withContext(ctx);                       \
  } while (0)

#define HGP_ASSIGN_IMPL(tmp, lhs, expr)                                                            \
  auto tmp = (expr);                                                                               \
  if (!tmp.hasValue()) return tmp.takeStatus();                                                    \
  lhs = std::move(*tmp)

/// Evaluates an Expected<T>; returns its error, or assigns its value to `lhs` (which may be a
/// declaration such as `auto x`). It expands to several statements: put braces around it under
/// an `if` (the compiler rejects the unbraced form, it never miscompiles it).
#define HGP_ASSIGN_OR_RETURN(lhs, expr) HGP_ASSIGN_IMPL(HGP_CONCAT(_hgp_e, __LINE__), lhs, expr)
