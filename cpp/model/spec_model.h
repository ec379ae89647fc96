// A sequential model built from a layer spec, computed with torch::nn modules.
#pragma once

#include <torch/nn/modules/container/sequential.h>

#include "model/layers.h"
#include "model/model.h"

namespace acc {

class SpecModel final : public Model {
 public:
  explicit SpecModel(std::vector<LayerSpec> layers);

  NamedTensors forward(const std::vector<at::Tensor>& inputs) override;
  NamedTensors named_parameters() const override;
  NamedTensors named_buffers() const override;
  void set_training(bool training) override;
  bool is_training() const override;

  at::Tensor forward_tensor(const at::Tensor& input);
  // One unit per layer that has parameters.
  std::vector<std::vector<std::string>> parameter_units() const override;
  bool set_unit_hooks(UnitHooks hooks) override;
  bool checkpoints_activations() const override;

 protected:
  // Generates a TorchScript module with the same layers, names and current values.
  void write_torchscript(const std::string& path) const override;
  // torch::nn::Linear modules anywhere in the layers (a tied output layer is not one).
  std::vector<LinearSite> linear_sites() const override;
  std::vector<std::string> other_module_names() const override;

 private:
  std::vector<LayerSpec> layers_;
  // Each layer's parameter names ("<layer>.<name>"), empty for layers without any.
  std::vector<std::vector<std::string>> layer_parameter_names() const;

  torch::nn::Sequential net_;
  UnitHooks hooks_;
  std::vector<int64_t> unit_of_layer_;  // -1 for layers without parameters
};

}  // namespace acc
