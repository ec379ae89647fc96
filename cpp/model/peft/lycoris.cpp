#include "model/peft/lycoris.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <string>
#include <utility>

#include "common/error.h"
#include "model/peft/loha.h"
#include "model/peft/lokr.h"

namespace acc {
namespace {

const char* method_name(PeftType method) { return method == PeftType::Lokr ? "LoKr" : "LoHa"; }

// PEFT's LycorisTuner takes nn.Linear, nn.Conv1d and nn.Conv2d; anything else is its TypeError.
void check_site(const LinearSite& site, const LoraConfig& config) {
  const char* method = method_name(config.peft_type);
  const bool conv = site.conv.has_value();
  if (site.embedding || site.attention || site.fan_in_fan_out || adapts_parameter(site) ||
      (conv && site.weight.dim() != 3 && site.weight.dim() != 4))
    fail(Status::InvalidArgument, method, " cannot adapt '", site.module, "': PEFT's ", method,
         " takes torch.nn.Linear, torch.nn.Conv1d and torch.nn.Conv2d only");
  if (config.peft_type == PeftType::Lokr && site.weight.numel() == 0)  // (0 factors as factor x 0)
    fail(Status::InvalidArgument, "LoKr cannot adapt '", site.module, "': its weight ", site.weight.sizes(),
         " has no element to factor");
  if (site.quantized)
    fail(Status::Unsupported, method, " on the quantised layer '", site.module,
         "' is not built (PEFT has none either)");
  if (!site.set_output_adapter) refuse_uncalled_layer(site, method, "input to add the branch's output from");
  if (conv && !site.conv->refusal.empty())
    fail(Status::Unsupported, method, " on '", site.module, "': ", site.conv->refusal);
}

}  // namespace

std::vector<FactorShape> lycoris_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  if (config.peft_type == PeftType::Lokr) return lokr_factor_shapes(config, site);
  return loha_factor_shapes(config, site);
}

std::vector<std::string> lycoris_suffixes(PeftType method) {
  if (method == PeftType::Lokr) return {std::begin(kLokrSuffixes), std::end(kLokrSuffixes)};
  return {std::begin(kLohaSuffixes), std::end(kLohaSuffixes)};
}

std::string lycoris_factor_set_error(PeftType method, const std::vector<std::string>& suffixes) {
  return method == PeftType::Lokr ? lokr_factor_set_error(suffixes) : loha_factor_set_error(suffixes);
}

std::vector<LoraAdapter> make_lycoris_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  for (const LinearSite& site : chosen) check_site(site, config);
  std::vector<LoraAdapter> made;
  at::NoGradGuard no_grad;
  for (const LinearSite& site : chosen) {
    LoraAdapter adapter{site, at::Tensor(), at::Tensor(), config.rank_of(site.module), config.scaling_of(site.module)};
    adapter.method = config.peft_type;
    // PEFT's create_adapter_parameters (torch.empty, float32), its reset in the registration order,
    // then the move to the layer.
    for (const FactorShape& f : lycoris_factor_shapes(config, site))
      adapter.factors.emplace_back(f.suffix, at::empty(f.shape, at::kFloat));
    if (config.peft_type == PeftType::Lokr)
      draw_lokr_factors(config, adapter.factors);
    else
      draw_loha_factors(config, adapter.factors);
    for (auto& entry : adapter.factors) entry.second = adapter_parameter(entry.second, site);
    made.push_back(std::move(adapter));
  }
  return made;
}

at::Tensor lycoris_delta(PeftType method, const NamedTensors& factors, double scaling, c10::IntArrayRef shape,
                         RankDropout dropout) {
  const bool lokr = method == PeftType::Lokr;
  at::Tensor weight = (lokr ? lokr_weight(factors, scaling) : loha_weight(factors, scaling)).reshape(shape);
  if (dropout.p <= 0) return weight;
  return lokr ? lokr_rank_dropout(weight, dropout.p, dropout.scale) : loha_rank_dropout(weight, dropout.p);
}

OutputAdapter lycoris_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                     std::shared_ptr<const bool> enabled) {
  // The factors are handles (moves and sharding's storage swaps keep them); the weight's shape is
  // the whole one (a weight sharded at rest is a slice).
  return [factors = adapter.factors, scaling = adapter.scaling, shape = adapter.site.weight.sizes().vec(),
          conv = adapter.site.conv, enabled, method = config.peft_type, module_dropout = config.module_dropout,
          rank_dropout = RankDropout{config.rank_dropout, config.rank_dropout_scale}](
             const at::Tensor& input, const at::Tensor& output, bool training) {
    if (!*enabled) return output.to(input.scalar_type());
    if (training && !(at::rand({1}) > module_dropout).item<bool>()) return output.to(input.scalar_type());
    const at::Tensor delta = lycoris_delta(method, factors, scaling, shape, training ? rank_dropout : RankDropout{});
    const at::Tensor x = input.to(delta.scalar_type());
    at::Tensor branch;
    if (!conv)
      branch = at::linear(x, delta);
    else if (delta.dim() == 4)
      branch = at::conv2d(x, delta, {}, conv->stride, conv->padding, conv->dilation, conv->groups);
    else
      branch = at::conv1d(x, delta, {}, conv->stride, conv->padding, conv->dilation, conv->groups);
    return (output + branch).to(input.scalar_type());
  };
}

}  // namespace acc
