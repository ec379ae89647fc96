// A model built from a layer spec, computed with torch::nn modules: layers run in order, each on
// the previous one's output unless it names what it reads (LayerSpec::inputs), so that one spec
// holds an encoder-decoder or a decoder over a memory given as the model's second input.
#pragma once

#include <torch/nn/modules/container/sequential.h>

#include "model/layers.h"
#include "model/model.h"

namespace acc {

class SpecModel final : public Model {
 public:
  // `weights_pending`: see Model::make_weights_pending (each layer's weights become placeholders
  // as soon as it is built, so the whole model never exists here).
  explicit SpecModel(std::vector<LayerSpec> layers, bool weights_pending = false);

  NamedTensors forward(const std::vector<at::Tensor>& inputs) override;
  NamedTensors named_parameters() const override;
  // Also each tied_linear layer's weight (its embedding's) under the layer's own name, as PyTorch's
  // state_dict() of the same model lists it.
  NamedTensors named_parameters_with_ties() const override;
  NamedTensors named_buffers() const override;
  std::vector<std::string> module_order() const override;
  void set_training(bool training) override;
  bool is_training() const override;
  bool recompute_batch_norm(const InputSource& next) override;

  // One unit per layer that has parameters. A size policy makes units of the layers that reach
  // min_num_params (layers are its leaves), a class policy of the layers of those types
  // ("transformer_encoder_layer"), and unit 0, gathered for the whole forward, of the others;
  // NO_WRAP one unit.
  std::vector<std::vector<std::string>> parameter_units() const override;
  bool set_unit_hooks(UnitHooks hooks) override;
  void set_unit_policy(const UnitPolicy& policy) override;
  // The layers `policy` makes units (every layer under NO_WRAP, as torch's
  // apply_activation_checkpointing without a policy) are checkpointed.
  size_t checkpoint_activations(const UnitPolicy& policy) override;
  bool checkpoints_layer(size_t i) const { return layers_.at(i).checkpoint; }

 protected:
  // Generates a TorchScript module with the same layers, names and current values.
  void write_torchscript(const std::string& path) const override;
  // torch::nn::Linear modules anywhere in the layers (a tied output layer is not one).
  std::vector<LinearSite> linear_sites() const override;
  std::vector<std::string> other_module_names() const override;
  std::vector<TokenSite> token_sites() const override;

 private:
  // The embedding layer a tied_linear layer `i` takes its weight from (its tie_to).
  size_t tie_source(size_t i) const;
  const at::Tensor& tied_weight(size_t i) const;
  at::Tensor run_layer(size_t i, const std::vector<at::Tensor>& inputs);
  // The trainable tokens layer i computes with (its own layers', or a tied head's embedding's),
  // none while the adapters are disabled.
  std::vector<const TokenAdapter*> token_adapters_of_layer(size_t i) const;
  // The parameters layer i computes with: its own, its LoRA adapters', a tied layer's embedding weight.
  std::vector<at::Tensor> layer_tensors(size_t i) const;

  std::vector<LayerSpec> layers_;
  size_t input_count_;
  // Per layer, the last layer that reads its output (when forward may let it go).
  std::vector<size_t> last_reader_;
  // Each layer's parameter names ("<layer>.<name>"), empty for layers without any.
  std::vector<std::vector<std::string>> layer_parameter_names() const;

  torch::nn::Sequential net_;
  UnitHooks hooks_;
  std::vector<std::vector<size_t>> units_of_layer_;  // the units whose parameters each layer computes with
  UnitPolicy unit_policy_;
  // Per layer, its unit in parameter_units() under `policy` (-1: none of its own, or unit 0 under
  // a size policy).
  std::vector<int64_t> unit_of_layer(const UnitPolicy& policy) const;
  std::vector<int64_t> unit_of_layer() const { return unit_of_layer(unit_policy_); }
  static bool gathers_leftovers(const UnitPolicy& policy);  // the policy leaves layers to unit 0 (sizes, classes)
  bool gathers_leftovers() const { return gathers_leftovers(unit_policy_); }
  // Whether the policy wraps some layers and leaves others to unit 0, gathered around the whole forward.
  bool has_leftover_unit(const std::vector<int64_t>& units_of) const;
  bool leftover_unit_ = false;  // has_leftover_unit, as of set_unit_hooks (forward reads it)
  // Fails unless `policy` can apply here (a positive size; classes that are layer types).
  void check_unit_policy(const UnitPolicy& policy) const;
};

}  // namespace acc
