// ScriptModel's 4-bit layers (transformers' load_in_4bit; model/four_bit.h, four_bit_linear.h).
#include <ATen/core/grad_mode.h>
#include <torch/csrc/jit/api/function_impl.h>

#include <set>
#include <unordered_map>

#include "common/error.h"
#include "model/four_bit_config.h"
#include "model/script_model.h"

namespace acc {
namespace {

// The module a parameter's dotted name belongs to.
std::string module_of(const std::string& parameter) {
  const auto dot = parameter.rfind('.');
  return dot == std::string::npos ? std::string() : parameter.substr(0, dot);
}

// transformers' get_keys_to_not_convert: the modules of tied weights (every name of a shared
// tensor) and the module of the model's last parameter (its output layer).
std::set<std::string> modules_kept_by_default(const NamedTensors& with_ties) {
  std::set<std::string> kept;
  std::unordered_map<const c10::TensorImpl*, std::vector<std::string>> names;
  for (const auto& entry : with_ties) names[entry.second.unsafeGetTensorImpl()].push_back(entry.first);
  for (const auto& entry : names)
    if (entry.second.size() > 1)
      for (const auto& name : entry.second) kept.insert(module_of(name));
  if (!with_ties.empty()) kept.insert(module_of(with_ties.back().first));
  return kept;
}

}  // namespace

size_t ScriptModel::quantize_4bit(const FourBitConfig& config) {
  require(!four_bit_, "the model already has 4-bit layers");
  require(lora_.empty() && !lora_outputs_, "quantise the model before adding LoRA adapters (as transformers loads it ",
          "in 4 bits before PEFT adapts it)");
  // The layers' weights are replaced, not only frozen: an optimizer made before would hold the old ones.
  require_trainable_set_free(/*freezing=*/false);
  require_whole_parameters("quantize_4bit");
  require_weights("quantize_4bit");
  require(!units_forward_, "the model is prepared under zero_stage 3; quantise it before preparing");
  const std::set<std::string> kept_by_default =
      config.skip_modules ? std::set<std::string>() : modules_kept_by_default(named_parameters_with_ties());
  auto layers = std::make_shared<FourBitLayers>();
  std::vector<std::string> names;
  std::vector<torch::jit::Module> modules;
  std::vector<bool> transposed;
  for (const auto& entry : module_.named_modules()) {
    if (entry.name.empty()) continue;
    const bool conv1d = is_transformers_conv1d(entry.value);
    if (!conv1d && !is_linear_module(entry.value)) continue;
    bool skipped = kept_by_default.count(entry.name) > 0;
    if (config.skip_modules)
      for (const auto& key : *config.skip_modules) skipped = skipped || FourBitConfig::skips(key, entry.name);
    if (skipped) continue;
    names.push_back(entry.name);
    modules.push_back(entry.value);
    transposed.push_back(conv1d);
  }
  require(!names.empty(), "no linear layer is left to quantise to 4 bits (every nn.Linear is skipped)");
  // Everything that can fail comes first: the marked forward, then the weights' codes.
  auto method = module_.find_method("forward");
  if (!method) fail(Status::Unsupported, "the TorchScript module has no forward method");
  std::shared_ptr<torch::jit::Graph> graph = method->graph()->copy();
  mark_four_bit_linears(*graph, names, unit_token_);
  for (size_t i = 0; i < names.size(); ++i) {
    const at::Tensor weight = modules[i].attr("weight").toTensor();
    const c10::IValue bias = modules[i].hasattr("bias") ? modules[i].attr("bias") : c10::IValue();
    FourBitLayer layer{names[i],
                       std::make_shared<FourBitWeight>(acc::quantize_4bit(names[i], transposed[i] ? weight.t() : weight,
                                                                          config.type, config.double_quant)),
                       bias.isTensor() ? bias.toTensor() : at::Tensor(), config.compute_dtype};
    layers->layers.push_back(std::move(layer));
  }
  // Nothing fails from here on.
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < names.size(); ++i) {
    FourBitLayer& layer = layers->layers[i];
    modules[i].setattr("weight", layer.weight->packed);  // the slot stays a parameter, now uint8
    if (layer.bias.defined()) {
      layer.bias.set_requires_grad(false);
      layer.bias.set_data(layer.bias.to(config.compute_dtype));
      layer.bias.mutable_grad() = at::Tensor();
    }
  }
  layers->adapters.resize(layers->layers.size());
  layers->training = [this] { return is_training(); };
  four_bit_ = std::move(layers);
  install_four_bit_layers(unit_token_, four_bit_);
  four_bit_forward_ = std::make_unique<torch::jit::GraphFunction>("acc_four_bit_forward", graph, nullptr);
  unit_plan_.reset();
  return four_bit_->layers.size();
}

bool ScriptModel::is_quantization_text(const std::string& name) const {
  if (!four_bit_) return false;
  for (const FourBitLayer& layer : four_bit_->layers)
    if (name == four_bit_state_text_key(layer.module + ".weight", *layer.weight)) return true;
  return false;
}

void ScriptModel::check_quantization_state(const NamedTensors& state) const {
  if (!four_bit_) return;
  for (const FourBitLayer& layer : four_bit_->layers) {
    const std::string key = four_bit_state_text_key(layer.module + ".weight", *layer.weight);
    for (const auto& entry : state)
      if (entry.first == key) check_four_bit_state_text(key, entry.second, *layer.weight);
  }
}

void ScriptModel::quantization_state_loaded(const NamedTensors& state) {
  if (!four_bit_) return;
  for (FourBitLayer& layer : four_bit_->layers) {
    const std::string key = four_bit_state_text_key(layer.module + ".weight", *layer.weight);
    for (const auto& entry : state)
      if (entry.first == key) take_four_bit_state_text(*layer.weight, entry.second);
  }
}

}  // namespace acc
