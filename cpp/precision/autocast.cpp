#include "precision/autocast.h"

#include "common/compat.h"
#include "common/error.h"

namespace acc {

std::optional<c10::ScalarType> mixed_precision_dtype(const std::string& mode) {
  if (mode == "no") return std::nullopt;
  if (mode == "bf16") return c10::kBFloat16;
  if (mode == "fp16") return c10::kHalf;
  fail(Status::InvalidArgument, "mixed_precision must be \"no\", \"fp16\" or \"bf16\", got '", mode, "'");
}

AutocastGuard::AutocastGuard(c10::DeviceType device, std::optional<c10::ScalarType> dtype)
    : device_(device),
      previous_enabled_(compat::autocast_enabled(device)),
      previous_dtype_(compat::autocast_dtype(device)) {
  compat::set_autocast_enabled(device, dtype.has_value());
  if (dtype) compat::set_autocast_dtype(device, *dtype);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  // Leaving the outermost autocast scope drops the cache of casted weights, as torch.autocast does.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  compat::set_autocast_enabled(device_, previous_enabled_);
  compat::set_autocast_dtype(device_, previous_dtype_);
}

}  // namespace acc
