#include "model/peft/gralora.h"

#include <ATen/core/grad_mode.h>

#include <utility>

#include "common/error.h"
#include "model/peft/branch_arithmetic.h"
#include "model/peft/lora_draws.h"

namespace acc {
namespace {

double scaling_of(const LoraConfig& config) {
  return config.gralora_alpha / static_cast<double>(config.r + config.gralora_hybrid_r);
}

void check_site(const LinearSite& site, int64_t k) {
  require_linear_or_conv1d(site, "GraLoRA", "input to add the branch's output from");
  for (const auto& [side, size] : {std::pair<const char*, int64_t>{"inputs", in_features(site)},
                                   std::pair<const char*, int64_t>{"outputs", out_features(site)}})
    require(size % k == 0, "GraLoRA cannot adapt '", site.module, "': its ", size, " ", side,
            " are not a multiple of gralora_k ", k, " (PEFT's ValueError)");
}

}  // namespace

std::vector<FactorShape> gralora_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  const int64_t k = config.gralora_k, r = config.r, h = config.gralora_hybrid_r;
  const int64_t in = in_features(site), out = out_features(site);
  std::vector<FactorShape> shapes = {{kGraloraA, {k, in / k, r}}, {kGraloraB, {k, r, out / k}}};
  if (h > 0) {
    shapes.push_back({kGraloraGeneralA, {h, in}});
    shapes.push_back({kGraloraGeneralB, {out, h}});
  }
  return shapes;
}

std::vector<LoraAdapter> make_gralora_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  const int64_t k = config.gralora_k, r = config.r, h = config.gralora_hybrid_r;
  for (const LinearSite& site : chosen) check_site(site, k);
  at::NoGradGuard no_grad;
  std::vector<LoraAdapter> made;
  for (const LinearSite& site : chosen) {
    const int64_t in = in_features(site), out = out_features(site);
    std::vector<at::Tensor> a_blocks, b_blocks;
    for (int64_t block = 0; block < k; ++block) {
      at::Tensor a = at::empty({r, in / k}, at::kFloat), b = at::zeros({out / k, r}, at::kFloat);
      kaiming_uniform_sqrt5(a);
      if (!config.gralora_init_weights) kaiming_uniform_sqrt5(b);
      a_blocks.push_back(a);
      b_blocks.push_back(b);
    }
    LoraAdapter adapter{site, at::Tensor(), at::Tensor(), r, scaling_of(config)};
    adapter.factors = {{kGraloraA, adapter_parameter(at::stack(a_blocks, 0).transpose(1, 2).contiguous(), site)},
                       {kGraloraB, adapter_parameter(at::stack(b_blocks, 0).transpose(1, 2).contiguous(), site)}};
    if (h > 0) {  // two new nn.Linear layers (their own draws), then PEFT's start
      at::Tensor general_a = new_linear_weight(h, in), general_b = new_linear_weight(out, h);
      kaiming_uniform_sqrt5(general_a);
      if (config.gralora_init_weights)
        general_b.zero_();
      else
        kaiming_uniform_sqrt5(general_b);
      adapter.factors.emplace_back(kGraloraGeneralA, adapter_parameter(general_a, site));
      adapter.factors.emplace_back(kGraloraGeneralB, adapter_parameter(general_b, site));
    }
    adapter.method = PeftType::Gralora;
    made.push_back(std::move(adapter));
  }
  return made;
}

at::Tensor gralora_merged_weight(const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors,
                                 const LoraConfig& config) {
  // (the sides of `w`, which may be a gathered copy: a sharded site's own weight is a slice)
  const at::Tensor linear = as_linear_layout(adapter.site, w);
  const int64_t k = config.gralora_k, r = config.r, in = linear.size(1), out = linear.size(0);
  at::Tensor a = factor_named(factors, kGraloraA), b = factor_named(factors, kGraloraB);
  const at::ScalarType dtype = a.scalar_type();
  const bool in_float = merges_in_float32(a);
  if (in_float) a = a.to(at::kFloat), b = b.to(at::kFloat);
  // Each input row l's factors (A[l / (in/k), l % (in/k)]) placed in its block's slot of k.
  const at::Tensor blocks = at::arange(in, at::kLong).div(in / k, "floor");
  at::Tensor scattered = at::zeros({in, k, r}, a.options());
  scattered.scatter_(1, blocks.view({in, 1, 1}).expand({in, 1, r}), a.reshape({in, r}).unsqueeze(1));
  const at::Tensor exchanged = scattered.view({in, k, k, r / k}).permute({0, 2, 1, 3}).reshape({in, k, r});
  at::Tensor delta = at::einsum("ikr, kro -> iko", {exchanged, b}).reshape({in, out}).t();
  if (config.gralora_hybrid_r > 0) {
    at::Tensor general_a = factor_named(factors, kGraloraGeneralA), general_b = factor_named(factors, kGraloraGeneralB);
    if (in_float) general_a = general_a.to(at::kFloat), general_b = general_b.to(at::kFloat);
    delta = delta + at::matmul(general_b, general_a);
  }
  delta = as_linear_layout(adapter.site, delta) * adapter.scaling;
  if (in_float) delta = delta.to(dtype);
  return (w + delta).to(w.scalar_type());
}

OutputAdapter gralora_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                     std::shared_ptr<const bool> enabled) {
  const bool hybrid = config.gralora_hybrid_r > 0;
  // Handles: moves and sharding's storage swaps keep them.
  return [a = adapter.factors[0].second, b = adapter.factors[1].second,
          general_a = hybrid ? adapter.factors[2].second : at::Tensor(),
          general_b = hybrid ? adapter.factors[3].second : at::Tensor(), k = config.gralora_k, r = config.r,
          scaling = adapter.scaling, p = config.dropout,
          enabled](const at::Tensor& input, const at::Tensor& output, bool training) {
    if (!*enabled) return output.to(input.scalar_type());
    // PEFT's batch x tokens x features (a 2-D input one token each; more dimensions, which PEFT
    // refuses, folded into the batch).
    const int64_t in = input.size(-1), tokens = input.dim() >= 3 ? input.size(-2) : 1;
    const at::Tensor x = input.reshape({-1, tokens, in}).to(a.scalar_type());
    const int64_t batch = x.size(0);
    const at::Tensor blocks =
        at::einsum("blni, nir -> blnr", {branch_dropout(x, p, training).reshape({batch, tokens, k, in / k}), a})
            .view({batch, tokens, k, k, r / k})
            .permute({0, 1, 3, 2, 4})
            .reshape({batch, tokens, k, r});
    const at::Tensor branch = at::einsum("bljr, jro -> bljo", {blocks, b}).reshape(output.sizes());
    at::Tensor result = output + branch.to(output.scalar_type()) * scaling;
    if (general_a.defined()) {
      const at::Tensor general = at::linear(at::linear(branch_dropout(x, p, training), general_a), general_b);
      result = result + general.reshape(output.sizes()).to(output.scalar_type()) * scaling;
    }
    return result.to(input.scalar_type());
  };
}

}  // namespace acc
