#include "model/peft/randlora.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/error.h"
#include "model/peft/vera.h"

namespace acc {
namespace {

// PEFT's RandLoraModel takes nn.Linear and transformers' Conv1D; anything else is its ValueError.
void check_site(const LinearSite& site) {
  require_linear_or_conv1d(site, "RandLoRA", "input to add the branch's output from", "randlora.bnb");
}

int64_t smaller_side(const LinearSite& site) { return std::min(in_features(site), out_features(site)); }
int64_t larger_side(const LinearSite& site) { return std::max(in_features(site), out_features(site)); }

// PEFT's num_bases: enough r-wide bases for the full rank, ceil(side / r).
int64_t bases_for(int64_t side, int64_t r) { return (side + r - 1) / r; }

// PEFT's _kaiming_init on a new bfloat16 tensor (Accelerate's is_bf16_available on the CPU):
// kaiming_uniform_(a = sqrt(5)) from `generator`, fan_in the second dimension times the rest.
at::Tensor kaiming_bf16(const std::vector<int64_t>& shape, at::Generator& generator) {
  int64_t fan_in = 1;
  for (size_t i = 1; i < shape.size(); ++i) fan_in *= shape[i];
  const double bound = std::sqrt(3.0) * (std::sqrt(2.0 / 6.0) / std::sqrt(static_cast<double>(fan_in)));
  return at::empty(shape, at::kBFloat16).uniform_(-bound, bound, generator);
}

// PEFT's sparse bases: torch.rand draws set to -1 below 1 / (2 s), 1 above 1 - 1 / (2 s), else 0.
at::Tensor ternary(const at::Tensor& drawn, double sparsity) {
  at::Tensor out = at::zeros(drawn.sizes(), at::kFloat);
  out.masked_fill_(drawn < 1 / (2 * sparsity), -1);
  out.masked_fill_(drawn > 1 - 1 / (2 * sparsity), 1);
  return out;
}

// The bases as PEFT's _pre_injection_hook draws them, each divided by its std (in its dtype).
std::pair<at::Tensor, at::Tensor> drawn_bases(const LoraConfig& config, const std::vector<int64_t>& a_shape,
                                              const std::vector<int64_t>& b_shape) {
  at::Generator generator = at::detail::createCPUGenerator(static_cast<uint64_t>(config.projection_prng_key));
  const int64_t min_dim = a_shape[2];
  at::Tensor a, b;
  if (config.randlora_sparse || config.randlora_very_sparse) {
    const double sparsity = config.randlora_very_sparse ? std::sqrt(static_cast<double>(min_dim)) : 3.0;
    const at::Tensor drawn_a = at::rand(a_shape, generator, at::kFloat);
    const at::Tensor drawn_b = at::rand(b_shape, generator, at::kFloat);
    a = ternary(drawn_a, sparsity), b = ternary(drawn_b, sparsity);
  } else {
    a = kaiming_bf16(a_shape, generator);
    std::vector<at::Tensor> slices;
    for (int64_t i = 0; i < b_shape[1]; ++i) slices.push_back(kaiming_bf16({b_shape[0], 1, b_shape[2]}, generator));
    b = at::cat(slices, 1);
  }
  return {a / a.std(), b / b.std()};
}

// PEFT's UniqueBaseGrad: lambda[:, :, None] * A * gamma[None]; its backward's einsums as PEFT writes
// them (no gradient for A).
struct UniqueBaseGrad : torch::autograd::Function<UniqueBaseGrad> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& a, const at::Tensor& lambda,
                            const at::Tensor& gamma) {
    ctx->save_for_backward({a, lambda, gamma});
    return lambda.unsqueeze(2) * a * gamma.unsqueeze(0);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& grad = grad_outputs[0];
    const at::Tensor a = saved[0].to(grad.scalar_type()), lambda = saved[1].to(grad.scalar_type()),
                     gamma = saved[2].to(grad.scalar_type());
    return {at::Tensor(), at::einsum("kbj,kvj,bj->kb", {grad, a, gamma}),
            at::einsum("kbj,kvj,kb->bj", {grad, a, lambda})};
  }
};

