#include "guard.h"

#include <c10/util/Exception.h>

#include <cxxabi.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/exceptions.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>
#include <typeinfo>
#include <stdexcept>

#include "common/error.h"
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

LastError& last_error() {
  thread_local LastError error;
  return error;
}

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

acc_status from_c10(const c10::Error& e) {
  std::string message = e.what_without_backtrace();
  if (acc::is_allocation_failure_message(message)) return record(ACC_ERR_OUT_OF_MEMORY, std::move(message), e.what());
  const bool internal = message.find("INTERNAL ASSERT FAILED") != std::string::npos;
  return record(internal ? ACC_ERR_INTERNAL : ACC_ERR_INVALID_ARGUMENT, std::move(message), e.what());
}

// "std::out_of_range" rather than "St12out_of_range".
std::string type_name(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? name.get() : type.name();
}

}  // namespace

acc_status translate_current_exception() noexcept {
  try {
    throw;
  } catch (const acc::Error& e) {
    return record(static_cast<acc_status>(e.status()), e.what(), {}, &e);
  } catch (const c10::OutOfMemoryError& e) {
    return record(ACC_ERR_OUT_OF_MEMORY, e.what_without_backtrace(), e.what());
  } catch (const c10::Error& e) {
    return from_c10(e);
  } catch (const std::bad_alloc&) {
    return record(ACC_ERR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::invalid_argument& e) {
    return record(ACC_ERR_INVALID_ARGUMENT, e.what());
  } catch (const std::length_error& e) {
    // A size no container can hold (a byte count near SIZE_MAX): the caller's to fix.
    return record(ACC_ERR_INVALID_ARGUMENT, std::string("a size is larger than any buffer can be: ") + e.what());
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the system refuses (too long, not a folder, no permission): the caller's to fix.
    return record(ACC_ERR_IO, e.what());
  } catch (const nlohmann::json::exception& e) {
    // JSON the caller gave (a spec, a configuration, names that are not UTF-8).
    return record(ACC_ERR_INVALID_ARGUMENT, std::string("invalid JSON input: ") + e.what());
  } catch (const YAML::Exception& e) {
    return record(ACC_ERR_INVALID_ARGUMENT, std::string("invalid YAML input: ") + e.what());
  } catch (const std::exception& e) {
    return record(ACC_ERR_INTERNAL, "unexpected error (" + type_name(typeid(e)) + "): " + e.what());
  } catch (...) {
    return record(ACC_ERR_INTERNAL, "unexpected error of an unknown type");
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
