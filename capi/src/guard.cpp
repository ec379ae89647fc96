#include "guard.h"

#include <optional>

#include "common/error.h"
#include "common/exception_status.h"
#include "common/thread_state.h"
#include "common/utf8.h"

namespace acc::capi {
namespace {

struct LastError {
  acc_status status = ACC_OK;
  std::string message;
  std::string backtrace;
  std::optional<acc::Error> raised;  // its backtrace is named only when asked for (it is slow)
  uint64_t recorded = 0;  // errors recorded on this thread so far
};

LastError& last_error() { return acc::thread_state<LastError, LastError>(); }

acc_status record(acc_status status, std::string message, std::string backtrace = {},
                  const acc::Error* raised = nullptr) noexcept {
  try {
    auto& e = last_error();
    e.status = status;
    ++e.recorded;
    e.message = acc::printable_utf8(message);  // messages quote input, which may not be UTF-8
    e.backtrace = std::move(backtrace);
    e.raised.reset();
    if (raised) e.raised = *raised;
  } catch (...) {
    // Out of memory while recording: the status still tells the caller what happened.
  }
  return status;
}

}  // namespace

acc_status translate_current_exception() noexcept {
  try {
    throw;
  } catch (const acc::Error& e) {
    return record(static_cast<acc_status>(e.status()), e.what(), {}, &e);  // its backtrace, named on request
  } catch (...) {
    acc::ExceptionReport report = acc::describe_current_exception();
    return record(static_cast<acc_status>(report.status), std::move(report.message), std::move(report.detail));
  }
}

const std::string& last_message() { return last_error().message; }
uint64_t errors_recorded() { return last_error().recorded; }
const std::string& last_backtrace() {
  auto& e = last_error();
  if (e.raised) {
    e.backtrace = e.raised->backtrace();
    e.raised.reset();
  }
  return e.backtrace;
}
acc_status last_status() { return last_error().status; }

}  // namespace acc::capi
