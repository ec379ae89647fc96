// Accelerate's accelerator.profile(): torch's profiler as a begin/step/end scope, and its table.
#include "guard.h"
#include "host_callbacks.h"
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

acc_status acc_profile_on_trace_ready(acc_accelerator* a, acc_trace_ready_fn fn, void* user_data,
                                      acc_free_fn free_user_data) {
  return guarded([&] {
    auto data = hold_user_data(user_data, free_user_data);  // freed here when fn is NULL or the call fails
    acc::Accelerator& accelerator = accelerator_arg(a);
    if (!fn) return accelerator.set_profile_trace_ready(nullptr);
    accelerator.set_profile_trace_ready([fn, data](int64_t step) {
      invoke_host("the profile's on_trace_ready at step " + std::to_string(step), [&] { return fn(data.get(), step); });
    });
  });
}

acc_status acc_profile_export_chrome_trace(acc_accelerator* a, const char* path) {
  return guarded([&] { accelerator_arg(a).profile_export_chrome_trace(text_arg(path, "path")); });
}

}  // extern "C"
