// LoraAdapters' side of AdaLoRA (model/peft/adalora.h): the regularized loss and the rank allocator's step.
#include "model/peft/lora.h"
#include "common/error.h"
#include "model/peft/adalora.h"
#include "model/peft/adalora_allocator.h"

namespace acc {

void LoraAdapters::require_adalora() const {
  require(!adapters_.empty() && allocator_ != nullptr, "the model has no AdaLoRA adapters",
          adapters_.empty() ? "" : std::string(" (its adapters are ") + peft_method_name(config_.peft_type) + "'s)");
}

at::Tensor LoraAdapters::adalora_loss(const at::Tensor& loss) const {
  require_adalora();
  require(loss.defined() && loss.is_floating_point(), "AdaLoRA's loss must be a floating-point tensor");
  const at::Tensor regularization = adalora_orthogonal_regularization(adapters_);
  return loss + regularization * config_.adalora.orth_reg_weight;
}

void LoraAdapters::take_adalora_patterns(const AdaloraConfig& file) {
  config_.adalora.rank_pattern = file.rank_pattern;
  config_.adalora.held = file.held;
}

void LoraAdapters::adalora_update_and_allocate(int64_t global_step) {
  require_adalora();
  allocator_->update_and_allocate(adapters_, global_step, config_.adalora);
}

}  // namespace acc
