#include "model/peft/hra.h"

#include <ATen/core/grad_mode.h>

#include <optional>
#include <string>
#include <utility>

#include "common/autocast_guard.h"
#include "common/error.h"
#include "common/fro_norm.h"
#include "model/peft/lora_draws.h"

namespace acc {
namespace {

// The layers PEFT's HRA takes, called as modules: the adapter computes the layer anew.
void check_site(const LinearSite& site) {
  require_linear_or_plain_conv2d(site, "HRA", "hra.Conv2d");
  if (!site.set_output_adapter) refuse_uncalled_layer(site, "HRA", "call to compute anew with the reflected weight");
}

// The columns of `u` one after another: each made orthogonal to the ones before (Gram-Schmidt) and
// normalised, then I - 2 U U^T.
at::Tensor gram_schmidt_rotation(const at::Tensor& u) {
  const int64_t rank = u.size(1);
  std::vector<at::Tensor> columns;
  for (int64_t i = 0; i < rank; ++i) {
    at::Tensor ui = u.select(1, i);
    if (i == 0) {
      columns.push_back((ui / fro_norm(ui, {})).view({-1, 1}));
      continue;
    }
    ui = ui.view({-1, 1});
    for (int64_t j = 0; j < i; ++j) ui = ui - at::matmul(columns[j].t(), ui) * columns[j];
    columns.push_back((ui / fro_norm(ui, {})).view({-1, 1}));
  }
  const at::Tensor w = at::cat(columns, 1);
  return at::eye(u.size(0), u.options()) - at::matmul(w * 2, w.t());
}

}  // namespace

std::vector<FactorShape> hra_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  return {{kHraU, {unrolled_in_features(site), config.r}}};
}

std::vector<LoraAdapter> make_hra_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  for (const LinearSite& site : chosen) check_site(site);
  at::NoGradGuard no_grad;
  std::vector<LoraAdapter> made;
  for (const LinearSite& site : chosen) {
    const int64_t n = unrolled_in_features(site), r = config.r;
    at::Tensor u;
    if (config.hra_init_weights && r % 2 == 0) {  // pairs of equal reflections: the layer unchanged
      at::Tensor half = at::zeros({n, r / 2}, at::kFloat);
      kaiming_uniform_sqrt5(half);
      u = half.repeat_interleave(2, 1);
    } else {  // (PEFT warns that an odd r cannot start unchanged)
      u = at::empty({n, r}, at::kFloat);
      kaiming_uniform_sqrt5(u);
    }
    LoraAdapter adapter{site, at::Tensor(), at::Tensor(), r, 1.0};
    adapter.factors = {{kHraU, adapter_parameter(u, site)}};
    adapter.method = PeftType::Hra;
    made.push_back(std::move(adapter));
  }
  return made;
}

at::Tensor hra_rotation(const at::Tensor& hra_u, bool apply_gs) {
  if (apply_gs) return gram_schmidt_rotation(hra_u);
  const at::Tensor unit = hra_u / fro_norm(hra_u, {0});
  at::Tensor weight = at::eye(hra_u.size(0), hra_u.options());
  for (int64_t i = 0; i < hra_u.size(1); ++i) {
    const at::Tensor ui = unit.select(1, i).view({-1, 1});
    weight = weight - at::matmul(at::matmul(weight * 2, ui), ui.t());
  }
  return weight;
}

at::Tensor hra_merged_weight(const at::Tensor& w, const at::Tensor& hra_u, bool apply_gs) {
  const at::Tensor h = hra_rotation(hra_u, apply_gs);
  return at::mm(w.reshape({w.size(0), -1}).to(h.scalar_type()), h).view(w.sizes()).to(w.scalar_type());
}

OutputAdapter hra_output_adapter(const LoraAdapter& adapter, bool apply_gs, std::shared_ptr<const bool> enabled) {
  // Handles: moves and sharding's storage swaps keep them.
  const at::Tensor u = adapter.factors[0].second, weight = adapter.site.weight, bias = adapter.site.bias;
  const bool conv = adapter.site.conv.has_value();
  const int64_t stride = conv ? adapter.site.conv->stride.front() : 1,
                padding = conv ? adapter.site.conv->padding.front() : 0;
  return [u, weight, bias, conv, stride, padding, apply_gs, enabled](const at::Tensor& input, const at::Tensor& output,
                                                                     bool) {
    if (!*enabled) return output.to(input.scalar_type());  // (PEFT's forward casts either way)
    // PEFT's forward: torch.eye times H, the frozen weight's data times that, the input and bias cast
    // to its dtype. The first product is H itself (one term in each sum) in the dtype autocast gives
    // mm: taken so, without its in x in x in multiply.
    const at::Tensor h = hra_rotation(u, apply_gs);
    const std::optional<at::ScalarType> low = current_autocast(input.device().type());
    const at::Tensor reflected = low && h.scalar_type() != at::kDouble ? h.to(*low) : h;
    const at::Tensor w = weight.detach().reshape({weight.size(0), -1}).to(reflected.scalar_type());
    const at::Tensor adapted = at::mm(w, reflected);
    const at::Tensor b = bias.defined() ? bias.to(adapted.scalar_type()) : bias;
    const at::Tensor x = input.to(adapted.scalar_type());
    const at::Tensor result = conv
                                  ? at::conv2d(x, adapted.view(weight.sizes()), b, {stride, stride}, {padding, padding})
                                  : at::linear(x, adapted, b);
    return result.to(input.scalar_type());
  };
}

}  // namespace acc
