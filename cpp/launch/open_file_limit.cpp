#include "launch/open_file_limit.h"

#include <sys/resource.h>

#include <string>

#include "common/error.h"

namespace acc {
namespace {

// What the launcher needs: its own (the standard streams, libtorch's, the store's listening
// socket) and, per process, two console pipes, two log files and the store's connections (with
// room to spare: a shortfall ends the launcher without a word).
constexpr int64_t kOwnDescriptors = 64, kPerProcess = 16;

rlimit g_started_with{RLIM_INFINITY, RLIM_INFINITY};
bool g_raised = false;

}  // namespace

void raise_open_file_limit(int64_t processes) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  g_started_with = limit;
  if (limit.rlim_cur != limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      limit = raised;
      g_raised = true;
    }
  }
  const int64_t needed = kOwnDescriptors + kPerProcess * processes;
  if (limit.rlim_cur == RLIM_INFINITY || static_cast<int64_t>(limit.rlim_cur) >= needed) return;
  const std::string hard = limit.rlim_max == RLIM_INFINITY ? "unlimited" : std::to_string(limit.rlim_max);
  fail(Status::InvalidArgument, "the open-file limit is ", limit.rlim_cur, " descriptors (ulimit -n; hard limit ", hard,
       "), and the launcher needs at least ", needed, " for the ", processes,
       " processes it serves: raise it (ulimit -n ", needed, ") or start fewer processes");
}

void restore_open_file_limit() {
  if (g_raised) ::setrlimit(RLIMIT_NOFILE, &g_started_with);
}

}  // namespace acc
