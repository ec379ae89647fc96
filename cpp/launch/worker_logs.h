// Where each process's stdout and stderr go, as torchrun's --redirects / --tee / --log_dir choose:
// the console, a log file, or both; and the log folder torchrun lays out for them,
//   <log_dir>/<run_id>_<random>/attempt_<restart>/<local_rank>/{stdout.log,stderr.log,error.json}.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace acc {

// Which streams: torchrun's Std flags.
enum StreamBits : int { kNoStream = 0, kStdout = 1, kStderr = 2, kBothStreams = 3 };

// torchrun's spec: one digit 0-3 for every local rank ("3"), or local_rank:digit pairs ("0:3,1:1";
// ranks not named get 0). Returns the bits of each of `local_processes` ranks; a malformed spec is
// InvalidArgument naming `flag`.
std::vector<int> parse_stream_spec(const std::string& spec, int local_processes, const std::string& flag);

// The run's log folder: made under `log_dir` (created if missing; a file there is an error), or
// under $TMPDIR as torchelastic_XXXXXX when none is given.
std::string make_run_log_dir(const std::optional<std::string>& log_dir, const std::string& run_id);

// attempt_<restart>/<local_rank>/ for each local rank, made fresh; returns the rank folders.
std::vector<std::string> make_attempt_log_dirs(const std::string& run_log_dir, int restart_count, int local_processes);

}  // namespace acc
