#include "model/peft/adalora.h"

#include <ATen/core/grad_mode.h>

#include <string>
#include <utility>

#include "common/error.h"
#include "common/fro_norm.h"

namespace acc {
namespace {

// PEFT's AdaLoraModel takes nn.Linear, transformers' Conv1D and nn.Conv2d; anything else is its ValueError.
void check_site(const LinearSite& site) {
  const bool conv2d = site.conv && site.weight.dim() == 4;
  if (site.embedding || site.attention || (site.conv && !conv2d) || adapts_parameter(site))
    fail(Status::InvalidArgument, "AdaLoRA cannot adapt '", site.module,
         "': PEFT's AdaLoRA takes torch.nn.Linear, transformers' Conv1D and torch.nn.Conv2d only");
  if (site.quantized)
    fail(Status::Unsupported, "AdaLoRA on the quantised layer '", site.module, "' is not built (PEFT's adalora.bnb)");
  if (conv2d && site.conv->groups != 1)
    fail(Status::Unsupported, "AdaLoRA on the convolution '", site.module, "' with groups ", site.conv->groups,
         ": its delta (out x in x kernel) has no weight of the layer's shape (PEFT's SVDConv2d fails on it)");
  if (conv2d && !site.conv->refusal.empty())
    fail(Status::Unsupported, "AdaLoRA cannot adapt the convolution '", site.module, "': ", site.conv->refusal);
  if (!site.set_output_adapter) refuse_uncalled_layer(site, "AdaLoRA", "input to add the branch's output from");
}

// The rows the layer's tensors hold: init_r, or a file's kept entries (AdaloraConfig::held).
int64_t rank_of(const LoraConfig& config, const LinearSite& site) {
  return static_cast<int64_t>(config.adalora.held_rows(site.module).size());
}

struct Drawn {
  at::Tensor a, b, e;
};

// update_layer's draws at `r`: A, E, B and ranknum from torch.randn, then (init_lora_weights) E
// zeroed and A, B from normal(0, 0.02), A first.
Drawn draw(const LinearSite& site, int64_t r, bool init) {
  Drawn d;
  d.a = at::randn({r, unrolled_in_features(site)}, at::kFloat);
  d.e = at::randn({r, 1}, at::kFloat);
  d.b = at::randn({out_features(site), r}, at::kFloat);
  (void)at::randn({1}, at::kFloat);  // ranknum's, then filled with r
  if (init) {
    d.e.zero_();
    d.a.normal_(0.0, 0.02);
    d.b.normal_(0.0, 0.02);
  }
  return d;
}

// (B @ (A * E)) * scaling / (ranknum + 1e-5): PEFT's delta, in B A's layout (PEFT transposes or
// reshapes it after; an element-wise scaling commutes with both).
at::Tensor scaled_product(const at::Tensor& a, const at::Tensor& b, const at::Tensor& e, const at::Tensor& ranknum,
                          double scaling) {
  return at::matmul(b, a * e) * scaling / (ranknum + 1e-5);
}

}  // namespace

std::vector<FactorShape> adalora_factor_shapes(const LoraConfig& config, const LinearSite& site) {
  const int64_t r = rank_of(config, site);
  return {{kAdaloraA, {r, unrolled_in_features(site)}}, {kAdaloraB, {out_features(site), r}}, {kAdaloraE, {r, 1}}};
}

std::vector<LoraAdapter> make_adalora_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  for (const LinearSite& site : chosen) check_site(site);
  for (const AdaloraPattern* pattern : {&config.adalora.rank_pattern, &config.adalora.held})
    for (const auto& [module, kept] : *pattern) {
      bool found = false;
      for (const LinearSite& site : chosen) found = found || site.module == module;
      require(found, "AdaLoRA's rank_pattern names '", module, "', which the configuration does not adapt");
    }
  at::NoGradGuard no_grad;
  const int64_t init_r = config.adalora.init_r;
  std::vector<Drawn> drawn;
  for (const LinearSite& site : chosen) drawn.push_back(draw(site, init_r, config.adalora.init_weights));
  // A file's pruned layers, drawn again at their kept rank in the pattern's order (its values replace them).
  for (const auto& [module, kept] : config.adalora.held)
    for (size_t k = 0; k < chosen.size(); ++k)
      if (chosen[k].module == module)
        drawn[k] = draw(chosen[k], rank_of(config, chosen[k]), config.adalora.init_weights);
  std::vector<LoraAdapter> made;
  for (size_t k = 0; k < chosen.size(); ++k) {
    const LinearSite& site = chosen[k];
    // PEFT's scaling is lora_alpha itself (else the rank the layer was last made at: a file's kept
    // rank, PEFT's resize); ranknum (init_r) divides it at each use.
    const double scaling = config.alpha > 0 ? config.alpha : static_cast<double>(rank_of(config, site));
    LoraAdapter adapter{site, at::Tensor(), at::Tensor(), rank_of(config, site), scaling};
    adapter.factors = {{kAdaloraA, adapter_parameter(drawn[k].a, site)},
                       {kAdaloraB, adapter_parameter(drawn[k].b, site)},
                       {kAdaloraE, adapter_parameter(drawn[k].e, site)}};
    // In the layer's dtype, as PEFT moves it (its autocast to float32 takes A, B and E only).
    adapter.ranknum = at::full({1}, static_cast<double>(init_r), site.weight.options());
    adapter.method = PeftType::Adalora;
    made.push_back(std::move(adapter));
  }
  return made;
}

