// Running as one of several processes: printing, barriers, gradient synchronisation scopes,
// uneven inputs, main-process-first sections, and giving memory back.
#include <optional>

#include "guard.h"
#include "handles.h"

using namespace acc::capi;

extern "C" {

acc_status acc_print(const acc_accelerator* a, const char* text) {
  return guarded([&] { accelerator_arg(a).print(text_arg(text, "text")); });
}

acc_status acc_wait_for_everyone(acc_accelerator* a) {
  return guarded([&] { accelerator_arg(a).wait_for_everyone(); });
}

acc_status acc_free_memory(acc_accelerator* a) {
  return guarded([&] { accelerator_arg(a).free_memory(); });
}

acc_status acc_no_sync_begin(acc_accelerator* a, acc_model* model) {
  return guarded([&] { accelerator_arg(a).no_sync_begin(live(model, "model").model); });
}

acc_status acc_no_sync_end(acc_accelerator* a, acc_model* model) {
  return guarded([&] { accelerator_arg(a).no_sync_end(live(model, "model").model); });
}

acc_status acc_trigger_sync_in_backward(acc_accelerator* a, acc_model* model) {
  return guarded([&] { accelerator_arg(a).trigger_sync_in_backward(live(model, "model").model); });
}

acc_status acc_local_sgd_begin(acc_accelerator* a, acc_model* model, int64_t local_sgd_steps, int enabled) {
  return guarded([&] { accelerator_arg(a).local_sgd_begin(live(model, "model").model, local_sgd_steps, enabled != 0); });
}

acc_status acc_local_sgd_step(acc_accelerator* a, acc_model* model) {
  return guarded([&] { accelerator_arg(a).local_sgd_step(live(model, "model").model); });
}

acc_status acc_local_sgd_end(acc_accelerator* a, acc_model* model) {
  return guarded([&] { accelerator_arg(a).local_sgd_end(live(model, "model").model); });
}

acc_status acc_join_uneven_inputs_begin(acc_accelerator* a, acc_model* model, int even_batches) {
  return guarded([&] {
    accelerator_arg(a).join_uneven_inputs_begin(live(model, "model").model, tristate_arg(even_batches, "even_batches"));
  });
}

acc_status acc_join_uneven_inputs_end(acc_accelerator* a, acc_model* model) {
  return guarded([&] { accelerator_arg(a).join_uneven_inputs_end(live(model, "model").model); });
}

acc_status acc_main_process_first_begin(acc_accelerator* a) {
  return guarded([&] { accelerator_arg(a).main_process_first_begin(false); });
}

acc_status acc_main_process_first_end(acc_accelerator* a) {
  return guarded([&] { accelerator_arg(a).main_process_first_end(false); });
}

acc_status acc_local_main_process_first_begin(acc_accelerator* a) {
  return guarded([&] { accelerator_arg(a).main_process_first_begin(true); });
}

acc_status acc_local_main_process_first_end(acc_accelerator* a) {
  return guarded([&] { accelerator_arg(a).main_process_first_end(true); });
}

}  // extern "C"
