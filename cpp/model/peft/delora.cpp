#include "model/peft/delora.h"

#include <ATen/core/grad_mode.h>

#include <utility>

#include "common/error.h"
#include "common/fro_norm.h"
#include "model/peft/branch_arithmetic.h"
#include "model/peft/lora_draws.h"

namespace acc {
namespace {

// PEFT's An and Bn: the norms of A's rows and of B's columns (t.norm(dim=...)), at least 1e-4.
at::Tensor row_norms(const at::Tensor& a) { return at::clamp_min(fro_norm(a, {1}), 1e-4); }
at::Tensor column_norms(const at::Tensor& b) { return at::clamp_min(fro_norm(b, {0}), 1e-4); }

}  // namespace

std::vector<FactorShape> delora_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  const int64_t r = config.rank_of(site.module), in = in_features(site), out = out_features(site);
  return {{kDeloraA, {r, in}}, {kDeloraB, {out, r}}, {kDeloraLambda, {1}}, {kDeloraWeightNorm, {in}}};
}

std::string delora_file_tensor_refusal(const std::string& suffix, const at::Tensor& tensor) {
  const int64_t dims = suffix == kDeloraA || suffix == kDeloraB ? 2 : 1;
  if (tensor.is_floating_point() && tensor.dim() == dims) return "";
  return "must be a " + concat(dims) + "-D floating-point tensor (DeLoRA's " + suffix.substr(1) + ")";
}

std::vector<LoraAdapter> make_delora_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  for (const LinearSite& site : chosen) require_plain_linear(site, "DeLoRA", "input to add the branch's output from");
  at::NoGradGuard no_grad;
  std::vector<LoraAdapter> made;
  for (const LinearSite& site : chosen) {
    const int64_t r = config.rank_of(site.module), in = in_features(site), out = out_features(site);
    at::Tensor a = at::empty({r, in}, at::kFloat), b = at::zeros({out, r}, at::kFloat);
    kaiming_uniform_sqrt5(a);
    if (!config.delora_init_weights) kaiming_uniform_sqrt5(b);
    const at::Tensor lambda = at::full({1}, config.alpha_of(site.module), at::kFloat);
    LoraAdapter adapter{site, at::Tensor(), at::Tensor(), r, 1.0};
    adapter.factors = {{kDeloraA, adapter_parameter(a, site)},
                       {kDeloraB, adapter_parameter(b, site)},
                       {kDeloraLambda, adapter_parameter(lambda, site)}};
    adapter.buffers = {{kDeloraWeightNorm, adapter_placed(fro_norm(site.weight.detach(), {0}), site)}};
    adapter.method = PeftType::Delora;
    made.push_back(std::move(adapter));
  }
  return made;
}

at::Tensor delora_merged_weight(const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& tensors) {
  const at::Tensor &a = factor_named(tensors, kDeloraA), &b = factor_named(tensors, kDeloraB);
  const at::Tensor &lambda = factor_named(tensors, kDeloraLambda), &w_norm = factor_named(tensors, kDeloraWeightNorm);
  const at::Tensor diag = at::diag_embed(lambda / static_cast<double>(adapter.r) / (row_norms(a) * column_norms(b)));
  const at::Tensor delta = at::matmul(at::matmul(b, diag), a) * w_norm.unsqueeze(0);
  return w + delta.to(w.scalar_type());
}

OutputAdapter delora_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                    std::shared_ptr<const bool> enabled) {
  // Handles: moves and sharding's storage swaps keep them.
  return [a = adapter.factors[0].second, b = adapter.factors[1].second, lambda = adapter.factors[2].second,
          w_norm = adapter.buffers[0].second, r = static_cast<double>(adapter.r), dropout = config.dropout,
          enabled](const at::Tensor& input, const at::Tensor& output, bool training) {
    if (!*enabled) return output.to(input.scalar_type());
    const at::Tensor x = branch_dropout(input, dropout, training);
    const at::Tensor scaling = (lambda / r) / (row_norms(a) * column_norms(b));
    const at::Tensor h = at::linear(at::linear(x * w_norm, a) * scaling, b);
    at::Tensor added = at::zeros_like(output);
    added.add_(h);
    return (output + added.to(output.scalar_type())).to(input.scalar_type());
  };
}

}  // namespace acc
