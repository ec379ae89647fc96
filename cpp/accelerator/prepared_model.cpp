#include "accelerator/prepared_model.h"

#include "common/error.h"
#include "precision/autocast.h"

namespace acc {

PreparedModel::PreparedModel(std::shared_ptr<Model> inner, c10::DeviceType device,
                             std::optional<c10::ScalarType> autocast_dtype, std::shared_ptr<ParallelEngine> parallel,
                             std::optional<at::Device> inputs_to)
    : inner_(std::move(inner)),
      device_(device),
      autocast_dtype_(autocast_dtype),
      parallel_(std::move(parallel)),
      inputs_to_(inputs_to),
      trainable_set_hold_(inner_->hold_trainable_set(
          "the model is prepared (its handle from before acc_prepare included): add LoRA adapters and freeze or "
          "unfreeze parameters before preparing it",
          /*freezing_too=*/true)),
      merges_at_prepare_(inner_->merges()) {}

void PreparedModel::save_lora(const std::string& dir) const {
  const auto engine = sharded();
  if (!engine || !inner_->sharded_at_rest()) return inner_->save_lora(dir);
  engine->with_full_parameters("save_lora", [&] {
    if (engine->distributed()->rank() == 0) inner_->save_lora(dir);
  });
}

NamedTensors PreparedModel::forward(const std::vector<at::Tensor>& given) {
  // Merging through the handle from before acc_prepare (Accelerate's unwrap_model(...).merge_and_unload(),
  // to save the merged model) removes parameters the engine reduces and steps: PyTorch's DDP fails
  // at the next step; so does this forward, rather than train the processes apart.
  require(inner_->merges() == merges_at_prepare_,
          "the model's adapters were merged or unloaded after acc_prepare (through its handle from before): its "
          "parameters are "
          "no longer those prepared; save it, or prepare a model again to go on training");
  std::vector<at::Tensor> moved;
  if (inputs_to_) {
    moved.reserve(given.size());
    for (const auto& t : given)
      moved.push_back(t.defined() && t.device() != *inputs_to_ ? t.to(*inputs_to_, /*non_blocking=*/true) : t);
  }
  const std::vector<at::Tensor>& inputs = inputs_to_ ? moved : given;
  // A forward that a backward can follow involves the other processes; another one only where
  // PyTorch's DDP broadcasts buffers at it (ParallelEngine::before_local_forward).
  const bool grad = at::GradMode::is_enabled();
  const bool distributed = parallel_ && (parallel_->every_forward() || (grad && is_training()));
  if (distributed) parallel_->before_forward(syncs_gradients());
  else if (parallel_) parallel_->before_local_forward();
  NamedTensors outputs;
  if (autocast_dtype_) {
    {
      AutocastGuard autocast(device_, autocast_dtype_);
      outputs = inner_->forward(inputs);
    }
    for (auto& entry : outputs)
      if (entry.second.is_floating_point() && entry.second.scalar_type() != at::kDouble)
        entry.second = entry.second.to(at::kFloat);
  } else {
    outputs = inner_->forward(inputs);
  }
  if (distributed) parallel_->after_forward(outputs, syncs_gradients());
  // A LOMO optimizer averages this forward's gradients itself outside no_sync: DDP's buffers are then
  // due at the next forward as after a Reducer's averaging.
  const bool averaged = gradients_left_to_optimizer_ ? no_sync_depth_ == 0 : syncs_gradients();
  if (parallel_) parallel_->forward_done(grad && averaged);
  return outputs;
}

}  // namespace acc
