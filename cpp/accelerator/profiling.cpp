// Accelerate's accelerator.profile(ProfileKwargs): torch's profiler around the code between begin and
// end, its Chrome trace written per process into output_trace_dir, then a barrier.
#include <filesystem>

#include "accelerator/accelerator.h"
#include "common/error.h"
#include "profiling/profile_report.h"
#include "profiling/profiler_session.h"

namespace acc {

void Accelerator::profile_begin(const ProfileConfig& config) {
  require(!profiler_ || !profiler_->open(), "a profile is already running (profile_end first)");
  profiler_ = std::make_shared<ProfilerSession>(config, device_);
}

void Accelerator::profile_step() {
  require(profiler_ && profiler_->open(), "profile step without profile_begin");
  profiler_->step();
}

std::string Accelerator::profile_end() {
  require(profiler_ && profiler_->open(), "profile end without profile_begin");
  profiler_->finish();
  const std::string& dir = profiler_->config().output_trace_dir;
  if (dir.empty()) return "";
  const std::string path = (std::filesystem::path(dir) / ("profile_" + std::to_string(process_index()) + ".json")).string();
  // Every process reaches the barrier, a failed write included, so that none waits on another.
  std::exception_ptr failure;
  try {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) fail(Status::Io, "cannot make output_trace_dir ", dir, ": ", ec.message());
    profiler_->export_chrome_trace(path, process_index());
  } catch (...) {
    failure = std::current_exception();
  }
  collectives_.barrier("profile end (waiting for every process's trace)");
  if (failure) std::rethrow_exception(failure);
  return path;
}

std::string Accelerator::profile_summary() const {
  require(profiler_ && !profiler_->open(), "no profile has ended yet: profile_begin ... profile_end first");
  return key_averages_table(profiler_->events());
}

}  // namespace acc
