// Model's side of LoRA-GA (model/peft/lora_ga.h): the targeted layers' weight gradients estimated over
// the caller's training steps, as PEFT's estimate_gradients does, then the adapters added from them.
#include <memory>
#include <utility>

#include "common/error.h"
#include "model/model.h"
#include "model/peft/lora_ga.h"

namespace acc {

struct Model::LoraGaEstimate {
  LoraConfig config;
  std::vector<LinearSite> sites;
  std::vector<std::pair<at::Tensor, bool>> requires_grad;  // every parameter, and whether it required grad
  std::shared_ptr<std::vector<int64_t>> backward_passes;  // per site
  std::vector<unsigned> hooks;                             // per site, on its weight
  bool training = false;
  std::shared_ptr<void> trainable_set_hold;  // no adapters, freezing or optimizer meanwhile
};

void Model::begin_lora_ga(LoraConfig config) {
  if (config.all_linear) config = with_all_linear(config);
  config.init = "lora_ga";
  require(!lora_ga_estimate_, "LoRA-GA's gradients are being estimated already (acc_model_add_lora_ga ends that)");
  require(config.peft_type == PeftType::Lora, "LoRA-GA starts LoRA adapters");
  require(lora_.empty(), "the model already has adapters; LoRA-GA starts from a model without them");
  require_trainable_set_free(/*freezing=*/false);  // an optimizer made before would miss the adapters
  require_weights("LoRA-GA");
  require_whole_parameters("LoRA-GA");
  std::vector<LinearSite> chosen = targeted_sites(config, adaptable_sites());
  require(!chosen.empty(), "target_modules '", config.describe_targets(), "' matches no linear layer");
  for (const LinearSite& site : chosen) {
    require_linear_layer(site, "LoRA-GA");
    require_lora_ga_rank(site.module, out_features(site), in_features(site), config.rank_of(pattern_name(site)));
  }
  auto estimate = std::make_shared<LoraGaEstimate>();
  estimate->config = std::move(config);
  estimate->training = is_training();
  estimate->backward_passes = std::make_shared<std::vector<int64_t>>(chosen.size(), 0);
  // PEFT's: gradients only for the targeted weights, each backward pass through a layer counted.
  for (const auto& entry : named_parameters()) {
    estimate->requires_grad.emplace_back(entry.second, entry.second.requires_grad());
    entry.second.set_requires_grad(false);
  }
  for (size_t k = 0; k < chosen.size(); ++k) {
    at::Tensor weight = chosen[k].weight;
    weight.mutable_grad() = at::Tensor();
    weight.set_requires_grad(true);
    estimate->hooks.push_back(
        weight.register_hook([passes = estimate->backward_passes, k](const at::Tensor&) { ++(*passes)[k]; }));
  }
  estimate->sites = std::move(chosen);
  estimate->trainable_set_hold = hold_trainable_set(
      "LoRA-GA's gradients are being estimated (acc_model_begin_lora_ga): adapters, freezing and unfreezing wait for "
      "acc_model_add_lora_ga, which gives the parameters their requires_grad back",
      /*freezing_too=*/true);
  set_training(true);
  lora_ga_estimate_ = std::move(estimate);
}

size_t Model::add_lora_ga() {
  require(lora_ga_estimate_ != nullptr, "LoRA-GA: no gradients are being estimated (acc_model_begin_lora_ga first)");
  const std::shared_ptr<LoraGaEstimate> estimate = std::move(lora_ga_estimate_);
  estimate->trainable_set_hold.reset();
  auto gradients = std::make_shared<LoraGaGradients>();
  for (size_t k = 0; k < estimate->sites.size(); ++k) {
    at::Tensor weight = estimate->sites[k].weight;
    weight.remove_hook(estimate->hooks[k]);
    const int64_t passes = (*estimate->backward_passes)[k];
    // PEFT's weight.grad / count; a layer no backward reached starts as with init true.
    if (passes > 0 && weight.grad().defined())
      gradients->emplace(estimate->sites[k].module, weight.grad().detach() / passes);
    weight.mutable_grad() = at::Tensor();
  }
  for (auto& [parameter, requires_grad] : estimate->requires_grad) parameter.set_requires_grad(requires_grad);
  set_training(estimate->training);
  LoraConfig config = estimate->config;
  config.lora_ga_gradients = std::move(gradients);
  return add_lora(config);
}

}  // namespace acc
