// ScriptModel's quantised layers (transformers' load_in_4bit and load_in_8bit; model/quantized_linear.h).
#include <ATen/core/grad_mode.h>
#include <torch/csrc/jit/api/function_impl.h>

#include <set>
#include <unordered_map>

#include "common/error.h"
#include "model/eight_bit_linear.h"
#include "model/four_bit_linear.h"
#include "model/quantization_config.h"
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

size_t ScriptModel::quantize(const QuantizationConfig& config) {
  const char* const kind = config.eight_bit ? "8-bit" : "4-bit";
  require(!quantized_, "the model already has quantised layers");
  require(lora_.empty() && !lora_outputs_, "quantise the model before adding LoRA adapters (as transformers loads it ",
          "quantised before PEFT adapts it)");
  // The layers' weights are replaced, not only frozen: an optimizer made before would hold the old ones.
  require_trainable_set_free(/*freezing=*/false);
  require_whole_parameters("quantize");
  require_weights("quantize");
  require(!units_forward_, "the model is prepared under zero_stage 3; quantise it before preparing");
  const std::set<std::string> kept_by_default =
      config.skip_modules ? std::set<std::string>() : modules_kept_by_default(named_parameters_with_ties());
  auto layers = std::make_shared<QuantizedLayers>();
  std::vector<std::string> names;
  std::vector<torch::jit::Module> modules;
  std::vector<bool> transposed;
  for (const auto& entry : distinct_named_modules(module_)) {
    if (entry.name.empty()) continue;
    const bool conv1d = is_transformers_conv1d(entry.value);
    if (!conv1d && !is_linear_module(entry.value)) continue;
    bool skipped = kept_by_default.count(entry.name) > 0;
    if (config.skip_modules)
      for (const auto& key : *config.skip_modules) skipped = skipped || QuantizationConfig::skips(key, entry.name);
    if (skipped) continue;
    names.push_back(entry.name);
    modules.push_back(entry.value);
    transposed.push_back(conv1d);
  }
  require(!names.empty(), "no linear layer is left to quantise to ", kind, " (every nn.Linear is skipped)");
  // Everything that can fail comes first: the marked forward, then the weights' codes.
  auto method = module_.find_method("forward");
  if (!method) fail(Status::Unsupported, "the TorchScript module has no forward method");
  std::shared_ptr<torch::jit::Graph> graph = method->graph()->copy();
  mark_quantized_linears(*graph, names, unit_token_);
  for (size_t i = 0; i < names.size(); ++i) {
    at::Tensor weight = modules[i].attr("weight").toTensor();
    if (transposed[i]) weight = weight.t();
    const c10::IValue bias = modules[i].hasattr("bias") ? modules[i].attr("bias") : c10::IValue();
    std::shared_ptr<QuantizedWeight> quantized;
    if (config.eight_bit)
      quantized = std::make_shared<EightBitLinear>(quantize_8bit(names[i], weight), config.threshold);
    else
      quantized = std::make_shared<FourBitLinear>(
          acc::quantize_4bit(names[i], weight, config.type, config.double_quant), config.compute_dtype);
    layers->layers.push_back({names[i], std::move(quantized), bias.isTensor() ? bias.toTensor() : at::Tensor()});
  }
  // Nothing fails from here on.
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < names.size(); ++i) {
    QuantizedLayer& layer = layers->layers[i];
    modules[i].setattr("weight", layer.weight->codes());  // the slot stays a parameter, now of codes
    if (layer.bias.defined()) {
      layer.bias.set_requires_grad(false);
      // Linear4bit keeps its bias in the compute dtype; Linear8bitLt casts it to its input's when run.
      if (!config.eight_bit) layer.bias.set_data(layer.bias.to(config.compute_dtype));
      layer.bias.mutable_grad() = at::Tensor();
    }
  }
  layers->adapters.resize(layers->layers.size());
  layers->training = [this] { return is_training(); };
  quantized_ = std::move(layers);
  install_quantized_layers(unit_token_, quantized_);
  quantized_forward_ = std::make_unique<torch::jit::GraphFunction>("acc_quantized_forward", graph, nullptr);
  unit_plan_.reset();
  return quantized_->layers.size();
}

bool ScriptModel::is_quantization_text(const std::string& name) const {
  if (!quantized_) return false;
  for (const QuantizedLayer& layer : quantized_->layers)
    if (layer.weight->is_state_text(layer.module, name)) return true;
  return false;
}

void ScriptModel::check_quantization_state(const NamedTensors& state) const {
  if (!quantized_) return;
  for (const QuantizedLayer& layer : quantized_->layers) {
    // The codes as they are: another integer type would be cast to them, wrapping.
    const std::string weight = layer.module + ".weight";
    const at::ScalarType codes = layer.weight->codes().scalar_type();
    for (const auto& [name, tensor] : state)
      require(name != weight || tensor.scalar_type() == codes, "state dict entry '", name, "' is ",
              tensor.scalar_type(), " but the quantised layer's codes are ", codes);
    layer.weight->check_state(layer.module, state);
  }
}

at::Tensor ScriptModel::four_bit_dequantized(const std::string& module) const {
  if (!quantized_) return {};
  const auto index = quantized_->index_of(module);
  return index ? quantized_->layers[*index].weight->four_bit_dequantized() : at::Tensor();
}

void ScriptModel::quantization_state_loaded(const NamedTensors& state) {
  if (!quantized_) return;
  for (QuantizedLayer& layer : quantized_->layers) layer.weight->state_loaded(layer.module, state);
}

}  // namespace acc
