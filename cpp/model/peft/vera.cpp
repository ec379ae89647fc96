#include "model/peft/vera.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "common/error.h"
#include "model/peft/branch_arithmetic.h"

namespace acc {
namespace {

// PEFT's VeraModel and PveraModel take nn.Linear and transformers' Conv1D; anything else is their TypeError.
void check_site(const LinearSite& site, PeftType method) {
  const bool pvera = method == PeftType::Pvera;
  require_linear_or_conv1d(site, peft_method_name(method), "input to add the branch's output from",
                           pvera ? "pvera.bnb" : "vera.bnb");
}

// PEFT's _kaiming_init: uniform in +- sqrt(3) * sqrt(2) / sqrt(fan_in), drawn from `generator`.
at::Tensor kaiming_drawn(const std::vector<int64_t>& shape, at::Generator& generator) {
  const double bound = std::sqrt(3.0) * (std::sqrt(2.0) / std::sqrt(static_cast<double>(shape[1])));
  return at::empty(shape, at::kFloat).uniform_(-bound, bound, generator);
}

}  // namespace

std::vector<FactorShape> vera_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  return {{kVeraLambdaB, {out_features(site)}}, {kVeraLambdaD, {config.r}}};
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> projection_shapes_of(int64_t a_rows, int64_t r,
                                                                           const std::vector<LinearSite>& chosen) {
  int64_t out = 0, in = 0;
  for (const LinearSite& site : chosen) out = std::max(out, out_features(site)), in = std::max(in, in_features(site));
  return {{a_rows, in}, {out, r}};
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> vera_projection_shapes(const LoraConfig& config,
                                                                             const std::vector<LinearSite>& chosen) {
  return projection_shapes_of(config.r, config.r, chosen);
}

std::vector<LoraAdapter> make_vector_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen,
                                              VectorNames names, int64_t d_size,
                                              const std::pair<std::vector<int64_t>, std::vector<int64_t>>& shapes) {
  for (const LinearSite& site : chosen) check_site(site, config.peft_type);
  std::vector<LoraAdapter> made;
  if (chosen.empty()) return made;
  at::NoGradGuard no_grad;
  // The projections first (PEFT's _pre_injection_hook), then moved to the layers' place and dtype
  // as each layer's _move_adapter_to_device_of_base_layer replaces the shared entry (the last
  // one's). Half precision stays float32 here, as the vectors do: PEFT's forward would multiply
  // float32 inputs with half-precision projections, which fails.
  at::Generator generator = at::detail::createCPUGenerator(static_cast<uint64_t>(config.projection_prng_key));
  auto projections = std::make_shared<VeraProjections>();
  projections->a = adapter_placed(kaiming_drawn(shapes.first, generator), chosen.back());
  projections->b = adapter_placed(kaiming_drawn(shapes.second, generator), chosen.back());
  for (const LinearSite& site : chosen) {
    LoraAdapter adapter{site, at::Tensor(), at::Tensor(), config.r, config.scaling_of(site.module)};  // (unused)
    at::Tensor lambda_b = at::ones({out_features(site)}, at::kFloat), lambda_d = at::randn({d_size}, at::kFloat);
    if (config.vera_init_weights) lambda_d.fill_(config.d_initial), lambda_b.zero_();
    adapter.factors = {{names.suffix_b, adapter_parameter(lambda_b, site)},
                       {names.suffix_d, adapter_parameter(lambda_d, site)}};
    adapter.projections = projections;
    adapter.method = config.peft_type;
    made.push_back(std::move(adapter));
  }
  return made;
}

std::vector<LoraAdapter> make_vera_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  return make_vector_adapters(config, chosen, {kVeraLambdaB, kVeraLambdaD}, config.r,
                              vera_projection_shapes(config, chosen));
}

at::Tensor vera_delta(const LoraAdapter& adapter, const at::Tensor& lambda_b, const at::Tensor& lambda_d,
                      int64_t in_features) {
  at::Tensor a = adapter.projections->a, b = adapter.projections->b, lb = lambda_b, ld = lambda_d;
  // PEFT computes half precision on the CPU in float32 and returns the projections' dtype.
  const at::ScalarType dtype = b.scalar_type();
  const bool widen = merges_in_float32(b);
  if (widen) a = a.to(at::kFloat), b = b.to(at::kFloat), lb = lb.to(at::kFloat), ld = ld.to(at::kFloat);
  const at::Tensor sliced_a = a.slice(1, 0, in_features).slice(0, 0, ld.size(0)).to(ld.device());
  const at::Tensor sliced_b = b.slice(0, 0, lambda_b.size(0)).to(ld.device());  // out_features entries
  at::Tensor delta = at::matmul(lb.unsqueeze(-1) * sliced_b, ld.unsqueeze(-1) * sliced_a);
  if (adapter.site.fan_in_fan_out) delta = delta.t();
  return widen ? delta.to(dtype) : delta;
}

OutputAdapter vera_output_adapter(const LoraAdapter& adapter, double dropout, std::shared_ptr<const bool> enabled) {
  // Handles: moves and sharding's storage swaps keep them; the projections are the adapter's shared pair.
  return [lambda_b = adapter.factors[0].second, lambda_d = adapter.factors[1].second, projections = adapter.projections,
          in = in_features(adapter.site), out = out_features(adapter.site), dropout,
          enabled](const at::Tensor& input, const at::Tensor& output, bool training) {
    if (!*enabled) return output.to(input.scalar_type());
    const at::Tensor sliced_a = projections->a.slice(1, 0, in).to(input.device());
    const at::Tensor sliced_b = projections->b.slice(0, 0, out).to(input.device());
    at::Tensor x = input.to(lambda_d.scalar_type());
    if (dropout > 0) x = at::dropout(x, dropout, training);
    const at::Tensor branch = lambda_b * at::linear(lambda_d * at::linear(x, sliced_a), sliced_b);
    return (output + branch).to(output.scalar_type()).to(input.scalar_type());
  };
}

}  // namespace acc
