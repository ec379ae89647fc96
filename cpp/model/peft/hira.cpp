#include "model/peft/hira.h"

#include <ATen/core/grad_mode.h>

#include <cmath>
#include <utility>

#include "common/error.h"
#include "model/peft/branch_arithmetic.h"
#include "model/peft/lora_draws.h"

namespace acc {
namespace {

void check_site(const LinearSite& site) {
  if (site.embedding || site.conv)
    fail(Status::Unsupported, "HiRA on '", site.module,
         "' is not built: PEFT's HiRA layers for embeddings and convolutions are not (nn.Linear and Conv1D are)");
  require_linear_or_conv1d(site, "HiRA", "weight to modulate and input to add the branch's output from");
}

}  // namespace

std::vector<FactorShape> hira_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  const int64_t r = config.rank_of(site.module);
  return {{kHiraA, {r, in_features(site)}}, {kHiraB, {out_features(site), r}}};
}

std::vector<LoraAdapter> make_hira_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  for (const LinearSite& site : chosen) check_site(site);
  at::NoGradGuard no_grad;
  std::vector<LoraAdapter> made;
  for (const LinearSite& site : chosen) {
    const int64_t r = config.rank_of(site.module);
    at::Tensor a = at::randn({r, in_features(site)}, at::kFloat), b = at::randn({out_features(site), r}, at::kFloat);
    if (config.hira_init == "true") {
      kaiming_uniform_sqrt5(a);
      b.zero_();
    } else if (config.hira_init == "gaussian") {
      a.normal_(0.0, 1.0 / static_cast<double>(r));
      b.zero_();
    }
    LoraAdapter adapter{site, at::Tensor(), at::Tensor(), r, 1.0};
    adapter.factors = {{kHiraA, adapter_parameter(a, site)}, {kHiraB, adapter_parameter(b, site)}};
    adapter.method = PeftType::Hira;
    made.push_back(std::move(adapter));
  }
  return made;
}

at::Tensor hira_merged_weight(const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors) {
  at::Tensor a = factor_named(factors, kHiraA), b = factor_named(factors, kHiraB);
  const at::ScalarType dtype = b.scalar_type();
  const bool in_float = merges_in_float32(b);
  if (in_float) a = a.to(at::kFloat), b = b.to(at::kFloat);
  at::Tensor delta = as_linear_layout(adapter.site, at::matmul(b, a));
  if (in_float) delta = delta.to(dtype);
  // (PEFT's new_delta: zeros of the weight's dtype plus the delta cast to it)
  const at::Tensor product = at::zeros_like(w) + delta.to(w.scalar_type());
  const at::Tensor* unmerged = find_factor(factors, kHiraUnmergedWeight);
  return w + (unmerged ? *unmerged : w) * product;
}

OutputAdapter hira_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                  std::shared_ptr<const bool> enabled) {
  // Handles: moves and sharding's storage swaps keep them (the weight too).
  return [a = adapter.factors[0].second, b = adapter.factors[1].second, weight = adapter.site.weight,
          transposed = adapter.site.fan_in_fan_out, dropout = config.dropout,
          enabled](const at::Tensor& input, const at::Tensor& output, bool training) {
    if (!*enabled) return output;
    const at::Tensor product = at::mm(a.t(), b.t());  // in x out
    const at::Tensor x = input.to(a.scalar_type());
    const at::Tensor dropped = branch_dropout(x, dropout, training);
    const at::Tensor w = transposed ? weight.t() : weight;
    const at::Tensor branch = at::linear(dropped, w * product.t());
    return (output + branch).to(output.scalar_type());
  };
}

}  // namespace acc
