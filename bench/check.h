// Stops a benchmark at the first C API error, with the library's message. No torch headers: the
// benchmarks that only use accelerate.h compile fast.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "accelerate.h"

#define OK(expr)                                                                 \
  do {                                                                           \
    if ((expr) != ACC_OK) {                                                      \
      std::fprintf(stderr, "%s: %s\n", #expr, acc_last_error_message());        \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)
