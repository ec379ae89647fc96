#include "model/peft/pvera.h"

#include <ATen/CPUGeneratorImpl.h>

#include <utility>

#include "model/peft/branch_arithmetic.h"
#include "model/peft/vera.h"

namespace acc {

std::vector<FactorShape> pvera_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  return {{kPveraLambdaB, {out_features(site)}}, {kPveraLambdaD, {2 * config.r}}};
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> pvera_projection_shapes(const LoraConfig& config,
                                                                              const std::vector<LinearSite>& chosen) {
  return projection_shapes_of(2 * config.r, config.r, chosen);
}

std::vector<LoraAdapter> make_pvera_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  std::vector<LoraAdapter> made = make_vector_adapters(config, chosen, {kPveraLambdaB, kPveraLambdaD}, 2 * config.r,
                                                       pvera_projection_shapes(config, chosen));
  if (config.pvera_generator_seed)
    for (LoraAdapter& adapter : made)
      adapter.generator = at::detail::createCPUGenerator(static_cast<uint64_t>(*config.pvera_generator_seed));
  return made;
}

at::Tensor pvera_merged_weight(const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors) {
  const at::Tensor& lambda_d = factor_named(factors, kPveraLambdaD);
  const at::Tensor mean_half = lambda_d.slice(0, 0, lambda_d.size(0) / 2);
  const int64_t in = as_linear_layout(adapter.site, w).size(1);
  return (w + vera_delta(adapter, factor_named(factors, kPveraLambdaB), mean_half, in)).to(w.scalar_type());
}

OutputAdapter pvera_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                   std::shared_ptr<const bool> enabled) {
  // Handles: moves and sharding's storage swaps keep them; the projections are the adapter's shared
  // pair, the generator the layer's own (shared with the adapter, so its stream goes on).
  return [lambda_b = adapter.factors[0].second, lambda_d = adapter.factors[1].second, projections = adapter.projections,
          generator = adapter.generator, in = in_features(adapter.site), out = out_features(adapter.site),
          dropout = config.dropout, sample_at_inference = config.pvera_sample_at_inference,
          enabled](const at::Tensor& input, const at::Tensor& output, bool training) {
    if (!*enabled) return output.to(input.scalar_type());
    const at::Tensor sliced_a = projections->a.slice(1, 0, in).to(input.device());
    const at::Tensor sliced_b = projections->b.slice(0, 0, out).to(input.device());
    const at::Tensor x = branch_dropout(input.to(lambda_d.scalar_type()), dropout, training);
    const std::vector<at::Tensor> halves = (lambda_d * at::linear(x, sliced_a)).chunk(2, -1);
    at::Tensor z = halves[0];
    if (training || sample_at_inference) {  // (PEFT's _reparametrize)
      const at::Tensor std = at::exp(0.5 * halves[1]);
      const at::Tensor eps = generator.defined()
                                 ? at::randn(std.sizes(), generator, std.options().device(at::kCPU)).to(std.device())
                                 : at::randn_like(std);
      z = z + eps * std;
    }
    return (output + lambda_b * at::linear(z, sliced_b)).to(input.scalar_type());
  };
}

}  // namespace acc
