#include "launch/worker_logs.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.h"

namespace acc {
namespace fs = std::filesystem;

namespace {

int stream_bits(const std::string& digit, const std::string& spec, const std::string& flag) {
  require(digit.size() == 1 && digit[0] >= '0' && digit[0] <= '3', flag, " ", spec,
          ": each value must be 0 (none), 1 (stdout), 2 (stderr) or 3 (both), as in \"3\" or \"0:3,1:1\"");
  return digit[0] - '0';
}

std::string make_unique_dir(const fs::path& parent, const std::string& prefix) {
  std::string pattern = (parent / (prefix + "XXXXXX")).string();
  if (!mkdtemp(pattern.data()))
    fail(Status::Io, "cannot make a log folder in ", parent.string(), ": ", std::strerror(errno));
  return pattern;
}

}  // namespace

std::vector<int> parse_stream_spec(const std::string& spec, int local_processes, const std::string& flag) {
  if (spec.find(':') == std::string::npos) return std::vector<int>(local_processes, stream_bits(spec, spec, flag));
  std::vector<int> bits(local_processes, kNoStream);
  size_t start = 0;
  for (;;) {
    const size_t comma = spec.find(',', start);
    const std::string pair = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t colon = pair.find(':');
    const std::string rank = colon == std::string::npos ? "" : pair.substr(0, colon);
    require(!rank.empty() && rank.size() <= 9 && rank.find_first_not_of("0123456789") == std::string::npos, flag, " ",
            spec, ": expected local_rank:value pairs separated by commas, as in \"0:3,1:1\"");
    const int local_rank = std::stoi(rank);
    require(local_rank < local_processes, flag, " ", spec, ": local rank ", local_rank, " does not exist (",
            local_processes, " processes on this machine)");
    bits[local_rank] = stream_bits(pair.substr(colon + 1), spec, flag);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return bits;
}

std::string make_run_log_dir(const std::optional<std::string>& log_dir, const std::string& run_id) {
  if (!log_dir) return make_unique_dir(fs::temp_directory_path(), "torchelastic_");
  require(!log_dir->empty(), "--log_dir must not be empty");
  std::error_code ec;
  if (fs::exists(*log_dir, ec)) {
    require(fs::is_directory(*log_dir, ec), "--log_dir ", *log_dir, " is a file, not a folder");
  } else if (!fs::create_directories(*log_dir, ec) && ec) {
    // A file on the way is the flag's mistake, as a --log_dir that is a file is; the rest, the disk's.
    fail(ec == std::errc::not_a_directory ? Status::InvalidArgument : Status::Io, "cannot make --log_dir ", *log_dir,
         ": ", ec.message());
  }
  return make_unique_dir(*log_dir, run_id + "_");
}

std::vector<std::string> make_attempt_log_dirs(const std::string& run_log_dir, int restart_count, int local_processes) {
  const fs::path attempt = fs::path(run_log_dir) / ("attempt_" + std::to_string(restart_count));
  std::error_code ec;
  fs::remove_all(attempt, ec);  // inside our own unique folder: only an earlier attempt of this run
  std::vector<std::string> ranks;
  for (int r = 0; r < local_processes; ++r) {
    const fs::path dir = attempt / std::to_string(r);
    if (!fs::create_directories(dir, ec) && ec) fail(Status::Io, "cannot make log folder ", dir.string(), ": ", ec.message());
    ranks.push_back(dir.string());
  }
  return ranks;
}

}  // namespace acc
