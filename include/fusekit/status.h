// Status: how every fusekit call reports failure.
//
// The library never exits, aborts or prints on bad input. Each entry point validates its
// arguments before touching memory and returns a Status; a failed Status carries a message that
// names the argument, the expected value and the actual one. Callers who prefer exceptions wrap
// calls in fusekit::check(), which throws fusekit::Error.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace fusekit {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the call is malformed: shapes, strides, pointers, values
  kUnsupported,      // well-formed, but not supported (dtype combination, backend not built)
  kRuntimeError,     // the device runtime reported an error (launch failure, no device)
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }
  static Status invalid_argument(std::string message) {
    return Status(StatusCode::kInvalidArgument, std::move(message));
  }
  static Status unsupported(std::string message) {
    return Status(StatusCode::kUnsupported, std::move(message));
  }
  static Status runtime_error(std::string message) {
    return Status(StatusCode::kRuntimeError, std::move(message));
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: fused_add_rms_norm: weight: expected shape [4096] but got [4095]"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// The exception thrown by check().
class Error : public std::runtime_error {
 public:
  explicit Error(const Status& status) : std::runtime_error(status.to_string()), code_(status.code()) {}
  StatusCode code() const { return code_; }

 private:
  StatusCode code_;
};

// Throws fusekit::Error when `status` is not ok.
inline void check(const Status& status) {
  if (!status.ok()) throw Error(status);
}

}  // namespace fusekit
