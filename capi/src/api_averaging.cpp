// Averaged models (PyTorch's AveragedModel): SWA and EMA of a model's weights.
#include "guard.h"
#include "handles.h"
#include "optim/averaged_model_part.h"
#include "optim/update_bn.h"

using namespace acc::capi;

namespace {

acc::AveragedModel& averaged_arg(const acc_averaged_model* avg) { return *live(avg, "avg").averaged; }

}  // namespace

extern "C" {

acc_status acc_averaged_model_create(const acc_model* model, const acc_options* opts, acc_averaged_model** out) {
  return guarded([&] {
    const acc::Model& m = *live(model, "model").model;
    auto config = acc::AveragingConfig::from(options_arg(opts, acc::OptionsKind::AveragedModel));
    out_param(out, "out");
    emit(out, std::make_shared<acc::AveragedModel>(m, std::move(config)));
  });
}

acc_status acc_averaged_model_update(acc_averaged_model* avg, const acc_model* model) {
  return guarded([&] { averaged_arg(avg).update(*live(model, "model").model); });
}

acc_status acc_averaged_model_count(const acc_averaged_model* avg, int64_t* out) {
  return guarded([&] {
    const auto& a = averaged_arg(avg);
    *out_param(out, "out") = a.count();
  });
}

acc_status acc_averaged_model_copy_to(const acc_averaged_model* avg, acc_model* model) {
  return guarded([&] { averaged_arg(avg).copy_to(*live(model, "model").model); });
}

acc_status acc_averaged_model_swap(acc_averaged_model* avg, acc_model* model) {
  return guarded([&] { averaged_arg(avg).swap(*live(model, "model").model); });
}

acc_status acc_averaged_model_state_dict(const acc_averaged_model* avg, acc_tensor_list** out) {
  return guarded([&] {
    const auto& a = averaged_arg(avg);
    emit_named(out_param(out, "out"), a.state_dict());
  });
}

acc_status acc_averaged_model_load_state_dict(acc_averaged_model* avg, const acc_tensor_list* state) {
  return guarded([&] {
    auto& a = averaged_arg(avg);
    a.load_state_dict(named_tensors(live(state, "state")));
  });
}

acc_status acc_register_averaged_model(acc_accelerator* acc, acc_averaged_model* avg) {
  return guarded([&] {
    auto& accelerator = accelerator_arg(acc);
    auto averaged = live(avg, "avg").averaged;
    accelerator.register_for_checkpointing(
        [averaged](size_t index) { return acc::averaged_model_part(index, averaged); });
  });
}

void acc_averaged_model_free(acc_averaged_model* avg) { release(avg); }

acc_status acc_model_update_bn(acc_model* model, acc_dataloader* loader) {
  return guarded([&] {
    acc::Model& m = *live(model, "model").model;  // checked in this order: the model first
    acc::update_bn(m, *live(loader, "loader").loader);
  });
}

}  // extern "C"
