// Accelerate's accelerator.profile(): torch's profiler as a begin/step/end scope, and its table.
#include "guard.h"
#include "handles.h"
#include "profiling/profile_config.h"

using namespace acc::capi;

extern "C" {

acc_status acc_profile_begin(acc_accelerator* a, const acc_options* opts) {
  return guarded([&] {
    acc::Accelerator& accelerator = accelerator_arg(a);
    accelerator.profile_begin(acc::ProfileConfig::from(options_arg(opts, acc::OptionsKind::Profile)));
  });
}

acc_status acc_profile_step(acc_accelerator* a) {
  return guarded([&] { accelerator_arg(a).profile_step(); });
}

acc_status acc_profile_end(acc_accelerator* a) {
  return guarded([&] { accelerator_arg(a).profile_end(); });
}

acc_status acc_profile_summary(acc_accelerator* a, char** out) {
  return guarded([&] {
    acc::Accelerator& accelerator = accelerator_arg(a);
    out_param(out, "out");
    *out = owned_string(accelerator.profile_summary());
  });
}

}  // extern "C"
