#include "model/peft/shira.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <utility>

#include "common/error.h"

namespace acc {
namespace {

int64_t entries_of(const LoraConfig& config, const LinearSite& site) {
  return config.r * (in_features(site) + out_features(site));
}

// PEFT's SHiRA takes nn.Linear only, whose forward it computes anew.
void check_site(const LinearSite& site, const LoraConfig& config) {
  require_plain_linear(site, "SHiRA", "input to compute the layer's output from");
  const int64_t in = in_features(site), out = out_features(site);
  if (entries_of(config, site) > in * out)
    fail(Status::InvalidArgument, "SHiRA cannot adapt '", site.module, "': r ", config.r,
         " trains r (in + out) = ", entries_of(config, site), " entries, more than its ", out, " x ", in,
         " weight holds (PEFT's ValueError)");
}

// PEFT's random_mask: the first `count` entries of torch.randperm(out * in) from a new CPU generator
// (seeded where a seed is given), as rows and columns in row-major order (torch.where on the mask).
at::Tensor random_places(int64_t out, int64_t in, int64_t count, const std::optional<int64_t>& seed) {
  at::Generator generator = at::detail::createCPUGenerator();
  if (seed) generator.set_current_seed(static_cast<uint64_t>(*seed));
  const at::Tensor flat =
      std::get<0>(at::sort(at::randperm(out * in, generator, at::TensorOptions().dtype(at::kLong)).slice(0, 0, count)));
  return at::stack({at::floor_divide(flat, in), at::remainder(flat, in)}).to(at::kInt);
}

}  // namespace

std::vector<FactorShape> shira_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  return {{kShiraWeight, {entries_of(config, site)}}};
}

std::vector<LoraAdapter> make_shira_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  for (const LinearSite& site : chosen) check_site(site, config);
  at::NoGradGuard no_grad;
  std::vector<LoraAdapter> made;
  for (const LinearSite& site : chosen) {
    const int64_t count = entries_of(config, site);
    // The mask first (its own generator), then update_layer's values.
    // Another mask_type (a file's: PEFT's mask_fn is Python code) has no mask here: its file's places
    // replace these, as PEFT's loading sets them.
    at::Tensor places = config.shira_mask_type == "random"
                            ? random_places(out_features(site), in_features(site), count, config.shira_random_seed)
                            : at::zeros({2, count}, at::kInt);
    at::Tensor values = config.shira_init_weights ? at::zeros({count}, at::kFloat) : at::randn({count}, at::kFloat);
    LoraAdapter adapter{site, at::Tensor(), at::Tensor(), config.r, 1.0};  // (PEFT's scaling: 1)
    adapter.factors = {{kShiraWeight, adapter_parameter(values, site)}};
    adapter.indices = places.to(site.weight.device());
    adapter.method = PeftType::Shira;
    made.push_back(std::move(adapter));
  }
  return made;
}

std::string shira_indices_refusal(const at::Tensor& indices, int64_t values, int64_t out, int64_t in) {
  const bool integral = !indices.is_floating_point() && !indices.is_complex() && indices.scalar_type() != at::kBool;
  if (!integral && indices.scalar_type() != at::kFloat)
    return "must hold integers (or float32 whole numbers, as PEFT writes them on Windows)";
  if (indices.dim() != 2 || indices.size(0) != 2 || indices.size(1) != values)
    return "has shape " + concat(indices.sizes()) + "; the layer's " + concat(values) + " values take [2, " +
           concat(values) + "] (rows, then columns)";
  if (indices.numel() == 0) return "";
  const at::Tensor wide = indices.to(at::kDouble);
  if (!integral && !at::equal(wide, at::floor(wide))) return "holds a place that is not a whole number";
  const at::Tensor rows = wide[0], cols = wide[1];
  if (rows.min().item<double>() < 0 || cols.min().item<double>() < 0 || rows.max().item<double>() >= out ||
      cols.max().item<double>() >= in)
    return "holds a place outside the layer's " + concat(out) + " x " + concat(in) + " weight";
  return "";
}

at::Tensor shira_merged_weight(const at::Tensor& w, const at::Tensor& values, const at::Tensor& indices) {
  const at::ScalarType wide = at::promote_types(w.scalar_type(), values.scalar_type());
  const at::Tensor places = indices.to(w.device(), at::kLong);
  return at::index_put(w.to(wide), {places[0], places[1]}, (values * 1.0).to(wide), /*accumulate=*/true)
      .to(w.scalar_type());
}

OutputAdapter shira_output_adapter(const LoraAdapter& adapter, const LoraConfig&, std::shared_ptr<const bool> enabled) {
  // Handles: moves and sharding's storage swaps keep them.
  const at::Tensor values = adapter.factors[0].second, indices = adapter.indices, weight = adapter.site.weight,
                   bias = adapter.site.bias;
  return [values, indices, weight, bias, enabled](const at::Tensor& input, const at::Tensor& output, bool) mutable {
    if (!*enabled) return output;
    if (indices.device() != weight.device()) {  // (the model moved: the places follow once)
      at::NoGradGuard no_grad;
      indices.set_data(indices.to(weight.device()));
    }
    return at::linear(input, shira_merged_weight(weight.detach(), values, indices), bias);
  };
}

}  // namespace acc
