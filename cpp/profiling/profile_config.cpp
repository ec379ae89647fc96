#include "profiling/profile_config.h"

#include "common/error.h"

namespace acc {

const OptionTable<ProfileConfig>& profile_option_table() {
  using P = ProfileConfig;
  static const OptionTable<P> table(OptionsKind::Profile, [](OptionTable<P>& t) {
    constexpr double kMaxSteps = 1e12;
    t.bind("activities", "cpu, cuda or cpu,cuda (default: cpu, and cuda on a CUDA device)", &P::activities)
        .one_of({"", "cpu", "cuda", "cpu,cuda", "cuda,cpu"});
    t.bind("schedule_wait", "steps of each cycle not profiled", &P::schedule_wait).at_least(0).at_most(kMaxSteps);
    t.bind("schedule_warmup", "steps profiled and thrown away", &P::schedule_warmup).at_least(0).at_most(kMaxSteps);
    t.bind("schedule_active", "steps recorded per cycle (0: no schedule)", &P::schedule_active).at_least(0).at_most(kMaxSteps);
    t.bind("schedule_repeat", "cycles (0: until the end)", &P::schedule_repeat).at_least(0).at_most(kMaxSteps);
    t.bind("schedule_skip_first", "steps skipped before the first cycle", &P::schedule_skip_first)
        .at_least(0)
        .at_most(kMaxSteps);
    t.bind("record_shapes", "record the operators' input shapes", &P::record_shapes);
    t.bind("profile_memory", "record tensor allocations and frees", &P::profile_memory);
    t.bind("with_stack", "record TorchScript source locations", &P::with_stack);
    t.bind("with_flops", "estimate the FLOPs of matrix products and convolutions", &P::with_flops);
    t.bind("with_modules", "record the TorchScript module hierarchy", &P::with_modules);
    t.bind("output_trace_dir", "folder for the Chrome trace profile_<process index>.json", &P::output_trace_dir);
  });
  return table;
}

ProfileConfig ProfileConfig::from(const Options& options) {
  require(options.kind() == OptionsKind::Profile, "profile options must be of kind profile, got ",
          options_kind_name(options.kind()));
  ProfileConfig config = profile_option_table().read(options);
  const bool schedule_given = options.has("schedule_wait") || options.has("schedule_warmup") ||
                              options.has("schedule_repeat") || options.has("schedule_skip_first");
  require(config.schedule_active > 0 || !schedule_given,
          "a profile schedule needs schedule_active (the steps recorded per cycle) of at least 1");
  return config;
}

// torch.profiler.schedule: skip_first steps, then cycles of wait, warmup and active steps, the last
// active step of a cycle ending it (its trace is ready); after `repeat` cycles (0: never) nothing.
ProfilerAction scheduled_action(const ProfileConfig& c, int64_t step) {
  if (c.schedule_active == 0) return ProfilerAction::Record;
  if (step < c.schedule_skip_first) return ProfilerAction::None;
  step -= c.schedule_skip_first;
  const int64_t cycle = c.schedule_wait + c.schedule_warmup + c.schedule_active;
  if (c.schedule_repeat > 0 && step / cycle >= c.schedule_repeat) return ProfilerAction::None;
  const int64_t in_cycle = step % cycle;
  if (in_cycle < c.schedule_wait) return ProfilerAction::None;
  if (in_cycle < c.schedule_wait + c.schedule_warmup) return ProfilerAction::Warmup;
  return in_cycle < cycle - 1 ? ProfilerAction::Record : ProfilerAction::RecordAndSave;
}

}  // namespace acc
