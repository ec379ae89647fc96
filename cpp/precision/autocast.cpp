#include "precision/autocast.h"

#include "common/error.h"

namespace acc {

std::optional<c10::ScalarType> mixed_precision_dtype(const std::string& mode) {
  if (mode == "no") return std::nullopt;
  if (mode == "bf16") return c10::kBFloat16;
  if (mode == "fp16") return c10::kHalf;
  fail(Status::InvalidArgument, "mixed_precision must be \"no\", \"fp16\" or \"bf16\", got '", mode, "'");
}

}  // namespace acc
