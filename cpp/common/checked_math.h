// Integer arithmetic on values users give (sizes, steps, epochs) that cannot wrap silently.
#pragma once

#include <cstdint>
#include <string>

#include "common/error.h"

namespace acc {

// ceil(n / d) for n >= 0 and d >= 1, without forming n + d - 1 (which wraps for d near INT64_MAX).
inline int64_t ceil_div(int64_t n, int64_t d) { return n / d + (n % d != 0 ? 1 : 0); }

// a + b, or InvalidArgument naming `what` when the sum does not fit in int64.
inline int64_t checked_add(int64_t a, int64_t b, const std::string& what) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) fail(Status::InvalidArgument, what, " does not fit in 64 bits (", a, " + ", b, ")");
  return sum;
}

}  // namespace acc
