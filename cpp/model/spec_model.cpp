#include "model/spec_model.h"

#include <torch/script.h>

#include <fstream>

#include "common/error.h"

namespace acc {
namespace {

NamedTensors defined_only(const torch::OrderedDict<std::string, at::Tensor>& dict) {
  NamedTensors out;
  for (const auto& item : dict)
    if (item.value().defined()) out.emplace_back(item.key(), item.value());
  return out;
}

}  // namespace

SpecModel::SpecModel(std::vector<LayerSpec> layers) : layers_(std::move(layers)) {
  for (size_t i = 0; i < layers_.size(); ++i) net_->push_back(std::to_string(i), build_layer(layers_[i]));
}

at::Tensor SpecModel::forward_tensor(const at::Tensor& input) {
  if (!hooks_.before) return net_->forward(input);
  at::Tensor x = input;
  for (size_t i = 0; i < net_->size(); ++i) {
    const int64_t unit = unit_of_layer_[i];
    if (unit >= 0) hooks_.before(static_cast<size_t>(unit));
    x = (net_->begin() + static_cast<std::ptrdiff_t>(i))->forward(x);
    if (unit >= 0) x = hooks_.after(static_cast<size_t>(unit), x);
  }
  return x;
}

std::vector<std::vector<std::string>> SpecModel::parameter_units() const {
  std::vector<std::vector<std::string>> units;
  const auto& children = net_->children();
  for (size_t i = 0; i < children.size(); ++i) {
    std::vector<std::string> names;
    for (const auto& p : defined_only(children[i]->named_parameters(true))) names.push_back(std::to_string(i) + "." + p.first);
    if (!names.empty()) units.push_back(std::move(names));
  }
  return units;
}

bool SpecModel::set_unit_hooks(UnitHooks hooks) {
  unit_of_layer_.assign(net_->size(), -1);
  int64_t unit = 0;
  const auto& children = net_->children();
  for (size_t i = 0; i < children.size(); ++i)
    if (!defined_only(children[i]->named_parameters(true)).empty()) unit_of_layer_[i] = unit++;
  hooks_ = std::move(hooks);
  return true;
}

NamedTensors SpecModel::forward(const std::vector<at::Tensor>& inputs) {
  require(inputs.size() == 1, "a model built from a layer spec takes 1 input, got ", inputs.size());
  require(inputs[0].defined(), "input 0 is an undefined tensor");
  return {{"", forward_tensor(inputs[0])}};
}

NamedTensors SpecModel::named_parameters() const { return defined_only(net_->named_parameters(true)); }

NamedTensors SpecModel::named_buffers() const { return defined_only(net_->named_buffers(true)); }

void SpecModel::set_training(bool training) { net_->train(training); }

bool SpecModel::is_training() const { return net_->is_training(); }

void SpecModel::save_torchscript(const std::string& path) const {
  auto unit = std::make_shared<torch::jit::CompilationUnit>();
  torch::jit::Module top(c10::QualifiedName("__torch__.accelerate.SpecModel"), unit);
  top.register_attribute("training", c10::BoolType::get(), is_training());
  std::string forward = "def forward(self, x: Tensor) -> Tensor:\n";
  const auto& children = net_->children();
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::string name = std::to_string(i);
    torch::jit::Module layer(c10::QualifiedName("__torch__.accelerate.Layer" + name + "_" + layers_[i].type), unit);
    layer.register_attribute("training", c10::BoolType::get(), is_training());
    for (auto& p : defined_only(children[i]->named_parameters(false)))
      layer.register_parameter(p.first, p.second.detach().clone().set_requires_grad(p.second.requires_grad()), false);
    for (auto& b : defined_only(children[i]->named_buffers(false)))
      layer.register_buffer(b.first, b.second.detach().clone());
    layer.define("def forward(self, x: Tensor) -> Tensor:\n    " + layer_script(layers_[i]) + "\n");
    top.register_module(name, layer);
    forward += "    x = getattr(self, \"" + name + "\").forward(x)\n";
  }
  forward += "    return x\n";
  top.define(forward);
  require_writable(path);
  top.save(path);
}

std::shared_ptr<Model> model_from_spec(const std::string& json_spec) {
  return std::make_shared<SpecModel>(parse_layer_specs(json_spec));
}

}  // namespace acc
