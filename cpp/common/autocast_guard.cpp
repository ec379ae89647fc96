#include "common/autocast_guard.h"

#include "common/compat.h"

namespace acc {

AutocastGuard::AutocastGuard(c10::DeviceType device, std::optional<c10::ScalarType> dtype)
    : device_(device),
      previous_enabled_(compat::autocast_enabled(device)),
      previous_dtype_(compat::autocast_dtype(device)) {
  compat::set_autocast_enabled(device, dtype.has_value());
  if (dtype) compat::set_autocast_dtype(device, *dtype);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (dismissed_) return;
  // Leaving the outermost autocast scope drops the cache of casted weights, as torch.autocast does.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  compat::set_autocast_enabled(device_, previous_enabled_);
  compat::set_autocast_dtype(device_, previous_dtype_);
}

std::optional<c10::ScalarType> current_autocast(c10::DeviceType device) {
  if (!compat::autocast_enabled(device)) return std::nullopt;
  return compat::autocast_dtype(device);
}

}  // namespace acc