at::Tensor adalora_delta(const LoraAdapter& adapter, const NamedTensors& factors, c10::IntArrayRef shape) {
  const at::Tensor delta = scaled_product(factor_named(factors, kAdaloraA), factor_named(factors, kAdaloraB),
                                          factor_named(factors, kAdaloraE), adapter.ranknum, adapter.scaling);
  if (adapter.site.conv) return delta.reshape(shape);
  return adapter.site.fan_in_fan_out ? delta.t() : delta;
}

OutputAdapter adalora_output_adapter(const LoraAdapter& adapter, double dropout, std::shared_ptr<const bool> enabled) {
  // Handles: moves and sharding's storage swaps keep them.
  return [a = factor_named(adapter.factors, kAdaloraA), b = factor_named(adapter.factors, kAdaloraB),
          e = factor_named(adapter.factors, kAdaloraE), ranknum = adapter.ranknum, scaling = adapter.scaling,
          conv = adapter.site.conv, shape = adapter.site.weight.sizes().vec(), dropout,
          enabled](const at::Tensor& input, const at::Tensor& output, bool training) {
    if (!*enabled) return output;
    at::Tensor x = input.to(a.scalar_type());
    if (dropout > 0) x = at::dropout(x, dropout, training);
    if (conv) {
      const at::Tensor w = scaled_product(a, b, e, ranknum, scaling).reshape(shape);
      return (output + at::conv2d(x, w, {}, conv->stride, conv->padding, conv->dilation, conv->groups))
          .to(output.scalar_type());
    }
    return (output + at::matmul(at::matmul(x, (a * e).t()), b.t()) * scaling / (ranknum + 1e-5))
        .to(output.scalar_type());
  };
}

at::Tensor adalora_orthogonal_regularization(const std::vector<LoraAdapter>& adapters) {
  at::Tensor sum;
  int64_t count = 0;
  for (const LoraAdapter& adapter : adapters)
    for (const bool is_a : {true, false}) {
      const at::Tensor& p = factor_named(adapter.factors, is_a ? kAdaloraA : kAdaloraB);
      const at::Tensor covariance = is_a ? at::matmul(p, p.t()) : at::matmul(p.t(), p);
      const at::Tensor identity = at::eye(covariance.size(0), covariance.size(1), covariance.options());
      const at::Tensor norm = fro_norm(covariance - identity, {});  // torch.norm(..., p="fro")
      // PEFT's sum starts from the integer 0 (0 + norm, then in place).
      sum = sum.defined() ? sum.add_(norm) : at::add(norm, 0);
      ++count;
    }
  require(count > 0, "the model has no AdaLoRA adapters to regularize");
  return sum / count;
}

NamedTensors adalora_saved_factors(const LoraAdapter& adapter, const AdaloraConfig& config) {
  // The rows (of those the tensors hold) whose entries the pattern keeps.
  const std::vector<int64_t> rows = config.held_rows(adapter.site.module);
  const std::vector<bool>* kept = config.kept(adapter.site.module);
  std::vector<int64_t> indices;
  for (size_t j = 0; j < rows.size(); ++j)
    if (!kept || (*kept)[static_cast<size_t>(rows[j])]) indices.push_back(static_cast<int64_t>(j));
  const at::Tensor selected = at::tensor(indices, at::kLong);
  NamedTensors out;
  for (const auto& [suffix, tensor] : adapter.factors) {
    at::Tensor t = tensor.detach();
    // Only the kept rows (B: columns), where the pattern removes some (PEFT keeps the tensor else).
    const int64_t dim = suffix == std::string(kAdaloraB) ? 1 : 0;
    if (static_cast<int64_t>(indices.size()) != t.size(dim)) t = t.index_select(dim, selected.to(t.device()));
    out.emplace_back(suffix, t);
  }
  return out;
}

}  // namespace acc
