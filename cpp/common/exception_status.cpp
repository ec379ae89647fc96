#include "common/exception_status.h"

#include <c10/util/Exception.h>

#include <cxxabi.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/exceptions.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <new>
#include <stdexcept>
#include <typeinfo>

namespace acc {
namespace {

// "std::out_of_range" rather than "St12out_of_range".
std::string type_name(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? name.get() : type.name();
}

ExceptionReport from_c10(const c10::Error& e) {
  std::string message = e.what_without_backtrace();
  if (is_allocation_failure_message(message)) return {Status::OutOfMemory, std::move(message), e.what()};
  const bool internal = message.find("INTERNAL ASSERT FAILED") != std::string::npos;
  return {internal ? Status::Internal : Status::InvalidArgument, std::move(message), e.what()};
}

ExceptionReport describe() {
  try {
    throw;
  } catch (const Error& e) {
    return {e.status(), e.what(), {}};
  } catch (const c10::OutOfMemoryError& e) {
    return {Status::OutOfMemory, e.what_without_backtrace(), e.what()};
  } catch (const c10::Error& e) {
    return from_c10(e);
  } catch (const std::bad_alloc&) {
    return {Status::OutOfMemory, "out of host memory", {}};
  } catch (const std::invalid_argument& e) {
    return {Status::InvalidArgument, e.what(), {}};
  } catch (const std::length_error& e) {
    // A size no container can hold (a byte count near SIZE_MAX): the caller's to fix.
    return {Status::InvalidArgument, std::string("a size is larger than any buffer can be: ") + e.what(), {}};
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the system refuses (too long, not a folder, no permission): the caller's to fix.
    return {Status::Io, e.what(), {}};
  } catch (const nlohmann::json::exception& e) {
    // JSON the caller gave (a spec, a configuration, names that are not UTF-8).
    return {Status::InvalidArgument, std::string("invalid JSON input: ") + e.what(), {}};
  } catch (const YAML::Exception& e) {
    return {Status::InvalidArgument, std::string("invalid YAML input: ") + e.what(), {}};
  } catch (const std::exception& e) {
    return {Status::Internal, "unexpected error (" + type_name(typeid(e)) + "): " + e.what(), {}};
  } catch (...) {
    return {Status::Internal, "unexpected error of an unknown type", {}};
  }
}

}  // namespace

ExceptionReport describe_current_exception() noexcept {
  try {
    return describe();
  } catch (...) {  // out of memory while describing
    ExceptionReport report;
    report.status = Status::OutOfMemory;
    return report;
  }
}

ExceptionReport describe_exception(const std::exception_ptr& error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (...) {
    return describe_current_exception();
  }
}

}  // namespace acc
