#include "model/peft/ia3.h"

#include <string>
#include <utility>

#include "common/error.h"

namespace acc {
namespace {

// PEFT's IA3Model._create_new_module takes these; anything else is its ValueError.
void check_site(const LinearSite& site, bool feedforward) {
  const bool conv = site.conv.has_value();
  if (site.embedding || site.attention || adapts_parameter(site) ||
      (conv && site.weight.dim() != 4 && site.weight.dim() != 5))
    fail(Status::InvalidArgument, "IA3 cannot adapt '", site.module,
         "': PEFT's IA3 takes torch.nn.Linear, transformers' Conv1D, torch.nn.Conv2d and torch.nn.Conv3d only");
  if (site.quantized)
    fail(Status::Unsupported, "IA3 on the quantised layer '", site.module,
         "' is not built (PEFT's ia3.bnb layers); leave it out of target_modules");
  if (!site.set_output_adapter) refuse_uncalled_layer(site, "IA3", "input or output to scale as PEFT's layer does");
  if (feedforward && !site.set_input_adapter)
    fail(Status::Unsupported, "IA3 cannot scale the input of '", site.module,
         "' (feedforward_modules): the layer takes no input adapter here");
}

}  // namespace

std::vector<int64_t> ia3_vector_shape(const LinearSite& site, bool feedforward) {
  if (site.conv) {
    const int64_t channels = feedforward ? site.weight.size(1) * site.conv->groups : site.weight.size(0);
    std::vector<int64_t> shape(static_cast<size_t>(site.weight.dim()), 1);
    shape[1] = channels;
    return shape;
  }
  return feedforward ? std::vector<int64_t>{1, in_features(site)} : std::vector<int64_t>{out_features(site), 1};
}

std::vector<LoraAdapter> make_ia3_adapters(const LoraConfig& config, const std::vector<LinearSite>& chosen) {
  for (const LinearSite& site : chosen) check_site(site, config.is_feedforward(site.module));
  std::vector<LoraAdapter> made;
  at::NoGradGuard no_grad;
  for (const LinearSite& site : chosen) {
    LoraAdapter adapter{site, at::Tensor(), at::Tensor(), 0, 1.0};
    adapter.feedforward = config.is_feedforward(site.module);
    adapter.method = PeftType::Ia3;
    at::Tensor vector = at::randn(ia3_vector_shape(site, adapter.feedforward), at::kFloat);
    if (config.init_ia3_weights) vector.fill_(1.0);
    adapter.ia3 = adapter_parameter(vector, site);
    made.push_back(std::move(adapter));
  }
  return made;
}

OutputAdapter ia3_output_adapter(const LoraAdapter& adapter, std::shared_ptr<const bool> enabled) {
  const at::Tensor vector = adapter.ia3;  // a handle: moves and sharding's storage swaps keep it
  if (adapter.site.conv)                  // PEFT's _ConvNd.forward ends in result.to(x's dtype) either way
    return
        [vector, enabled, feedforward = adapter.feedforward](const at::Tensor& input, const at::Tensor& output, bool) {
          if (!*enabled || feedforward) return output.to(input.scalar_type());
          return (output.to(vector.scalar_type()) * vector).to(input.scalar_type());
        };
  if (adapter.feedforward) return nullptr;
  return [vector, enabled](const at::Tensor&, const at::Tensor& output, bool) {
    if (!*enabled) return output;
    return (output * vector.flatten()).to(output.scalar_type());
  };
}

InputAdapter ia3_input_adapter(const LoraAdapter& adapter, std::shared_ptr<const bool> enabled) {
  if (!adapter.feedforward) return nullptr;
  const at::Tensor vector = adapter.ia3;
  if (adapter.site.conv)  // cast to the weight's dtype (a handle, which Model::to keeps)
    return [vector, enabled, weight = adapter.site.weight](const at::Tensor& input, bool) {
      if (!*enabled) return input;
      return (input.to(vector.scalar_type()) * vector).to(weight.scalar_type());
    };
  return [vector, enabled](const at::Tensor& input, bool) {
    if (!*enabled) return input;
    return (input.to(vector.scalar_type()) * vector.flatten()).to(input.scalar_type());
  };
}

at::Tensor ia3_weight(const at::Tensor& w, const LoraAdapter& adapter, const at::Tensor& vector) {
  if (adapter.site.conv)  // (a grouped convolution's input vector cannot merge: LoraAdapters::require_mergeable)
    return (w * (adapter.feedforward ? vector : vector.transpose(0, 1))).to(w.scalar_type());
  return (w * (adapter.site.fan_in_fan_out ? vector.t() : vector)).to(w.scalar_type());
}

at::Tensor ia3_bias(const at::Tensor& bias, const at::Tensor& vector) {
  return (bias * vector.reshape(bias.sizes())).to(bias.scalar_type());
}

}  // namespace acc
