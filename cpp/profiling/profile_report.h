// What a recorded profile is turned into: a Chrome trace (chrome://tracing, Perfetto) and the table of
// torch's key_averages().table(): per operator name, its calls and its time with and without the
// operators it called.
#pragma once

#include <string>
#include <vector>

#include "profiling/profiled_event.h"

namespace acc {

// Trace Event Format: {"traceEvents": [...]}, spans as complete events ("ph": "X", microseconds),
// memory as instant events; pid is the operating system's process id, as in Kineto's traces, and the
// process is named "rank <process index>".
std::string chrome_trace_json(const std::vector<ProfiledEvent>& events, int64_t process_index);

// Sorted by self CPU time (the most first), at most `row_limit` rows; a FLOPs column when any
// operator has an estimate, device columns when kernels were recorded.
std::string key_averages_table(const std::vector<ProfiledEvent>& events, size_t row_limit = 100);

}  // namespace acc
