// The Accelerator: creation, properties, prepare, backward, accumulation, clipping.
#include "common/device.h"
#include "guard.h"
#include "handles.h"

using namespace acc::capi;

namespace {

std::optional<bool> placement_arg(const acc_placement& p) {
  static_assert(ACC_PLACEMENT_DEFAULT == -1 && ACC_PLACEMENT_NO == 0 && ACC_PLACEMENT_YES == 1);
  return tristate_arg(enum_int(p), "placement");
}

template <typename Getter>
acc_status get(const acc_accelerator* a, Getter getter) {
  return guarded([&] { getter(accelerator_arg(a)); });
}

// Replaces *slot by a new handle to `prepared` (freeing the old one), or leaves it when NULL.
template <typename Handle, typename Object>
void swap_in(Handle** slot, std::shared_ptr<Object> prepared) {
  if (!slot || !*slot) return;
  Handle* fresh = nullptr;
  emit(&fresh, std::move(prepared));
  release(*slot);
  *slot = fresh;
}

}  // namespace

extern "C" {

acc_status acc_accelerator_create(const acc_options* opts, acc_accelerator** out) {
  return guarded([&] {
    auto options = options_arg(opts, acc::OptionsKind::Accelerator);
    out_param(out, "out");
    emit(out, std::make_shared<acc::Accelerator>(options));
  });
}

void acc_accelerator_free(acc_accelerator* a) { release(a); }

acc_status acc_accelerator_device(const acc_accelerator* a, char** out) {
  return get(a, [&](acc::Accelerator& x) { *out_param(out, "out") = owned_string(acc::device_name(x.device())); });
}

acc_status acc_accelerator_distributed_type(const acc_accelerator* a, const char** out) {
  return get(a, [&](acc::Accelerator& x) { *out_param(out, "out") = x.distributed_type(); });
}

acc_status acc_accelerator_mixed_precision(const acc_accelerator* a, const char** out) {
  return get(a, [&](acc::Accelerator& x) { *out_param(out, "out") = x.mixed_precision_name(); });
}

acc_status acc_accelerator_process_index(const acc_accelerator* a, int64_t* out) {
  return get(a, [&](acc::Accelerator& x) { *out_param(out, "out") = x.process_index(); });
}

acc_status acc_accelerator_num_processes(const acc_accelerator* a, int64_t* out) {
  return get(a, [&](acc::Accelerator& x) { *out_param(out, "out") = x.num_processes(); });
}

acc_status acc_accelerator_local_process_index(const acc_accelerator* a, int64_t* out) {
  return get(a, [&](acc::Accelerator& x) { *out_param(out, "out") = x.local_process_index(); });
}

acc_status acc_accelerator_is_main_process(const acc_accelerator* a, int* out) {
  return get(a, [&](acc::Accelerator& x) { *out_param(out, "out") = x.is_main_process(); });
}

acc_status acc_accelerator_is_local_main_process(const acc_accelerator* a, int* out) {
  return get(a, [&](acc::Accelerator& x) { *out_param(out, "out") = x.is_local_main_process(); });
}

acc_status acc_accelerator_is_last_process(const acc_accelerator* a, int* out) {
  return get(a, [&](acc::Accelerator& x) { *out_param(out, "out") = x.is_last_process(); });
}

acc_status acc_accelerator_gradient_accumulation_steps(const acc_accelerator* a, int64_t* out) {
  return get(a, [&](acc::Accelerator& x) { *out_param(out, "out") = x.config().gradient_accumulation_steps; });
}

acc_status acc_accelerator_sync_gradients(const acc_accelerator* a, int* out) {
  return get(a, [&](acc::Accelerator& x) { *out_param(out, "out") = x.sync_gradients(); });
}

acc_status acc_accelerator_optimizer_step_was_skipped(const acc_accelerator* a, int* out) {
  return get(a, [&](acc::Accelerator& x) { *out_param(out, "out") = x.optimizer_step_was_skipped(); });
}

acc_status acc_accelerator_step(const acc_accelerator* a, int64_t* out) {
  return get(a, [&](acc::Accelerator& x) { *out_param(out, "out") = x.step(); });
}

acc_status acc_accelerator_iteration(const acc_accelerator* a, int64_t* out) {
  return get(a, [&](acc::Accelerator& x) { *out_param(out, "out") = x.iteration(); });
}

acc_status acc_unscale_gradients(acc_accelerator* a, acc_optimizer* opt) {
  return guarded([&] {
    auto& x = accelerator_arg(a);
    x.unscale_gradients(opt ? live(opt, "opt").optimizer : nullptr);
  });
}

acc_status acc_autocast_begin(acc_accelerator* a, int enabled) {
  return guarded([&] { accelerator_arg(a).autocast_begin(enabled != 0); });
}

acc_status acc_autocast_end(acc_accelerator* a) {
  return guarded([&] { accelerator_arg(a).autocast_end(); });
}

acc_status acc_prepare_model(acc_accelerator* a, acc_model* model, acc_placement placement, acc_model** out) {
  return guarded([&] {
    auto& x = accelerator_arg(a);
    auto& m = live(model, "model");
    out_param(out, "out");
    emit(out, x.prepare_model(m.model, placement_arg(placement)));
  });
}

acc_status acc_prepare_optimizer(acc_accelerator* a, acc_optimizer* opt, acc_placement placement, acc_optimizer** out) {
  return guarded([&] {
    auto& x = accelerator_arg(a);
    auto& o = live(opt, "opt");
    out_param(out, "out");
    emit(out, x.prepare_optimizer(o.optimizer, placement_arg(placement)));
  });
}

acc_status acc_prepare_dataloader(acc_accelerator* a, acc_dataloader* dl, acc_placement placement,
                                  acc_dataloader** out) {
  return guarded([&] {
    auto& x = accelerator_arg(a);
    auto& d = live(dl, "dl");
    out_param(out, "out");
    emit(out, x.prepare_dataloader(d.loader, placement_arg(placement)));
  });
}

acc_status acc_prepare_scheduler(acc_accelerator* a, acc_scheduler* sched, acc_scheduler** out) {
  return guarded([&] {
    auto& x = accelerator_arg(a);
    auto& s = live(sched, "sched");
    out_param(out, "out");
    emit(out, x.prepare_scheduler(s.scheduler));
  });
}

acc_status acc_prepare(acc_accelerator* a, acc_model** model, acc_optimizer** opt, acc_dataloader** dl,
                       acc_scheduler** sched) {
  return guarded([&] {
    auto& x = accelerator_arg(a);
    // Check every handle before preparing anything; schedulers go last, as in Accelerate.
    std::shared_ptr<acc::Model> m;
    std::shared_ptr<acc::Optimizer> o;
    std::shared_ptr<acc::DataLoader> d;
    std::shared_ptr<acc::Scheduler> s;
    if (model && *model) m = live(*model, "*model").model;
    if (opt && *opt) o = live(*opt, "*opt").optimizer;
    if (dl && *dl) d = live(*dl, "*dl").loader;
    if (sched && *sched) s = live(*sched, "*sched").scheduler;
    if (s) x.check_scheduler_preparable(s, o);
    if (m) m = x.prepare_model(m, std::nullopt);
    if (o) o = x.prepare_optimizer(o, std::nullopt);
    if (d) d = x.prepare_dataloader(d, std::nullopt);
    if (s) s = x.prepare_scheduler(s);
    swap_in(model, m);
    swap_in(opt, o);
    swap_in(dl, d);
    swap_in(sched, s);
  });
}

acc_status acc_unwrap_model(acc_accelerator* a, acc_model* model, acc_model** out) {
  return guarded([&] {
    auto& x = accelerator_arg(a);
    auto& m = live(model, "model");
    out_param(out, "out");
    emit(out, x.unwrap_model(m.model));
  });
}

acc_status acc_backward(acc_accelerator* a, const acc_tensor* loss) {
  return guarded([&] {
    auto& x = accelerator_arg(a);
    x.backward(live(loss, "loss").tensor);
  });
}

acc_status acc_backward_ex(acc_accelerator* a, const acc_tensor* loss, int retain_graph, int create_graph) {
  return guarded([&] {
    auto& x = accelerator_arg(a);
    x.backward(live(loss, "loss").tensor, retain_graph != 0, create_graph != 0);
  });
}

acc_status acc_lomo_backward(acc_accelerator* a, const acc_tensor* loss, double learning_rate) {
  return guarded([&] { accelerator_arg(a).lomo_backward(live(loss, "loss").tensor, learning_rate); });
}

acc_status acc_backward_lr(acc_accelerator* a, const acc_tensor* loss, double learning_rate) {
  return guarded([&] { accelerator_arg(a).backward_with_learning_rate(live(loss, "loss").tensor, learning_rate); });
}

acc_status acc_lomo_grad_norm(acc_accelerator* a, const acc_tensor* loss, double* total_norm) {
  return guarded([&] {
    auto& x = accelerator_arg(a);
    const double norm = x.lomo_grad_norm(live(loss, "loss").tensor);
    if (total_norm) *total_norm = norm;
  });
}

acc_status acc_accumulate_begin(acc_accelerator* a) {
  return guarded([&] { accelerator_arg(a).accumulate_begin(); });
}

acc_status acc_accumulate_end(acc_accelerator* a) {
  return guarded([&] { accelerator_arg(a).accumulate_end(); });
}

acc_status acc_clip_grad_norm(acc_accelerator* a, acc_model* model, double max_norm, double norm_type,
                              double* total_norm) {
  return guarded([&] {
    const double norm = accelerator_arg(a).clip_grad_norm(live(model, "model").model, max_norm, norm_type);
    if (total_norm) *total_norm = norm;
  });
}

acc_status acc_clip_grad_value(acc_accelerator* a, acc_model* model, double clip_value) {
  return guarded([&] { accelerator_arg(a).clip_grad_value(live(model, "model").model, clip_value); });
}

}  // extern "C"
