// Accelerate's LocalSGD (accelerate.local_sgd): processes train on their own gradients (no_sync) and
// average their parameters every local_sgd_steps steps and at the end, as Accelerate does it: a
// barrier, then each parameter (frozen ones too, buffers not) reduced to the mean, one by one.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "accelerator/accelerator.h"
#include "common/error.h"

namespace acc {

void Accelerator::local_sgd_begin(const std::shared_ptr<Model>& model, int64_t local_sgd_steps, bool enabled) {
  if (config_.sharding.stage > 0)
    fail(Status::Unsupported, "LocalSGD is supported for DDP only, not with sharding (zero_stage ", config_.sharding.stage,
         "), as in Accelerate");
  require(local_sgd_steps >= 1, "local_sgd_steps must be >= 1, got ", local_sgd_steps);
  const std::shared_ptr<PreparedModel> wrapper = prepared(model);
  for (auto it = local_sgd_.begin(); it != local_sgd_.end();)
    it = it->second.model.expired() ? local_sgd_.erase(it) : std::next(it);
  require(!local_sgd_.count(wrapper.get()), "a LocalSGD scope is already open for this model (local_sgd_end first)");
  LocalSgdScope scope{wrapper, local_sgd_steps, enabled && dist_ != nullptr};
  if (scope.enabled) wrapper->no_sync_begin();
  local_sgd_.emplace(wrapper.get(), scope);
}

Accelerator::LocalSgdScope& Accelerator::local_sgd_scope(const std::shared_ptr<Model>& model, const char* call) {
  auto it = local_sgd_.find(prepared(model).get());
  require(it != local_sgd_.end() && !it->second.model.expired(), call, " without local_sgd_begin for this model");
  return it->second;
}

void Accelerator::local_sgd_step(const std::shared_ptr<Model>& model) {
  LocalSgdScope& scope = local_sgd_scope(model, "local_sgd_step");
  ++scope.steps;
  if (scope.enabled && scope.steps % scope.local_sgd_steps == 0) average_parameters(model);
}

void Accelerator::local_sgd_end(const std::shared_ptr<Model>& model) {
  LocalSgdScope& open = local_sgd_scope(model, "local_sgd_end");
  const std::shared_ptr<PreparedModel> wrapper = open.model.lock();
  const bool enabled = open.enabled;
  local_sgd_.erase(wrapper.get());  // closed even if averaging fails: the group is broken then
  if (!enabled) return;
  try {
    average_parameters(model);
  } catch (...) {
    wrapper->no_sync_end();
    throw;
  }
  wrapper->no_sync_end();
}

void Accelerator::average_parameters(const std::shared_ptr<Model>& model) {
  collectives_.barrier("LocalSGD (waiting for every process)");
  at::NoGradGuard no_grad;
  for (const auto& [name, param] : unwrap_model(model)->named_parameters())
    // Replicas of one model (compared when it was prepared): no layouts to compare per parameter.
    param.copy_(collectives_.reduce(param, Reduction::Mean, "LocalSGD (averaging '" + name + "')",
                                    Collectives::Layouts::AgreedByCaller));
}

}  // namespace acc
