// Autocast for one scope on the calling thread, restored on exit: bindings hop threads, so the
// library never leaves autocast state behind.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <optional>

namespace acc {

class AutocastGuard {
 public:
  // dtype none: autocast disabled inside the scope (e.g. for a loss that must stay in fp32).
  AutocastGuard(c10::DeviceType device, std::optional<c10::ScalarType> dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;
  // Its end then restores nothing (a scope left open on a thread that ends: torch's thread-local
  // state it would restore may be gone already).
  void dismiss() { dismissed_ = true; }

 private:
  c10::DeviceType device_;
  bool previous_enabled_;
  c10::ScalarType previous_dtype_;
  bool dismissed_ = false;
};

// The calling thread's autocast setting for a device type: its dtype, or none when disabled.
std::optional<c10::ScalarType> current_autocast(c10::DeviceType device);

}  // namespace acc
