// Model's side of EVA (model/peft/eva.h): which adapters it can compute, and the model run as PEFT's
// get_eva_state_dict runs it (evaluation mode, no gradients, adapters disabled, inputs on the
// model's device).
#include <algorithm>

#include "common/error.h"
#include "model/model.h"

namespace acc {
namespace {

// Fails (Unsupported) for an adapter EVA does not compute here (PEFT re-initialises convolutions',
// embeddings' and attention's as init_lora_weights true), or whose layer's input cannot be seen.
void require_eva_layer(const LinearSite& site) {
  require_linear_layer(site, "EVA");
  if (!site.set_output_adapter)
    fail(Status::Unsupported, "EVA: the forward reads the weight of '", site.module,
         "' itself instead of calling the layer, so the layer's inputs cannot be seen (PEFT's hook would not see "
         "them either); call the layer as a module");
}

}  // namespace

size_t Model::initialize_lora_eva(const EvaSource& source, const EvaReading& reading,
                                  const std::function<at::Tensor(const at::Tensor&)>& gather_rows) {
  require(!lora_.empty() && lora_.size() > 0, "EVA: the model has no LoRA adapters (add them with ",
          "init_lora_weights \"eva\" first)");
  const LoraConfig& config = lora_.config();
  require(config.init == "eva", "EVA can only initialise adapters made with init_lora_weights \"eva\" (as PEFT's ",
          "initialize_lora_eva_weights), these were made with \"", config.init, "\"");
  require_trainable_set_free(false);
  require_weights("EVA");
  require_whole_parameters("EVA");
  EvaJob job;
  job.config = config.eva;
  job.reading = reading;
  job.r = config.r;
  for (const LoraAdapter& adapter : lora_.adapters()) {
    require_eva_layer(adapter.site);
    job.layers.push_back(
        {adapter.site.module, adapter.r, in_features(adapter.site), adapter.site.set_output_adapter});
  }
  for (const auto& entry : named_parameters())
    for (int64_t size : entry.second.sizes()) job.largest_parameter_size = std::max(job.largest_parameter_size, size);
  job.forward = [this](const std::vector<at::Tensor>& inputs) { forward_without_grad(inputs); };
  job.gather_rows = gather_rows;

  const bool training = is_training(), enabled = lora_.enabled();
  struct Restore {
    Model& model;
    bool training, enabled;
    ~Restore() {
      model.lora_.install();
      model.lora_.set_enabled(enabled);
      model.set_training(training);
    }
  } restore{*this, training, enabled};
  set_training(false);
  lora_.set_enabled(false);
  lora_.take_eva_components(eva_components(job, source));
  return lora_.size();
}

}  // namespace acc
