// `accelerate config`: the questions, asked on a terminal (or answered line by line from a pipe),
// that make a config file.
#pragma once

#include <iosfwd>

#include "config/config_file.h"

namespace acc {

// Asks the questions on `out` and reads answers from `in`; an empty answer takes the default shown
// in brackets. On a terminal a wrong answer is asked again; otherwise it is an InvalidArgument
// error naming the question, as is input that ends before the last question.
ClusterConfig ask_cluster_config(std::istream& in, std::ostream& out, bool terminal, int gpu_count);

}  // namespace acc
