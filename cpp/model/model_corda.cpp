// Model's side of CorDA (model/peft/corda.h): the targeted layers' inputs watched while the model runs
// on data, as PEFT's preprocess_corda hooks them, then the adapters added from the components.
#include <c10/util/ScopeExit.h>

#include <algorithm>

#include "common/error.h"
#include "model/model.h"
#include "model/peft/corda.h"

namespace acc {

void Model::watch_layer_inputs(const std::vector<std::string>& layers, const LayerInputSeen& seen,
                               const std::function<void()>& run) {
  require(lora_.empty(), "the layers' inputs are watched on a model without adapters");
  const std::vector<LinearSite> sites = linear_sites();
  std::vector<std::function<void(OutputAdapter)>> setters;
  for (const std::string& layer : layers) {
    const auto site = std::find_if(sites.begin(), sites.end(), [&](const LinearSite& s) { return s.module == layer; });
    if (site == sites.end()) fail(Status::Internal, "no linear layer '", layer, "' to watch");
    if (!site->set_output_adapter)
      fail(Status::Unsupported, "the forward reads the weight of '", layer,
           "' itself instead of calling the layer, so its inputs cannot be seen; call the layer as a module");
    setters.push_back(site->set_output_adapter);
  }
  const auto unwatch = c10::make_scope_exit([&] {
    for (const auto& set : setters) set(nullptr);
  });
  for (size_t k = 0; k < setters.size(); ++k)
    setters[k]([&seen, k](const at::Tensor& input, const at::Tensor& output, bool) {
      seen(k, input);
      return output;
    });
  run();
}

size_t Model::add_lora_corda(LoraConfig config, const std::function<std::optional<std::vector<at::Tensor>>()>& next,
                             int64_t inputs) {
  if (config.all_linear) config = with_all_linear(config);
  config.init = "corda";
  require(config.peft_type == PeftType::Lora, "CorDA starts LoRA adapters");
  require(lora_.empty(), "the model already has adapters; CorDA starts from a model without them");
  require(inputs >= 1, "CorDA: the forward takes at least one field of each batch, got ", inputs);
  require_trainable_set_free(/*freezing=*/false);
  require_weights("CorDA");
  require_whole_parameters("CorDA");
  const std::vector<LinearSite> chosen = targeted_sites(config, adaptable_sites());
  require(!chosen.empty(), "target_modules '", config.describe_targets(), "' matches no linear layer");
  std::vector<std::string> layers;
  for (const LinearSite& site : chosen) {
    require_linear_layer(site, "CorDA");
    layers.push_back(site.module);
  }

  std::vector<CovarianceSum> sums(layers.size());
  const bool training = is_training();
  const auto restore = c10::make_scope_exit([&] { set_training(training); });
  set_training(false);  // PEFT's hooked_model.eval()
  watch_layer_inputs(
      layers,
      [&](size_t k, const at::Tensor& input) {
        sums[k].add(input, config.corda_use_float16_for_covariance, layers[k]);
      },
      [&] {
        while (std::optional<std::vector<at::Tensor>> batch = next()) {
          require(static_cast<int64_t>(batch->size()) >= inputs, "CorDA: the forward takes the batch's first ",
                  inputs, " field(s), but a batch has ", batch->size());
          forward_without_grad({batch->begin(), batch->begin() + inputs});
        }
      });
  auto starts = std::make_shared<CordaStarts>();
  for (size_t k = 0; k < chosen.size(); ++k) {
    require(sums[k].calls() > 0, "CorDA: no input of '", layers[k],
            "' was seen (the data loader gave no batch, or the forward never calls the layer)");
    starts->emplace(layers[k], corda_components(as_linear_layout(chosen[k], chosen[k].weight), sums[k].covariance(),
                                                config.rank_of(pattern_name(chosen[k])), config.corda_method));
  }
  config.corda = std::move(starts);
  return add_lora(config);
}

}  // namespace acc
