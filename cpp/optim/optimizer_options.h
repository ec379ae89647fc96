// The ACC_OPTIONS_OPTIMIZER keys: every algorithm's, with their types, bounds and docs. No defaults
// here: they differ between algorithms, and each algorithm's make_options (optim/algorithm_*.cpp)
// holds its own; the keys an algorithm takes are its keys() (a subset of these).
#pragma once

#include "common/options.h"

namespace acc {

const OptionSchema& optimizer_option_schema();

}  // namespace acc
