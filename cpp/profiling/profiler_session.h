// torch.profiler.profile driven from C: torch's own profiler (the event collector behind
// torch.profiler, with Kineto's device tracing where libtorch has Kineto) started and stopped as
// the schedule says at each step, keeping the events of the last recorded cycle.
#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "profiling/profile_config.h"
#include "profiling/profiled_event.h"

namespace acc {

class ProfilerSession {
 public:
  // Called where torch.profiler calls on_trace_ready: when a recorded cycle ends (at the step that
  // ends its active steps, or at the end while recording), with the step at which it ended.
  using TraceReady = std::function<void(int64_t step)>;

  // Starts step 0; fails with InvalidArgument when torch's profiler already runs on this thread and
  // with Unsupported for the cuda activity where libtorch cannot trace CUDA.
  ProfilerSession(ProfileConfig config, const c10::Device& device, TraceReady trace_ready = nullptr);
  // Stops torch's profiler if still running (nothing kept); off the recording thread, which alone
  // can stop it, that thread's next profile stops it first.
  ~ProfilerSession();
  ProfilerSession(const ProfilerSession&) = delete;
  ProfilerSession& operator=(const ProfilerSession&) = delete;

  // prof.step(): the next step of the schedule.
  void step();
  // Leaves the profile (the context manager's exit): a cycle being recorded ends there. The
  // profile has ended afterwards even where trace_ready failed (its error is thrown then).
  void finish();
  // Writes the last recorded cycle's Chrome trace to `path` (torch's own exporter with Kineto, else
  // this library's, in the same Trace Event Format).
  void export_chrome_trace(const std::string& path, int64_t process_index) const;

  const ProfileConfig& config() const { return config_; }
  bool open() const { return !finished_; }  // begun and not yet ended
  bool in_trace_ready() const { return in_trace_ready_; }  // its handler runs (inside step or finish)
  bool recorded() const { return last_ != nullptr; }
  // Fails with InvalidArgument where `call` (step, end) may not change the profile: off the thread
  // that began it, inside its handler, or after its end.
  void require_changeable_by(const char* call) const;
  const std::vector<ProfiledEvent>& events() const;  // of the last recorded cycle

 private:
  struct Recording;  // torch's result and its events
  // Runs torch's actions between two steps' actions; trace_ready's failure is thrown after all.
  void transit(ProfilerAction from, ProfilerAction to, const TraceReady& trace_ready);
  void start_recording();
  void stop_recording();

  ProfileConfig config_;
  TraceReady trace_ready_;
  bool cpu_ = true, cuda_ = false;  // the activities recorded
  std::thread::id thread_;
  int64_t step_ = 0;
  ProfilerAction action_ = ProfilerAction::None;
  bool recording_ = false, finished_ = false, in_trace_ready_ = false;
  std::shared_ptr<const Recording> last_;
};

}  // namespace acc