// PEFT's get_scaled_bases: (first, second), the layer's branch F.linear(F.linear(x, first), second).
// Half-precision bases (a model cast after the adapters were added) compute in float32 on the CPU,
// lambda and gamma too, as PEFT's cast_to_fp32.
std::pair<at::Tensor, at::Tensor> scaled_bases(const VeraProjections& bases, at::Tensor lambda, at::Tensor gamma,
                                               int64_t in, int64_t out) {
  const int64_t small = std::min(in, out), large = std::max(in, out), n = lambda.size(1);
  at::Tensor a = bases.a, b = bases.b;
  const bool half = b.scalar_type() == at::kHalf || b.scalar_type() == at::kBFloat16;
  if (half && b.device().is_cpu())
    a = a.to(at::kFloat), b = b.to(at::kFloat), lambda = lambda.to(at::kFloat), gamma = gamma.to(at::kFloat);
  const at::Tensor sliced_a = a.slice(1, 0, n).slice(2, 0, small).to(lambda.device());
  const at::Tensor sliced_b = b.slice(0, 0, large).slice(1, 0, n).to(lambda.device());
  const at::Tensor update_b = sliced_b.flatten(1);
  const at::Tensor update_a = UniqueBaseGrad::apply(sliced_a, lambda, gamma).flatten(0, 1);
  if (small == in) return {update_a, update_b};
  return {update_b.t(), update_a.t()};
}

}  // namespace

std::vector<FactorShape> randlora_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  const int64_t n = bases_for(smaller_side(site), config.r);
  return {{kRandloraLambda, {config.r, n}}, {kRandloraGamma, {n, smaller_side(site)}}};
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> randlora_bases_shapes(const LoraConfig& config,
                                                                            const std::vector<LinearSite>& chosen) {
  int64_t out = 0, in = 0;
  for (const LinearSite& site : chosen) out = std::max(out, out_features(site)), in = std::max(in, in_features(site));
  const int64_t max_dim = std::max(out, in), min_dim = std::min(out, in);
  return {{config.r, 1, min_dim}, {max_dim, bases_for(min_dim, config.r), config.r}};
}

std::vector<LoraAdapter> make_randlora_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  for (const LinearSite& site : chosen) check_site(site);
  std::vector<LoraAdapter> made;
  if (chosen.empty()) return made;
  at::NoGradGuard no_grad;
  const auto [a_shape, b_shape] = randlora_bases_shapes(config, chosen);
  // Placed as each layer's _move_adapter_to_device_of_base_layer places the shared entry (the last
  // one's place and dtype), then float32 again where that is half precision (autocast_adapter_dtype).
  auto bases = std::make_shared<VeraProjections>();
  auto [a, b] = drawn_bases(config, a_shape, b_shape);
  bases->a = adapter_placed(a, chosen.back());
  bases->b = adapter_placed(b, chosen.back());
  const double scaling = config.randlora_alpha / static_cast<double>(config.r);
  for (const LinearSite& site : chosen) {
    const int64_t small = smaller_side(site), n = bases_for(small, config.r);
    at::Tensor lambda = at::randn({config.r, n}, at::kFloat);
    at::Tensor gamma = at::ones({n, small}, at::kFloat) / static_cast<double>(larger_side(site));
    if (config.randlora_init_weights) lambda.zero_(), gamma.fill_(1.0 / static_cast<double>(std::max(n, small)));
    LoraAdapter adapter{site, at::Tensor(), at::Tensor(), config.r, scaling};
    adapter.factors = {{kRandloraLambda, adapter_parameter(lambda, site)},
                       {kRandloraGamma, adapter_parameter(gamma, site)}};
    adapter.projections = bases;
    adapter.method = PeftType::Randlora;
    made.push_back(std::move(adapter));
  }
  return made;
}

at::Tensor randlora_merged_weight(const LoraAdapter& adapter, const at::Tensor& w, const at::Tensor& lambda,
                                  const at::Tensor& gamma) {
  // The sides from `w` (stage 3 merges a gathered copy; the layer holds a slice at rest).
  const at::Tensor linear = as_linear_layout(adapter.site, w);
  const auto [first, second] = scaled_bases(*adapter.projections, lambda, gamma, linear.size(1), linear.size(0));
  at::Tensor delta = at::matmul(first.t(), second.t()).t() * adapter.scaling;
  if (adapter.site.fan_in_fan_out) delta = delta.t();
  return (w + delta.to(w.scalar_type())).to(w.scalar_type());
}

OutputAdapter randlora_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                      std::shared_ptr<const bool> enabled) {
  // Handles: moves and sharding's storage swaps keep them; the bases are the adapter's shared pair.
  return [lambda = adapter.factors[0].second, gamma = adapter.factors[1].second, bases = adapter.projections,
          in = in_features(adapter.site), out = out_features(adapter.site), dropout = config.dropout,
          scaling = adapter.scaling, enabled](const at::Tensor& input, const at::Tensor& output, bool training) {
    if (!*enabled) return output.to(input.scalar_type());
    const auto [first, second] = scaled_bases(*bases, lambda, gamma, in, out);
    at::Tensor x = input.to(second.scalar_type());
    if (dropout > 0) x = at::dropout(x, dropout, training);
    return (output + at::linear(at::linear(x, first), second) * scaling).to(input.scalar_type());
  };
}

}  // namespace acc
