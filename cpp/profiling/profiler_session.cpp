#include "profiling/profiler_session.h"

#include <filesystem>
#include <mutex>
#include <set>
#include <utility>

#include <torch/csrc/autograd/profiler_kineto.h>

#include "common/compat.h"
#include "common/error.h"
#include "common/files.h"
#include "profiling/profile_report.h"

namespace acc {
namespace tprof = torch::autograd::profiler;
namespace timpl = torch::profiler::impl;

struct ProfilerSession::Recording {
  std::unique_ptr<tprof::ProfilerResult> result;
  std::vector<ProfiledEvent> events;
};

namespace {

std::set<timpl::ActivityType> activity_set(bool cpu, bool cuda) {
  std::set<timpl::ActivityType> set;
  if (cpu) set.insert(timpl::ActivityType::CPU);
  if (cuda) set.insert(timpl::ActivityType::CUDA);
  return set;
}

timpl::ProfilerConfig torch_config(const ProfileConfig& c) {
  return timpl::ProfilerConfig(timpl::ProfilerState::KINETO, c.record_shapes, c.profile_memory, c.with_stack, c.with_flops,
                               c.with_modules);
}

ProfiledEvent plain_event(const tprof::KinetoEvent& e) {
  ProfiledEvent p;
  p.name = e.name();
  p.start_ns = compat::profiler_event_start_ns(e);
  p.duration_ns = compat::profiler_event_duration_ns(e);
  p.thread = e.startThreadId();
  p.on_device = e.deviceType() != c10::DeviceType::CPU;
  p.device_index = static_cast<int>(e.deviceIndex());
  p.bytes = e.nBytes();
  p.is_memory = p.name == "[memory]";
  if (e.hasShapes())
    for (const auto& shape : e.shapes()) p.shapes.push_back(shape);
  p.flops = e.flops();
  p.sequence_nr = e.sequenceNr();
  if (e.hasStack()) p.stack.assign(e.stack().begin(), e.stack().end());
  if (e.hasModuleHierarchy()) p.module_hierarchy.assign(e.moduleHierarchy().begin(), e.moduleHierarchy().end());
  return p;
}

// Threads left recording by a profile dropped on another thread (an accelerator freed there): torch's
// profiler state is the recording thread's own, so only that thread can stop it, which it does when
// it next begins a profile.
std::mutex stranded_mutex;
std::set<std::thread::id> stranded_threads;

void strand(std::thread::id thread) {
  std::lock_guard<std::mutex> lock(stranded_mutex);
  stranded_threads.insert(thread);
}

// Stops the profile a dropped session left running on this thread, if any.
void stop_stranded_profile() {
  {
    std::lock_guard<std::mutex> lock(stranded_mutex);
    if (!stranded_threads.erase(std::this_thread::get_id())) return;
  }
  if (!timpl::profilerEnabled()) return;
  try {
    tprof::disableProfiler();
  } catch (...) {
  }
}

}  // namespace

ProfilerSession::ProfilerSession(ProfileConfig config, const c10::Device& device, TraceReady trace_ready)
    : config_(std::move(config)), trace_ready_(std::move(trace_ready)), thread_(std::this_thread::get_id()) {
  // The option's choices: "", "cpu", "cuda", "cpu,cuda", "cuda,cpu".
  const std::string& a = config_.activities;
  cpu_ = a.empty() || a.find("cpu") != std::string::npos;
  cuda_ = a.empty() ? device.is_cuda() : a.find("cuda") != std::string::npos;
  // A CUDA build on a machine without a GPU, or an accelerator kept on the CPU, has no kernels to trace.
  if (cuda_ && !device.is_cuda())
    fail(Status::Unsupported, "the profile activity cuda needs the accelerator on a GPU (it runs on ", device.str(), ")");
  stop_stranded_profile();
  require(!timpl::profilerEnabled(), "torch's profiler is already running on this thread: end that profile first");
  action_ = scheduled_action(config_, 0);
  transit(ProfilerAction::None, action_, trace_ready_);
}

ProfilerSession::~ProfilerSession() {
  if (!recording_) return;
  if (std::this_thread::get_id() != thread_) {  // torch's profiler state is the thread's
    strand(thread_);
    return;
  }
  try {
    tprof::disableProfiler();
  } catch (...) {
  }
}

void ProfilerSession::require_changeable_by(const char* call) const {
  require(std::this_thread::get_id() == thread_, call,
          " must run on the thread that began the profile: torch's profiler records that thread (and the threads "
          "it starts)");
  require(!in_trace_ready_, call, " inside on_trace_ready: the profile is between two steps there (return from ",
          "the handler first)");
  require(!finished_, call, " after the profile ended");
}

void ProfilerSession::step() {
  require_changeable_by("profile step");
  const ProfilerAction previous = action_;
  action_ = scheduled_action(config_, ++step_);
  transit(previous, action_, trace_ready_);
}

void ProfilerSession::finish() {
  require_changeable_by("profile end");
  finished_ = true;  // first: a failing trace_ready leaves the profile ended all the same
  // The ended profile keeps no handler: replacing the accelerator's then releases the host's data.
  const TraceReady trace_ready = std::exchange(trace_ready_, nullptr);
  transit(action_, ProfilerAction::None, trace_ready);
}

// torch.profiler.profile's transitions from one step's action to the next one's (None at the end):
// "prepare" warms the tracer up, "start" and "stop" bracket a recorded cycle, whose events are kept.
void ProfilerSession::transit(ProfilerAction from, ProfilerAction to, const TraceReady& trace_ready) {
  using A = ProfilerAction;
  const bool records = to == A::Record || to == A::RecordAndSave;
  const auto prepare = [&] { tprof::prepareProfiler(torch_config(config_), activity_set(cpu_, cuda_)); };
  std::exception_ptr failed;
  const auto ready = [&] {  // where torch calls on_trace_ready; the transition goes on if it fails
    if (!trace_ready) return;
    in_trace_ready_ = true;
    try {
      trace_ready(step_);
    } catch (...) {
      failed = std::current_exception();
    }
    in_trace_ready_ = false;
  };
  switch (from) {
    case A::None:
      if (to == A::Warmup) prepare();
      if (records) prepare(), start_recording();
      break;
    case A::Warmup:
      if (to == A::None) start_recording(), stop_recording();  // a warmup cut short, as torch does
      if (records) start_recording();
      break;
    case A::Record:
      if (!records) stop_recording(), ready();
      break;
    case A::RecordAndSave:  // the cycle's last step: its trace is complete
      stop_recording();
      ready();
      if (to == A::Warmup) prepare();
      if (records) prepare(), start_recording();
      break;
  }
  if (failed) std::rethrow_exception(failed);
}

void ProfilerSession::start_recording() {
  tprof::enableProfiler(torch_config(config_), activity_set(cpu_, cuda_));
  recording_ = true;
}

void ProfilerSession::stop_recording() {
  if (!recording_) return;
  recording_ = false;
  auto recording = std::make_shared<Recording>();
  recording->result = tprof::disableProfiler();
  for (const auto& e : recording->result->events()) recording->events.push_back(plain_event(e));
  last_ = std::move(recording);
}

const std::vector<ProfiledEvent>& ProfilerSession::events() const {
  static const std::vector<ProfiledEvent> none;
  return last_ ? last_->events : none;
}

void ProfilerSession::export_chrome_trace(const std::string& path, int64_t process_index) const {
  // The trace's folder is made, as torch's tensorboard_trace_handler makes its dir_name.
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!folder.empty()) std::filesystem::create_directories(folder, ec);
  if (ec) fail(Status::Io, "cannot make the folder of the trace '", path, "': ", ec.message());
  write_through_temporary(path, [&](const std::string& temporary) {
    if (last_) {
      try {  // Kineto's own file, what Python's export_chrome_trace writes, where libtorch has Kineto
        last_->result->save(temporary);
        return;
      } catch (const c10::Error&) {  // "Saving a trace requires ... Kineto support": ours instead
      }
    }
    write_file(temporary, chrome_trace_json(events(), process_index));
  });
}

}  // namespace acc
