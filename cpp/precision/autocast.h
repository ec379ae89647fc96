// Autocast for one scope on the calling thread, restored on exit: bindings hop threads, so the
// library never leaves autocast state behind.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <optional>
#include <string>

namespace acc {

// The computation dtype of a mixed_precision setting: "no" -> none, "bf16", "fp16".
std::optional<c10::ScalarType> mixed_precision_dtype(const std::string& mode);

class AutocastGuard {
 public:
  // dtype none: autocast disabled inside the scope (e.g. for a loss that must stay in fp32).
  AutocastGuard(c10::DeviceType device, std::optional<c10::ScalarType> dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool previous_enabled_;
  c10::ScalarType previous_dtype_;
};

}  // namespace acc
