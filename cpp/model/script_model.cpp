#include "model/script_model.h"

#include <c10/util/ScopeExit.h>

#include <torch/csrc/jit/api/function_impl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "common/compat.h"
#include "common/error.h"
#include "common/files.h"
#include "common/large_stack.h"
#include "common/peer_failure.h"
#include "model/peft/factor_methods.h"
#include "model/torchscript_archive.h"

namespace acc {
namespace {

void flatten_into(const c10::IValue& value, const std::string& name, NamedTensors& out) {
  auto child = [&](const std::string& key) { return name.empty() ? key : name + "." + key; };
  if (value.isTensor()) {
    out.emplace_back(name, value.toTensor());
  } else if (value.isTuple()) {
    const auto& elements = value.toTupleRef().elements();
    for (size_t i = 0; i < elements.size(); ++i) flatten_into(elements[i], child(std::to_string(i)), out);
  } else if (value.isList()) {
    auto list = value.toListRef();
    for (size_t i = 0; i < list.size(); ++i) flatten_into(list[i], child(std::to_string(i)), out);
  } else if (value.isGenericDict()) {
    for (const auto& item : value.toGenericDict()) {
      const auto& key = item.key();
      std::string key_name = key.isString() ? key.toStringRef() : key.isInt() ? std::to_string(key.toInt()) : "?";
      flatten_into(item.value(), child(key_name), out);
    }
  } else if (value.isDouble()) {
    out.emplace_back(name, at::scalar_tensor(value.toDouble(), at::kDouble));
  } else if (value.isInt()) {
    out.emplace_back(name, at::scalar_tensor(value.toInt(), at::kLong));
  } else if (value.isBool()) {
    out.emplace_back(name, at::scalar_tensor(value.toBool(), at::kBool));
  } else if (value.isNone()) {
    // An absent optional output (e.g. no loss without labels) is simply not listed.
  } else {
    fail(Status::Unsupported, "forward returned a value of type ", value.tagKind(), " at '", name,
         "'; tensors, numbers and tuples, lists and dicts of them are supported");
  }
}

}  // namespace

NamedTensors flatten_outputs(const c10::IValue& value) {
  NamedTensors out;
  flatten_into(value, "", out);
  return out;
}

ScriptModel::ScriptModel(torch::jit::Module module) : module_(std::move(module)) {
  if (auto method = module_.find_method("forward")) {
    const auto& schema = method->function().getSchema();
    Arity arity{0, schema.arguments().size() - 1, concat(schema)};  // without self
    for (size_t i = 1; i < schema.arguments().size(); ++i)
      if (!schema.arguments()[i].default_value()) ++arity.required;
    arity_ = std::move(arity);
  }
}

NamedTensors ScriptModel::forward(const std::vector<at::Tensor>& inputs) {
  require_weights("forward");
  const auto originals = lora_.originals_in_use();  // adapters disabled: the modules to save as they were
  try {
    return run_forward(inputs);
  } catch (const Error&) {
    throw;  // ours (an Error is a runtime_error too); c10::Error is not one, and passes by as it is
  } catch (const std::runtime_error& e) {
    // The interpreter rethrows what failed inside the model (a shape or dtype the model cannot take,
    // a `raise` in its code, an allocation) as text with the TorchScript traceback.
    const std::string message = e.what();
    if (is_allocation_failure_message(message)) fail(Status::OutOfMemory, "the TorchScript forward ran out of memory: ", message);
    if (message.find("INTERNAL ASSERT FAILED") != std::string::npos) throw;
    // A collective inside the forward (stage 3's parameter gathers) lost its peers.
    if (const auto status = peer_failure_reported_in(message))
      fail(*status, "the TorchScript forward failed: ", message);
    fail(Status::InvalidArgument, "the TorchScript forward failed on these inputs: ", message);
  }
}

NamedTensors ScriptModel::run_forward(const std::vector<at::Tensor>& inputs) {
  if (!arity_) fail(Status::Unsupported, "the TorchScript module has no forward method");
  const auto& [required, expected, schema] = *arity_;
  require(inputs.size() >= required && inputs.size() <= expected, "forward takes ",
          required == expected ? concat(expected) : concat(required, " to ", expected), " input(s), got ",
          inputs.size(), " (", schema, ")");
  std::vector<c10::IValue> args(inputs.begin(), inputs.end());
  // The executor's switch is per thread: set around this forward only.
  torch::jit::GraphOptimizerEnabledGuard optimize(optimize_);
  // Adapted weights for the whole forward, or unit by unit as stage 3 gathers the units.
  std::optional<LoraAdapters::Applied> adapted;
  if (!unit_lora_) adapted.emplace(lora_.apply());
  const auto restore = c10::make_scope_exit([this] {
    if (unit_lora_) unit_lora_->restore_all();
  });
  // Stage 3's forward holds LoRA's output markers too.
  torch::jit::GraphFunction* marked = units_forward_  ? units_forward_.get()
                                      : lora_forward_ ? lora_forward_.get()
                                                      : quantized_forward_.get();
  if (!marked) return flatten_outputs(module_.get_method("forward")(std::move(args)));
  args.insert(args.begin(), module_._ivalue());
  module_.get_method("forward").function().getSchema().checkAndNormalizeInputs(args);
  marked->run(args);
  return flatten_outputs(args.back());
}

ScriptModel::~ScriptModel() {
  if (units_forward_) install_unit_hooks(unit_token_, {}, UnitHooks{});
  if (lora_outputs_) install_output_adapters(unit_token_, nullptr);
  if (quantized_) install_quantized_layers(unit_token_, nullptr);
}

std::shared_ptr<torch::jit::Graph> ScriptModel::marked_forward(const std::vector<std::string>& layers) const {
  if (!quantized_) return mark_adapted_linears(module_, layers, unit_token_, {}, input_markers_);
  const std::vector<std::string> quantized = quantized_->modules();
  auto graph = mark_adapted_linears(module_, layers, unit_token_,
                                    std::set<std::string>(quantized.begin(), quantized.end()), input_markers_);
  mark_quantized_linears(*graph, quantized, unit_token_);
  return graph;
}

size_t ScriptModel::add_lora(const LoraConfig& config) {
  if (config.all_linear) return add_lora(with_all_linear(config));
  require_trainable_set_free(/*freezing=*/false);
  // Trainable tokens alone use no marker: their layers compute with a replaced weight; LN tuning's
  // modules train in place.
  if (!lora_.empty() || config.peft_type == PeftType::TrainableTokens || config.peft_type == PeftType::LnTuning)
    return Model::add_lora(config);  // refuses the first
  std::vector<std::string> layers;
  // An attention and the out_proj adapted with it compute with adapted weights (its forward reads them).
  for (const auto& site : targeted_sites(config, linear_sites()))
    if (!adapted_with_attention(site) && !site.quantized)
      layers.push_back(site.module);                   // quantised: their own markers
  if (layers.empty()) return Model::add_lora(config);  // its error names the targets
  // PEFT's arithmetic, its branch added to the layer's output, wherever the forward calls an adapted
  // layer as a module. A layer whose weight the forward reads itself (nn.MultiheadAttention's
  // out_proj) has no output to add to: without dropout it computes with the adapted weight instead
  // (W + B A * scaling, the same to rounding); with dropout the marking refuses it, naming it.
  if (config.dropout == 0) layers = layers_called_as_modules(module_, layers);
  if (layers.empty()) return Model::add_lora(config);
  // The marked forward is made, and checked, before any adapter is drawn. (IA)^3 scales some
  // layers' inputs: its calls take input markers too.
  const FactorMethod* method = factor_method(config.peft_type);
  input_markers_ = config.peft_type == PeftType::Ia3 || (method && method->input_adapter);
  std::shared_ptr<torch::jit::Graph> graph;
  try {
    graph = marked_forward(layers);
  } catch (...) {
    input_markers_ = false;
    throw;
  }
  output_layers_ = layers;
  lora_outputs_ = std::make_shared<MarkedAdapters>(
      MarkedAdapters{std::vector<OutputAdapter>(layers.size()), [this] { return is_training(); },
                     std::vector<InputAdapter>(input_markers_ ? layers.size() : 0)});
  size_t added = 0;
  try {
    added = Model::add_lora(config);  // sets the adapters through linear_sites()' set_output_adapter
  } catch (...) {
    drop_lora_outputs();
    throw;
  }
  install_output_adapters(unit_token_, lora_outputs_);
  lora_forward_ = std::make_unique<torch::jit::GraphFunction>("acc_lora_forward", graph, nullptr);
  unit_plan_.reset();  // planned again, keeping the adapted layers' calls
  return added;
}

void ScriptModel::watch_layer_inputs(const std::vector<std::string>& layers, const LayerInputSeen& seen,
                                     const std::function<void()>& run) {
  require(lora_.empty() && !lora_outputs_, "the layers' inputs are watched on a model without adapters");
  const std::vector<std::string> called = layers_called_as_modules(module_, layers);
  for (const auto& layer : layers)
    if (std::find(called.begin(), called.end(), layer) == called.end())
      fail(Status::Unsupported, "the forward does not call '", layer,
           "' as a module (it reads the layer's weight itself, or calls it with other arguments), so its inputs ",
           "cannot be seen; call the layer as a module");
  auto graph = marked_forward(layers);
  std::vector<OutputAdapter> watchers;
  for (size_t k = 0; k < layers.size(); ++k)
    watchers.push_back([&seen, k](const at::Tensor& input, const at::Tensor& output, bool) {
      seen(k, input);
      return output;
    });
  output_layers_ = layers;
  lora_outputs_ =
      std::make_shared<MarkedAdapters>(MarkedAdapters{std::move(watchers), [this] { return is_training(); }});
  const auto unwatch = c10::make_scope_exit([this] { drop_lora_outputs(); });
  install_output_adapters(unit_token_, lora_outputs_);
  lora_forward_ = std::make_unique<torch::jit::GraphFunction>("acc_watched_forward", graph, nullptr);
  run();
}

void ScriptModel::merge_lora() {
  Model::merge_lora();
  drop_lora_outputs();
}

void ScriptModel::drop_lora_outputs() {
  if (lora_outputs_) install_output_adapters(unit_token_, nullptr);
  lora_forward_.reset();
  lora_outputs_.reset();
  output_layers_.clear();
  input_markers_ = false;
  if (!units_forward_) unit_plan_.reset();
}

const ScriptUnitPlan& ScriptModel::unit_plan() const {
  if (!unit_plan_)
    unit_plan_ = plan_script_units(module_, unit_token_, unit_policy_,
                                   std::set<std::string>(output_layers_.begin(), output_layers_.end()));
  return *unit_plan_;
}

void ScriptModel::set_unit_policy(const UnitPolicy& policy) {
  require(!units_forward_, "the model's units are in use (set the wrap policy before preparing it)");
  unit_policy_ = policy;
  unit_plan_.reset();
  (void)unit_plan();  // its errors (a class the model lacks) come now
}

std::vector<std::vector<std::string>> ScriptModel::parameter_units() const {
  if (lora_.empty()) return unit_plan().units;
  if (auto adapted = adapted_units()) return adapted->units;
  return Model::parameter_units();
}

std::optional<ScriptModel::AdaptedUnits> ScriptModel::adapted_units() const {
  if (!unit_plan().graph) return std::nullopt;
  const size_t count = unit_plan().units.size();
  AdaptedUnits out{unit_plan().units, std::vector<std::vector<size_t>>(count), std::vector<std::vector<size_t>>(count)};
  // The unit holding a weight (under the name the model lists it by: a tied weight under its first).
  std::unordered_map<const c10::TensorImpl*, std::string> names;
  for (const auto& entry : named_parameters()) names.emplace(entry.second.unsafeGetTensorImpl(), entry.first);
  auto unit_of = [&](const at::Tensor& weight) -> std::optional<size_t> {
    auto name = names.find(weight.unsafeGetTensorImpl());
    if (name == names.end()) return std::nullopt;
    for (size_t u = 0; u < out.units.size(); ++u)
      if (std::find(out.units[u].begin(), out.units[u].end(), name->second) != out.units[u].end()) return u;
    return std::nullopt;
  };
  for (size_t i = 0; i < lora_.adapters().size(); ++i) {
    const auto unit = unit_of(lora_.adapters()[i].site.weight);
    if (!unit) return std::nullopt;
    NamedTensors parameters;
    lora_.append_parameters(i, &parameters);
    for (const auto& entry : parameters) out.units[*unit].push_back(entry.first);
    out.adapters_of_unit[*unit].push_back(i);
  }
  for (size_t k = 0; k < lora_.tokens().adapters().size(); ++k) {
    const auto unit = unit_of(lora_.tokens().adapters()[k].site.weight);
    if (!unit) return std::nullopt;
    NamedTensors parameters;
    lora_.tokens().append_parameters(k, &parameters);
    out.units[*unit].push_back(parameters.front().first);
    out.tokens_of_unit[*unit].push_back(k);
  }
  return out;
}

bool ScriptModel::set_unit_hooks(UnitHooks hooks) {
  if (hooks.before && quantized_)
    fail(Status::Unsupported, "zero_stage 3 (FULL_SHARD) over a model with quantised layers is not built: its units ",
         "would gather quantised codes; use DDP or zero_stage 1 or 2, which leave frozen weights whole");
  std::optional<AdaptedUnits> adapted;
  if (!lora_.empty()) adapted = adapted_units();
  if (!hooks.before || !hooks.after || !unit_plan().graph || (!lora_.empty() && !adapted)) {
    install_unit_hooks(unit_token_, {}, UnitHooks{});
    units_forward_.reset();
    unit_lora_.reset();
    return false;
  }
  std::shared_ptr<torch::jit::Graph> graph = unit_plan().graph->copy();
  if (lora_outputs_) mark_adapted_linears(*graph, output_layers_, unit_token_, {}, input_markers_);
  unit_lora_.reset();
  if (adapted) {
    // The adapters of weights (those whose output no marker adapts) and the trainable tokens make
    // their weights unit by unit.
    bool any = !lora_.tokens().empty();
    for (auto& indices : adapted->adapters_of_unit) {
      indices.erase(std::remove_if(indices.begin(), indices.end(),
                                   [&](size_t i) { return bool(lora_.adapters()[i].site.set_output_adapter); }),
                    indices.end());
      any = any || !indices.empty();
    }
    if (any) {
      unit_lora_ =
          std::make_unique<UnitLora>(lora_, std::move(adapted->adapters_of_unit), std::move(adapted->tokens_of_unit));
      hooks = unit_lora_->wrap(std::move(hooks));
    }
  }
  install_unit_hooks(unit_token_, unit_plan().site_units, std::move(hooks));
  units_forward_ = std::make_unique<torch::jit::GraphFunction>("acc_sharded_forward", graph, nullptr);
  return true;
}

bool is_linear_module(const torch::jit::Module& module) {
  const auto type = module.type()->name();
  if (!type) return false;
  const std::string& name = type->name();  // the class name without its qualifier
  if (name != "Linear" && name != "NonDynamicallyQuantizableLinear") return false;
  if (!module.hasattr("weight")) return false;
  const c10::IValue weight = module.attr("weight");
  return weight.isTensor() && weight.toTensor().dim() == 2 && weight.toTensor().is_floating_point();
}

// transformers' Conv1D (GPT-2's c_attn, c_proj, c_fc), which PEFT adapts as a linear layer with
// fan_in_fan_out: a class of that name from the transformers package, with a floating-point weight
// (in x out) and a bias of its outputs.
bool is_transformers_conv1d(const torch::jit::Module& module) {
  const auto type = module.type()->name();
  if (!type || type->name() != "Conv1D" || !module.hasattr("weight") || !module.hasattr("bias")) return false;
  // "__torch__.transformers.pytorch_utils.Conv1D" (older releases: transformers.modeling_utils).
  const std::string qualified = type->qualifiedName();
  if (qualified.rfind("__torch__.transformers.", 0) != 0) return false;
  const c10::IValue weight = module.attr("weight"), bias = module.attr("bias");
  if (!weight.isTensor() || !bias.isTensor()) return false;
  const at::Tensor &w = weight.toTensor(), &b = bias.toTensor();
  return w.dim() == 2 && w.is_floating_point() && b.dim() == 1 && b.size(0) == w.size(1);
}

namespace {

// nn.MultiheadAttention with q, k and v of one size (its in_proj_weight 3 E x E), the only kind PEFT's
// lora.MultiheadAttention takes, with a linear out_proj.
bool is_attention_module(const torch::jit::Module& module) {
  const auto type = module.type()->name();
  if (!type || type->name() != "MultiheadAttention" || !module.hasattr("in_proj_weight") ||
      !module.hasattr("_qkv_same_embed_dim") || !module.hasattr("out_proj"))
    return false;
  const c10::IValue weight = module.attr("in_proj_weight"), same = module.attr("_qkv_same_embed_dim"),
                    out_proj = module.attr("out_proj");
  if (!weight.isTensor() || !same.isBool() || !same.toBool() || !out_proj.isModule() ||
      !is_linear_module(torch::jit::Module(out_proj.toObject())))
    return false;
  const at::Tensor& w = weight.toTensor();
  return w.dim() == 2 && w.is_floating_point() && w.size(0) == 3 * w.size(1);
}

bool is_embedding_module(const torch::jit::Module& module) {
  const auto type = module.type()->name();
  if (!type || type->name() != "Embedding" || !module.hasattr("weight")) return false;
  const c10::IValue weight = module.attr("weight");
  return weight.isTensor() && weight.toTensor().dim() == 2 && weight.toTensor().is_floating_point();
}

// An nn.Embedding's lookup, from its TorchScript constants (none: not an embedding).
std::optional<EmbeddingLookup> embedding_lookup(const torch::jit::Module& module) {
  if (!is_embedding_module(module)) return std::nullopt;
  const c10::ClassTypePtr& cls = module.type();
  EmbeddingLookup lookup;
  const auto padding = cls->findConstant("padding_idx"), max_norm = cls->findConstant("max_norm"),
             by_freq = cls->findConstant("scale_grad_by_freq"), sparse = cls->findConstant("sparse");
  if (padding && padding->isInt()) lookup.padding_idx = padding->toInt();
  if (by_freq && by_freq->isBool()) lookup.scale_grad_by_freq = by_freq->toBool();
  if (!padding || !(padding->isInt() || padding->isNone()) || !by_freq || !by_freq->isBool())
    lookup.refusal = "its padding_idx or scale_grad_by_freq are not values the module holds";
  else if (!max_norm || !max_norm->isNone())
    lookup.refusal = "it has a max_norm, which would renormalise PEFT's lora_embedding_A in place";
  else if (!sparse || !sparse->isBool() || sparse->toBool())
    lookup.refusal = "it has sparse gradients";
  return lookup;
}

// An nn.Conv1d/2d/3d's geometry, from its TorchScript constants (none: not such a layer).
std::optional<ConvGeometry> conv_geometry(const torch::jit::Module& module) {
  const auto type = module.type()->name();
  if (!type || !module.hasattr("weight")) return std::nullopt;
  const std::string& name = type->name();
  const int64_t dims = name == "Conv1d" ? 1 : name == "Conv2d" ? 2 : name == "Conv3d" ? 3 : 0;
  const c10::IValue weight = module.attr("weight");
  if (dims == 0 || !weight.isTensor() || weight.toTensor().dim() != dims + 2 || !weight.toTensor().is_floating_point())
    return std::nullopt;
  const c10::ClassTypePtr& cls = module.type();
  auto ints = [&](const char* key) -> std::optional<std::vector<int64_t>> {
    const auto value = cls->findConstant(key);
    if (!value || !value->isTuple()) return std::nullopt;
    std::vector<int64_t> out;
    for (const auto& element : value->toTupleRef().elements()) {
      if (!element.isInt()) return std::nullopt;
      out.push_back(element.toInt());
    }
    return out;
  };
  ConvGeometry geometry;
  const auto stride = ints("stride"), padding = ints("padding"), dilation = ints("dilation");
  const auto groups = cls->findConstant("groups"), mode = cls->findConstant("padding_mode");
  if (stride) geometry.stride = *stride;
  if (padding) geometry.padding = *padding;
  if (dilation) geometry.dilation = *dilation;
  if (groups && groups->isInt()) geometry.groups = groups->toInt();
  if (!stride || !padding || !dilation || !groups || !groups->isInt())
    geometry.refusal =
        "its stride, padding, dilation or groups are not numbers the module holds (a padding given "
        "as a string)";
  else if (!mode || !mode->isString() || mode->toStringRef() != "zeros")
    geometry.refusal = "its padding_mode is not \"zeros\", which PEFT's adapters pad with";
  return geometry;
}

}  // namespace

std::vector<torch::jit::NameModule> distinct_named_modules(const torch::jit::Module& module) {
  // A module's identity: its class and its own tensors where it holds some (a loaded archive keeps no
  // shared object: each path gets a copy holding the same tensors), else the object itself.
  auto identity = [](const torch::jit::Module& m) {
    std::ostringstream key;
    key << m.type()->str();
    bool holds_tensors = false;
    auto add = [&](const at::Tensor& t) {
      key << ' ' << t.unsafeGetTensorImpl();
      holds_tensors = true;
    };
    for (const auto& p : m.named_parameters(/*recurse=*/false)) add(p.value);
    for (const auto& b : m.named_buffers(/*recurse=*/false)) add(b.value);
    if (!holds_tensors) key << " object " << m._ivalue().get();
    return key.str();
  };
  std::vector<torch::jit::NameModule> out;
  std::unordered_set<std::string> seen;
  for (const auto& entry : module.named_modules())
    if (seen.insert(identity(entry.value)).second) out.push_back(entry);
  return out;
}

std::vector<LinearSite> ScriptModel::linear_sites() const {
  std::vector<LinearSite> sites;
  for (const auto& entry : distinct_named_modules(module_)) {
    if (!entry.name.empty() && is_attention_module(entry.value)) {
      torch::jit::Module attention = entry.value;  // a handle on the same object
      const c10::IValue bias = attention.attr("in_proj_bias");
      LinearSite site{entry.name, attention.attr("in_proj_weight").toTensor(),
                      [attention](const at::Tensor& weight) mutable { attention.setattr("in_proj_weight", weight); }};
      site.bias = bias.isTensor() ? bias.toTensor() : at::Tensor();
      site.attention = true;
      sites.push_back(std::move(site));
      continue;
    }
    if (const auto q = quantized_ ? quantized_->index_of(entry.name) : std::nullopt) {
      const size_t i = *q;
      const QuantizedLayer& layer = quantized_->layers[i];
      LinearSite site{entry.name, at::zeros({}, at::TensorOptions(layer.weight->adapter_dtype()).device(device()))
                                      .expand(layer.weight->shape())};
      site.bias = layer.bias;
      site.quantized = true;
      // Its own markers run LoRA's branch, however the forward reaches the layer.
      site.set_output_adapter = [layers = quantized_, i](OutputAdapter a) { layers->adapters[i] = std::move(a); };
      site.requantize = [layers = quantized_, i](const at::Tensor& delta) {
        layers->layers[i].weight->add(layers->layers[i].module, delta);
      };
      site.requantized_entries = [layers = quantized_, i](const at::Tensor& delta) {
        return layers->layers[i].weight->merged_entries(layers->layers[i].module, delta);
      };
      sites.push_back(std::move(site));
      continue;
    }
    const std::optional<ConvGeometry> conv = entry.name.empty() ? std::nullopt : conv_geometry(entry.value);
    const std::optional<EmbeddingLookup> lookup = entry.name.empty() ? std::nullopt : embedding_lookup(entry.value);
    const bool conv1d = !entry.name.empty() && is_transformers_conv1d(entry.value);
    if (entry.name.empty() || (!is_linear_module(entry.value) && !conv && !lookup && !conv1d)) continue;
    torch::jit::Module layer = entry.value;  // a handle on the same object
    const c10::IValue bias = layer.hasattr("bias") ? layer.attr("bias") : c10::IValue();
    sites.push_back({entry.name,
                     layer.attr("weight").toTensor(),
                     [layer](const at::Tensor& weight) mutable { layer.setattr("weight", weight); },
                     nullptr,
                     {},
                     bias.isTensor() && !lookup ? bias.toTensor() : at::Tensor(),
                     conv,
                     lookup,
                     conv1d});
    // Under LoRA with dropout the marked forward adapts this layer's output.
    auto it = std::find(output_layers_.begin(), output_layers_.end(), entry.name);
    if (it != output_layers_.end()) {
      const size_t i = static_cast<size_t>(it - output_layers_.begin());
      sites.back().set_output_adapter = [outputs = lora_outputs_, i](OutputAdapter a) {
        outputs->adapters[i] = std::move(a);
      };
      if (input_markers_)
        sites.back().set_input_adapter = [outputs = lora_outputs_, i](InputAdapter a) {
          outputs->inputs[i] = std::move(a);
        };
    }
  }
  mark_attention_out_projs(sites);  // an attention's out_proj: adapted with it where it is targeted
  return sites;
}

std::vector<LinearSite> ScriptModel::parameter_sites() const {
  std::vector<LinearSite> sites;
  for (const auto& entry : distinct_named_modules(module_)) {
    if (entry.name.empty()) continue;         // the model's own parameters: no module to wrap (targeted_sites)
    torch::jit::Module module = entry.value;  // a handle on the same object
    const bool transposed = module.hasattr("is_transposed") && module.attr("is_transposed").isBool() &&
                            module.attr("is_transposed").toBool();
    for (const auto& p : module.named_parameters(/*recurse=*/false)) {
      LinearSite site{entry.name, p.value,
                      [module, name = p.name](const at::Tensor& weight) mutable { module.setattr(name, weight); }};
      site.parameter = entry.name + "." + p.name;
      site.experts = p.value.dim() == 3 ? p.value.size(0) : 0;
      site.experts_transposed = transposed;
      sites.push_back(std::move(site));
    }
  }
  for (const auto& p : module_.named_parameters(/*recurse=*/false)) {
    LinearSite site{"", p.value, nullptr};
    site.parameter = p.name;
    sites.push_back(std::move(site));
  }
  return sites;
}

// A transformers class keeps its module path in the TorchScript type's name.
bool ScriptModel::is_transformers_model() const {
  const auto type = module_.type()->name();
  return type && type->qualifiedName().rfind("__torch__.transformers.", 0) == 0;
}

std::vector<TokenSite> ScriptModel::token_sites() const {
  std::vector<TokenSite> sites;
  for (const auto& entry : distinct_named_modules(module_)) {
    const bool embedding = is_embedding_module(entry.value);
    if (entry.name.empty() || (!embedding && !is_linear_module(entry.value))) continue;
    torch::jit::Module layer = entry.value;  // a handle on the same object
    const bool has_bias = !embedding && layer.hasattr("bias") && layer.attr("bias").isTensor();
    sites.push_back({entry.name, layer.attr("weight").toTensor(),
                     [layer](const at::Tensor& weight) mutable { layer.setattr("weight", weight); }, embedding,
                     has_bias});
  }
  return sites;
}

std::vector<std::string> ScriptModel::other_module_names() const {
  // Every submodule but the layers LoRA can adapt (linear_sites decides which those are).
  std::unordered_set<std::string> sites;
  for (const auto& site : linear_sites()) sites.insert(site.module);
  std::vector<std::string> names;
  for (const auto& entry : distinct_named_modules(module_))
    if (!entry.name.empty() && !sites.count(entry.name)) names.push_back(entry.name);
  return names;
}

NamedTensors ScriptModel::named_parameters() const {
  NamedTensors out;
  // A tensor several submodules hold (a tied head) is listed once, under its first name, as
  // PyTorch's named_parameters does: stepped once, counted once by norms, saved once.
  std::unordered_set<const c10::TensorImpl*> seen;
  for (const auto& p : module_.named_parameters(/*recurse=*/true))
    if (seen.insert(p.value.unsafeGetTensorImpl()).second) out.emplace_back(p.name, p.value);
  return lora_.placed_among(std::move(out));
}

NamedTensors ScriptModel::named_parameters_with_ties() const {
  NamedTensors out;
  for (const auto& p : module_.named_parameters(/*recurse=*/true)) out.emplace_back(p.name, p.value);
  return lora_.placed_among(std::move(out));
}

NamedTensors ScriptModel::named_buffers() const {
  NamedTensors out;
  for (const auto& b : module_.named_buffers(/*recurse=*/true)) out.emplace_back(b.name, b.value);
  if (quantized_)
    for (const QuantizedLayer& layer : quantized_->layers)
      for (auto& entry : layer.weight->state_entries(layer.module)) out.push_back(std::move(entry));
  for (auto& entry : lora_.named_buffers()) out.push_back(std::move(entry));
  return out;
}

std::vector<std::string> ScriptModel::module_order() const {
  std::vector<std::string> names;
  for (const auto& entry : module_.named_modules()) names.push_back(entry.name);
  return names;
}

void ScriptModel::set_training(bool training) { module_.train(training); }

bool ScriptModel::is_training() const { return module_.is_training(); }

void ScriptModel::write_torchscript(const std::string& path) const {
  save_archive_atomically(path, [&](std::ostream& out) { module_.save(out); });
}

std::shared_ptr<Model> load_torchscript_model(const std::string& path, bool weights_pending) {
  refuse_unless_regular(path);
  std::ifstream probe(path, std::ios::binary);
  if (!probe) fail(Status::Io, "cannot open TorchScript file '", path, "': ", std::strerror(errno));
  probe.close();
  VerifiedArchive archive(path);
  compat::disable_cpu_fusion();
  std::shared_ptr<Model> model;
  try {
    // libtorch parses the archive's code recursively: on a stack of known size, not the caller's
    // (a host runtime's thread may have far less than the archive's checked nesting needs).
    torch::jit::Module module;
    run_on_large_stack([&] { module = torch::jit::load(archive.stream(), at::Device(at::kCPU)); });
    model = std::make_shared<ScriptModel>(std::move(module));
  } catch (const Error&) {
    throw;  // the library's own (no thread for the large stack: OutOfMemory)
  } catch (const std::bad_alloc&) {
    fail(Status::OutOfMemory, "out of host memory while loading '", path, "'");
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    // Running out of memory says nothing about the file.
    if (is_allocation_failure_message(message))
      fail(Status::OutOfMemory, "loading '", path, "' ran out of memory: ", message);
    fail(Status::Io, "'", path, "' is not a readable TorchScript archive: ", message);
  } catch (const std::exception& e) {
    // The archive's code or pickles are malformed in a way libtorch reports with another type.
    fail(Status::Io, "'", path, "' is not a readable TorchScript archive: ", e.what());
  }
  if (weights_pending) model->make_weights_pending();
  return model;
}

}  // namespace acc
