// LoraAdapters' side of EVA (model/peft/eva.h): the adapters take their layers' components, as PEFT's
// _load_eva_state_dict gives them to its layers.
#include <ATen/core/grad_mode.h>

#include <cmath>

#include "common/error.h"
#include "model/peft/lora.h"
#include "model/peft/lora_draws.h"

namespace acc {
namespace {

// PEFT's update_layer(r=rank) for init_lora_weights "eva": nn.Linear's draws for A and B, B zeroed,
// DoRA's magnitude from the weight (no lora_bias: PEFT's LoraConfig refuses it beside "eva").
LoraAdapter redrawn(const LoraAdapter& old, int64_t rank, double scaling, const LoraConfig& config) {
  const LinearSite& site = old.site;
  const int64_t in = in_features(site), out = out_features(site);
  const at::Tensor a = new_linear_weight(rank, in);
  at::Tensor b = new_linear_weight(out, rank);
  b.zero_();
  LoraAdapter fresh{site, a.to(site.weight.options()), b.to(site.weight.options()), rank, scaling};
  if (config.use_dora) fresh.magnitude = initial_magnitude(site.weight, fresh);
  const bool low = site.weight.scalar_type() == at::kHalf || site.weight.scalar_type() == at::kBFloat16;
  for (at::Tensor* t : {&fresh.a, &fresh.b, &fresh.magnitude})
    if (t->defined()) *t = (low ? t->to(at::kFloat) : *t).set_requires_grad(true);
  return fresh;
}

}  // namespace

void LoraAdapters::take_eva_components(const std::vector<std::pair<std::string, at::Tensor>>& components) {
  auto components_of = [&](const std::string& module) -> const at::Tensor& {
    for (const auto& [name, u] : components)
      if (name == module) return u;
    fail(Status::Internal, "EVA computed nothing for '", module, "'");
  };
  LoraConfig config = config_;
  config.target_names.clear();
  config.target_regex.clear();
  config.regex_matches = nullptr;
  config.all_linear = false;
  config.rank_pattern.clear();
  config.alpha_pattern.clear();
  config.rank_pattern_spec.clear();
  config.alpha_pattern_spec.clear();
  std::vector<LoraAdapter> kept;
  at::NoGradGuard no_grad;
  for (const LoraAdapter& adapter : adapters_) {  // in the model's order, as PEFT's named_modules
    const std::string& module = adapter.site.module;
    const at::Tensor& u = components_of(module);
    const int64_t rank = u.size(0);
    if (rank == 0) continue;  // PEFT puts the base layer back
    double alpha = config_.alpha_of(pattern_name(adapter.site));
    LoraAdapter taken = adapter;
    if (rank != adapter.r) {
      if (config_.eva.adjust_scaling_factors) alpha *= static_cast<double>(rank) / static_cast<double>(adapter.r);
      const double scaling =
          config_.use_rslora ? alpha / std::sqrt(static_cast<double>(rank)) : alpha / static_cast<double>(rank);
      taken = redrawn(adapter, rank, scaling, config_);
    }
    taken.a.copy_(u);
    config.target_names.push_back(module);
    if (rank != config_.r) config.add_rank_pattern(module, rank);
    if (alpha != config_.alpha) config.add_alpha_pattern(module, alpha);
    kept.push_back(std::move(taken));
  }
  // Nothing can fail from here on.
  uninstall();
  adapters_ = std::move(kept);
  config_ = std::move(config);
  install();
}

}  // namespace acc
