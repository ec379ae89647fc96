// Mixed precision's computation dtype; autocast scopes are common/autocast_guard.h.
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>
#include <string>

#include "common/autocast_guard.h"

namespace acc {

// The computation dtype of a mixed_precision setting: "no" -> none, "bf16", "fp16".
std::optional<c10::ScalarType> mixed_precision_dtype(const std::string& mode);

}  // namespace acc
