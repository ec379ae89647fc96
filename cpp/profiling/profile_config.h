// Accelerate's ProfileKwargs (accelerator.profile()): what torch's profiler records, its schedule
// (torch.profiler.schedule), and where the Chrome trace goes. Filled from ACC_OPTIONS_PROFILE.
#pragma once

#include <cstdint>
#include <string>

#include "common/option_table.h"

namespace acc {

struct ProfileConfig {
  std::string activities;  // "cpu", "cuda" or "cpu,cuda"; empty: the CPU, and CUDA on a CUDA device
  // torch.profiler.schedule(wait, warmup, active, repeat, skip_first); active 0: no schedule, every
  // step between begin and end is recorded.
  int64_t schedule_wait = 0, schedule_warmup = 0, schedule_active = 0, schedule_repeat = 0, schedule_skip_first = 0;
  bool record_shapes = false, profile_memory = false, with_stack = false, with_flops = false, with_modules = false;
  std::string output_trace_dir;  // empty: no trace file

  static ProfileConfig from(const Options& options);
};

const OptionTable<ProfileConfig>& profile_option_table();

// The step's place in torch.profiler.schedule's cycle.
enum class ProfilerAction { None, Warmup, Record, RecordAndSave };
ProfilerAction scheduled_action(const ProfileConfig& config, int64_t step);

}  // namespace acc
