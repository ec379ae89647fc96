#include "model/peft/road.h"

#include <ATen/core/grad_mode.h>

#include <utility>

#include "common/error.h"

namespace acc {
namespace {

// How many thetas (and alphas) the variant trains for `out` outputs.
int64_t road_size(const std::string& variant, int64_t out) {
  if (variant == "road_1") return out / 2;
  if (variant == "road_2") return out;
  return 2 * out;  // road_4
}

// PEFT's _prepare_cols: the rotation's first column (alpha cos theta, on the diagonal) and second
// (alpha sin theta, paired across each group's halves), one entry per output.
std::pair<at::Tensor, at::Tensor> road_columns(const std::string& variant, int64_t group_size, const at::Tensor& theta,
                                               const at::Tensor& alpha) {
  if (variant == "road_1") {  // a group's half shares its values with the other half
    const at::Tensor t = theta.reshape({-1, group_size / 2}).repeat_interleave(2, 0).flatten();
    const at::Tensor a = alpha.reshape({-1, group_size / 2}).repeat_interleave(2, 0).flatten();
    return {a * t.cos(), a * t.sin()};
  }
  if (variant == "road_2") return {alpha * theta.cos(), alpha * theta.sin()};
  const at::Tensor t = theta.reshape({-1, 2, group_size}), a = alpha.reshape({-1, 2, group_size});
  return {a.select(1, 0).flatten() * t.select(1, 0).cos().flatten(),
          a.select(1, 1).flatten() * t.select(1, 1).sin().flatten()};
}

// Each group's two halves swapped along dimension `dim` of `t` viewed as groups x 2 x halves (PEFT's
// [:, [1, 0], :] indexing: a copy).
at::Tensor halves_swapped(const at::Tensor& t, int64_t dim) {
  return t.index_select(dim, at::tensor(std::vector<int64_t>{1, 0}, at::kLong));
}

// PEFT's _get_delta_weight: the out x out matrix R with R @ y what the forward makes of y.
at::Tensor road_rotation(const NamedTensors& factors, const LoraConfig& config) {
  const int64_t half = config.road_group_size / 2;
  auto [first, second] = road_columns(config.road_variant, config.road_group_size, factor_named(factors, kRoadTheta),
                                      factor_named(factors, kRoadAlpha));
  at::Tensor rotation = at::diag(first);
  const int64_t size = second.size(0);
  const at::Tensor swapped = halves_swapped(second.reshape({-1, 2, half}), 1).flatten();
  at::Tensor paired = halves_swapped(at::diag(swapped).reshape({-1, 2, half, size}), 1);
  paired.select(1, 0).mul_(-1);
  rotation += paired.reshape({size, size});
  return rotation;
}

}  // namespace

std::vector<FactorShape> road_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  const int64_t size = road_size(config.road_variant, out_features(site));
  return {{kRoadTheta, {size}}, {kRoadAlpha, {size}}};
}

std::vector<LoraAdapter> make_road_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  for (const LinearSite& site : chosen) {
    require_plain_linear(site, "RoAd", "output to rotate");
    require(out_features(site) % config.road_group_size == 0, "RoAd cannot adapt '", site.module, "': its ",
            out_features(site), " outputs are not a multiple of group_size ", config.road_group_size,
            " (PEFT's ValueError)");
  }
  at::NoGradGuard no_grad;
  std::vector<LoraAdapter> made;
  for (const LinearSite& site : chosen) {
    const int64_t size = road_size(config.road_variant, out_features(site));
    at::Tensor theta = at::zeros({size}, at::kFloat), alpha = at::ones({size}, at::kFloat);
    if (!config.road_init_weights) {
      theta.normal_(0.0, 0.5);
      alpha.normal_(1.0, 0.5);
    }
    LoraAdapter adapter{site, at::Tensor(), at::Tensor(), 0, 1.0};
    adapter.factors = {{kRoadTheta, adapter_parameter(theta, site)}, {kRoadAlpha, adapter_parameter(alpha, site)}};
    adapter.method = PeftType::Road;
    made.push_back(std::move(adapter));
  }
  return made;
}

at::Tensor road_merged_weight(const at::Tensor& w, const NamedTensors& factors, const LoraConfig& config) {
  return at::matmul(road_rotation(factors, config).to(w.scalar_type()), w).contiguous().to(w.scalar_type());
}

at::Tensor road_merged_bias(const at::Tensor& bias, const NamedTensors& factors, const LoraConfig& config) {
  return at::matmul(road_rotation(factors, config).to(bias.scalar_type()), bias).contiguous().to(bias.scalar_type());
}

OutputAdapter road_output_adapter(const LoraAdapter& adapter, const LoraConfig& config,
                                  std::shared_ptr<const bool> enabled) {
  // Handles: moves and sharding's storage swaps keep them.
  return [theta = adapter.factors[0].second, alpha = adapter.factors[1].second, variant = config.road_variant,
          group_size = config.road_group_size, enabled](const at::Tensor&, const at::Tensor& output, bool) {
    if (!*enabled) return output;
    const at::Tensor y = output.to(theta.scalar_type());
    auto [first, second] = road_columns(variant, group_size, theta, alpha);
    const at::Tensor grouped = y.reshape({-1, 2, group_size / 2});
    const at::Tensor rotated_half = at::stack({grouped.select(1, 1).neg(), grouped.select(1, 0)}, 1).reshape(y.sizes());
    return (y * first + rotated_half * second).to(output.scalar_type());
  };
}

}  // namespace acc
