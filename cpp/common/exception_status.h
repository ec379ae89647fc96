// What an exception in flight means to a caller, as the C API reports it: a status and a message
// for errors that are not acc::Error (libtorch's, the standard library's, JSON's and YAML's). Shared
// by the C API's guard and by collectives that gather each process's failure (Collectives::agree).
#pragma once

#include <exception>
#include <string>

#include "common/error.h"

namespace acc {

struct ExceptionReport {
  Status status = Status::Internal;
  std::string message;
  std::string detail;  // c10's message with its backtrace, where there is one
};

// Call inside a catch block: describes the exception being handled (acc::Error by its own status).
ExceptionReport describe_current_exception() noexcept;
// The same for an exception kept to be rethrown later (`error` not null).
ExceptionReport describe_exception(const std::exception_ptr& error) noexcept;

}  // namespace acc
