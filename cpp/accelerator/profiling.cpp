// Accelerate's accelerator.profile(ProfileKwargs): torch's profiler around the code between begin and
// end, its Chrome trace written per process into output_trace_dir, then a barrier.
#include <filesystem>

#include "accelerator/accelerator.h"
#include "common/error.h"
#include "profiling/profile_report.h"
#include "profiling/profiler_session.h"

namespace acc {

void Accelerator::profile_begin(const ProfileConfig& config) {
  // Inside the handler the profile is mid-step (or mid-end): a new one would replace it under that call.
  require(!profiler_ || !profiler_->in_trace_ready(), "profile begin inside on_trace_ready: return from the handler ",
          "first");
  require(!profiler_ || !profiler_->open(), "a profile is already running (profile_end first)");
  profiler_ = std::make_shared<ProfilerSession>(config, device_, profile_trace_ready_);
}

void Accelerator::set_profile_trace_ready(std::function<void(int64_t)> trace_ready) {
  profile_trace_ready_ = std::move(trace_ready);
}

void Accelerator::profile_step() {
  require(profiler_ && (profiler_->open() || profiler_->in_trace_ready()), "profile step without profile_begin");
  profiler_->step();
}

std::string Accelerator::profile_end() {
  require(profiler_ && (profiler_->open() || profiler_->in_trace_ready()), "profile end without profile_begin");
  // A refused end (another thread, inside the handler) changes nothing: no trace, no barrier.
  profiler_->require_changeable_by("profile end");
  // Every process reaches the barrier, a failed trace_ready or write included, so that none waits
  // on another; the first failure is thrown after it.
  std::exception_ptr failure;
  try {
    profiler_->finish();
  } catch (...) {
    failure = std::current_exception();
  }
  const std::string& dir = profiler_->config().output_trace_dir;
  if (dir.empty()) {
    if (failure) std::rethrow_exception(failure);
    return "";
  }
  const std::string path = (std::filesystem::path(dir) / ("profile_" + std::to_string(process_index()) + ".json")).string();
  try {
    profiler_->export_chrome_trace(path, process_index());  // makes output_trace_dir
  } catch (...) {
    if (!failure) failure = std::current_exception();
  }
  collectives_.barrier("profile end (waiting for every process's trace)");
  if (failure) std::rethrow_exception(failure);
  return path;
}

// After profile_end, or while a profile runs once it recorded a cycle (in on_trace_ready).
void Accelerator::require_profile_to_read() const {
  require(profiler_ && (!profiler_->open() || profiler_->recorded()),
          "no profile has ended yet, nor recorded a cycle: profile_begin ... profile_end first (or read it in "
          "on_trace_ready)");
}

std::string Accelerator::profile_summary() const {
  require_profile_to_read();
  return key_averages_table(profiler_->events());
}

void Accelerator::profile_export_chrome_trace(const std::string& path) const {
  require_profile_to_read();
  require(!path.empty(), "the trace's path is empty");
  profiler_->export_chrome_trace(path, process_index());
}

}  // namespace acc
