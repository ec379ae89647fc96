#include "common/error.h"

#include <cxxabi.h>
#include <execinfo.h>

#include <cstdlib>
#include <memory>

namespace acc {
namespace {

// "binary(mangled+0x1f) [0x...]" -> "binary(demangled+0x1f) [0x...]"
std::string readable(const char* symbol) {
  std::string line = symbol;
  const auto open = line.find('('), plus = line.find('+', open == std::string::npos ? 0 : open);
  if (open == std::string::npos || plus == std::string::npos || plus == open + 1) return line;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(line.substr(open + 1, plus - open - 1).c_str(), nullptr, nullptr, &status), std::free);
  if (status != 0 || !name) return line;
  return line.substr(0, open + 1) + name.get() + line.substr(plus);
}

}  // namespace

Error::Error(Status status, const std::string& message) : std::runtime_error(message), status_(status) {
  frames_.resize(64);
  const int n = ::backtrace(frames_.data(), static_cast<int>(frames_.size()));
  frames_.resize(n > 1 ? static_cast<size_t>(n) : 0);
}

std::string Error::backtrace() const {
  if (frames_.size() < 2) return {};
  std::unique_ptr<char*, void (*)(void*)> symbols(
      ::backtrace_symbols(frames_.data() + 1, static_cast<int>(frames_.size() - 1)), std::free);
  if (!symbols) return {};
  std::string out;
  for (size_t i = 0; i + 1 < frames_.size(); ++i) out += "frame #" + std::to_string(i) + ": " + readable(symbols.get()[i]) + "\n";
  return out;
}

bool is_allocation_failure_message(const std::string& message) {
  return message.find("DefaultCPUAllocator: can't allocate memory") != std::string::npos ||
         message.find("DefaultCPUAllocator: not enough memory") != std::string::npos ||
         message.find("CUDA out of memory") != std::string::npos ||
         // cudaErrorMemoryAllocation reported as a CUDA error (cuBLAS or cuDNN workspaces), which
         // Accelerate's should_reduce_batch_size takes as running out of memory too.
         message.find("CUDA error: out of memory") != std::string::npos;
}

}  // namespace acc
