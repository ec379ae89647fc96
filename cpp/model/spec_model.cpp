#include "model/spec_model.h"

#include <c10/util/ScopeExit.h>
#include <torch/script.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "common/error.h"
#include "common/exception_status.h"
#include "model/activation_checkpoint.h"
#include "model/adaptable_conv2d.h"
#include "model/adaptable_embedding.h"
#include "model/adaptable_linear.h"
#include "model/attention.h"
#include "model/cumulative_batch_norm.h"
#include "model/layer_sizes.h"
#include "model/tied_linear.h"

namespace acc {
namespace {

NamedTensors defined_only(const torch::OrderedDict<std::string, at::Tensor>& dict) {
  NamedTensors out;
  for (const auto& item : dict)
    if (item.value().defined()) out.emplace_back(item.key(), item.value());
  return out;
}

// The TorchScript twin of an nn module's parameters and buffers, with its children that hold any
// (the layer's script reads them as self.child.weight); a module without tensors is left out. A
// linear layer's class is called Linear (in a namespace of its own), as PyTorch's scripted
// nn.Linear is: loaded back, its layers are linear layers to LoRA's target_modules.
torch::jit::Module script_tensors(const torch::nn::Module& module, const std::string& class_name, bool training,
                                  const std::shared_ptr<torch::jit::CompilationUnit>& unit) {
  const bool linear = dynamic_cast<const torch::nn::LinearImpl*>(&module) != nullptr;
  torch::jit::Module out(c10::QualifiedName("__torch__.accelerate." + class_name + (linear ? ".Linear" : "")), unit);
  out.register_attribute("training", c10::BoolType::get(), training);
  for (auto& p : defined_only(module.named_parameters(false)))
    out.register_parameter(p.first, p.second.detach().clone().set_requires_grad(p.second.requires_grad()), false);
  for (auto& b : defined_only(module.named_buffers(false))) out.register_buffer(b.first, b.second.detach().clone());
  for (const auto& child : module.named_children())
    if (!child.value()->named_parameters(true).is_empty() || !child.value()->named_buffers(true).is_empty())
      out.register_module(child.key(), script_tensors(*child.value(), class_name + "_" + child.key(), training, unit));
  return out;
}

}  // namespace

SpecModel::SpecModel(std::vector<LayerSpec> layers, bool weights_pending)
    : layers_(std::move(layers)), input_count_(model_input_count(layers_)), last_reader_(layers_.size()) {
  // Weights the machine cannot hold are refused before any is allocated.
  require_memory_for_layers(layers_, weights_pending);
  for (size_t i = 0; i < layers_.size(); ++i) {
    try {
      net_->push_back(std::to_string(i), build_layer(layers_[i]));
    } catch (const c10::Error&) {
      // Sizes libtorch cannot allocate (their product overflows, or memory runs out): the layer named,
      // the status as for any such error.
      const ExceptionReport report = describe_current_exception();
      fail(report.status, "layer ", i, " (", layers_[i].type, "): ", report.message);
    }
    // A tied layer reuses an earlier embedding's weight (parse_layer_specs checked the index); its
    // bias is drawn here, at the layer's place among the draws, as PyTorch's constructor draws it.
    if (layers_[i].type == kTiedLinear)
      net_->ptr<TiedLinearImpl>(i)->tie(torch::nn::Embedding(
          std::shared_ptr<torch::nn::EmbeddingImpl>(net_->ptr<AdaptableEmbeddingImpl>(tie_source(i)))));
    if (weights_pending) {  // each layer's weights go as soon as it is built (its random draws made)
      make_placeholders(defined_only(net_->ptr(i)->named_parameters(true)));
      make_placeholders(defined_only(net_->ptr(i)->named_buffers(true)));
    }
    last_reader_[i] = i;
    for (const auto& source : layers_[i].inputs)
      if (!source.model_input) last_reader_[static_cast<size_t>(source.index)] = i;
  }
  if (weights_pending) make_weights_pending();
}

std::vector<const TokenAdapter*> SpecModel::token_adapters_of_layer(size_t i) const {
  std::vector<const TokenAdapter*> out;
  if (lora_.tokens().empty() || !lora_.enabled()) return out;
  const std::string own = std::to_string(i);
  const std::string source = layers_[i].type == kTiedLinear ? std::to_string(tie_source(i)) : std::string();
  for (const auto& adapter : lora_.tokens().adapters()) {
    const std::string& module = adapter.site.module;
    if (module == own || module.rfind(own + ".", 0) == 0 || module == source) out.push_back(&adapter);
  }
  return out;
}

at::Tensor SpecModel::run_layer(size_t i, const std::vector<at::Tensor>& inputs) {
  // Trainable tokens: the layer computes with the rows replaced, made at each call (a checkpointed
  // layer's recomputation, stage 3's gathered weight); a tied head reads its embedding's.
  const std::vector<const TokenAdapter*> tokens = token_adapters_of_layer(i);
  for (const TokenAdapter* adapter : tokens)
    adapter->site.use_weight(TrainableTokens::replaced(adapter->site.weight, *adapter, adapter->delta));
  const auto restore = c10::make_scope_exit([&] {
    for (const TokenAdapter* adapter : tokens) adapter->site.use_weight(adapter->site.weight);
  });
  auto& layer = *(net_->begin() + static_cast<std::ptrdiff_t>(i));
  std::vector<at::Tensor> in(layers_[i].slots.back() + 1);  // undefined where the spec names no tensor
  for (size_t k = 0; k < inputs.size(); ++k) in[layers_[i].slots[k]] = inputs[k];
  try {
    switch (in.size()) {
      case 1: return layer.forward(in[0]);
      case 2: return layer.forward(in[0], in[1]);
      case 3: return layer.forward(in[0], in[1], in[2]);
      case 4: return layer.forward(in[0], in[1], in[2], in[3]);
    }
  } catch (const Error& e) {
    if (e.status() != Status::InvalidArgument) throw;
    fail(Status::InvalidArgument, "layer ", i, ": ", e.what());  // which of the spec's layers
  }
  fail(Status::Internal, "a layer reads 1 to 4 tensors, not ", in.size());
}

NamedTensors SpecModel::forward(const std::vector<at::Tensor>& inputs) {
  require_weights("forward");
  require(inputs.size() == input_count_, "this layer-spec model takes ", input_count_, " input(s), got ",
          inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) require(inputs[k].defined(), "input ", k, " is an undefined tensor");
  const auto originals = lora_.originals_in_use();  // adapters disabled: the modules to save as they were
  std::vector<at::Tensor> outputs(layers_.size());  // each layer's, until its last reader has run
  const bool whole_unit = hooks_.before && leftover_unit_;
  if (whole_unit) hooks_.before(0);
  for (size_t i = 0; i < layers_.size(); ++i) {
    std::vector<at::Tensor> in;
    for (const auto& source : layers_[i].inputs)
      in.push_back(source.model_input ? inputs[static_cast<size_t>(source.index)]
                                      : outputs[static_cast<size_t>(source.index)]);
    auto run = [this, i](const std::vector<at::Tensor>& t) { return run_layer(i, t); };
    const std::vector<size_t> no_units;
    const auto& units = hooks_.before ? units_of_layer_[i] : no_units;
    for (size_t unit : units) hooks_.before(unit);
    if (!units.empty() && hooks_.inputs) hooks_.inputs(units, in);
    at::Tensor y = layers_[i].checkpoint ? checkpointed_forward(run, in, layer_tensors(i)) : run(in);
    for (size_t unit : units) y = hooks_.after(unit, y);
    outputs[i] = y;
    for (const auto& source : layers_[i].inputs)
      if (!source.model_input && last_reader_[static_cast<size_t>(source.index)] == i)
        outputs[static_cast<size_t>(source.index)].reset();
  }
  return {{"", whole_unit ? hooks_.after(0, outputs.back()) : outputs.back()}};
}

std::vector<at::Tensor> SpecModel::layer_tensors(size_t i) const {
  std::vector<at::Tensor> out;
  for (const auto& p : net_->children()[i]->parameters(true))
    if (p.defined()) out.push_back(p);
  const std::string prefix = std::to_string(i) + ".";
  for (const auto& entry : lora_.named_parameters())
    if (entry.first.rfind(prefix, 0) == 0) out.push_back(entry.second);
  if (layers_[i].type != kTiedLinear) return out;
  out.push_back(tied_weight(i));
  // With trainable tokens the head computes with its embedding's rows too.
  for (const TokenAdapter* adapter : token_adapters_of_layer(i))
    if (adapter->site.module == std::to_string(tie_source(i))) out.push_back(adapter->delta);
  return out;
}

std::vector<std::vector<std::string>> SpecModel::layer_parameter_names() const {
  std::vector<std::vector<std::string>> names;
  for (const auto& child : net_->children()) {
    names.emplace_back();
    for (const auto& p : defined_only(child->named_parameters(true)))
      names.back().push_back(std::to_string(names.size() - 1) + "." + p.first);
  }
  // A layer's adapters belong to its unit (named "<layer>.<module>.lora_A.weight").
  for (const auto& entry : lora_.named_parameters())
    names.at(std::stoul(entry.first.substr(0, entry.first.find('.')))).push_back(entry.first);
  return names;
}

void SpecModel::set_unit_policy(const UnitPolicy& policy) {
  check_unit_policy(policy);
  unit_policy_ = policy;
}

size_t SpecModel::checkpoint_activations(const UnitPolicy& policy) {
  check_unit_policy(policy);
  const auto units_of = unit_of_layer(policy);
  size_t count = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (policy.kind != UnitPolicy::Kind::Whole && units_of[i] < 0) continue;
    count += layers_[i].checkpoint ? 0 : 1;
    layers_[i].checkpoint = true;
  }
  return count;
}

void SpecModel::check_unit_policy(const UnitPolicy& policy) const {
  require(policy.kind != UnitPolicy::Kind::Size || policy.min_num_params > 0, "min_num_params must be positive, got ",
          policy.min_num_params);
  if (policy.kind == UnitPolicy::Kind::Classes) {  // a spec model's classes are its layer types
    std::set<std::string> types;
    for (const auto& layer : layers_) types.insert(layer.type);
    for (const auto& cls : policy.classes) {
      if (types.count(cls)) continue;
      std::string list;
      for (const auto& type : types) list += (list.empty() ? "" : ", ") + type;
      fail(Status::InvalidArgument, "transformer_cls_to_wrap: the model has no layer of type '", cls,
           "' (a layer-spec model's classes are its layer types: ", list, ")");
    }
  }
}

std::vector<int64_t> SpecModel::unit_of_layer(const UnitPolicy& policy) const {
  std::vector<int64_t> units;
  const auto names = layer_parameter_names();
  int64_t next = gathers_leftovers(policy) ? 1 : 0;  // unit 0: the layers left over
  for (size_t i = 0; i < layers_.size(); ++i) {
    bool own = !names[i].empty();
    if (policy.kind == UnitPolicy::Kind::Classes) {
      const auto& classes = policy.classes;
      own = own && std::find(classes.begin(), classes.end(), layers_[i].type) != classes.end();
    } else if (policy.kind == UnitPolicy::Kind::Size) {
      int64_t numel = 0;  // as torch's module.parameters(): a tied layer counts its embedding's weight
      for (const auto& t : layer_tensors(i)) numel += t.numel();
      own = own && numel >= policy.min_num_params;
    }
    units.push_back(own ? next++ : -1);
  }
  return units;
}

bool SpecModel::gathers_leftovers(const UnitPolicy& policy) {
  return policy.kind == UnitPolicy::Kind::Size || policy.kind == UnitPolicy::Kind::Classes;
}

bool SpecModel::has_leftover_unit(const std::vector<int64_t>& units_of) const {
  return gathers_leftovers() && std::any_of(units_of.begin(), units_of.end(), [](int64_t u) { return u >= 0; });
}

std::vector<std::vector<std::string>> SpecModel::parameter_units() const {
  if (unit_policy_.kind == UnitPolicy::Kind::Whole) return Model::parameter_units();
  auto names = layer_parameter_names();
  const auto units_of = unit_of_layer();
  const bool leftovers = has_leftover_unit(units_of);
  if (gathers_leftovers() && !leftovers) return Model::parameter_units();  // no layer is wrapped
  std::vector<std::vector<std::string>> units(leftovers ? 1 : 0);
  for (size_t i = 0; i < names.size(); ++i) {
    if (units_of[i] >= 0) units.push_back(std::move(names[i]));
    else if (leftovers) units[0].insert(units[0].end(), names[i].begin(), names[i].end());
  }
  return units;
}

bool SpecModel::set_unit_hooks(UnitHooks hooks) {
  const auto units_of = unit_of_layer();
  leftover_unit_ = has_leftover_unit(units_of);
  if (unit_policy_.kind == UnitPolicy::Kind::Whole || (gathers_leftovers() && !leftover_unit_) || !hooks.before)
    hooks = UnitHooks{};  // one unit: the caller brackets the whole forward
  units_of_layer_.assign(layers_.size(), {});
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (units_of[i] >= 0) units_of_layer_[i].push_back(static_cast<size_t>(units_of[i]));
    // A tied layer computes with its embedding's weight: that unit is gathered again around it
    // (under a size policy the embedding may be in unit 0, gathered throughout).
    if (layers_[i].type == kTiedLinear) {
      const int64_t tied = units_of[tie_source(i)];
      if (tied >= 0) units_of_layer_[i].push_back(static_cast<size_t>(tied));
    }
  }
  hooks_ = std::move(hooks);
  return static_cast<bool>(hooks_.before);
}

NamedTensors SpecModel::named_parameters() const {
  return lora_.placed_among(defined_only(net_->named_parameters(true)));
}

size_t SpecModel::tie_source(size_t i) const { return static_cast<size_t>(layers_[i].args["tie_to"].get<int64_t>()); }

const at::Tensor& SpecModel::tied_weight(size_t i) const {
  return net_->ptr<AdaptableEmbeddingImpl>(tie_source(i))->weight;
}

NamedTensors SpecModel::named_parameters_with_ties() const {
  NamedTensors out = named_parameters();
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i].type != kTiedLinear) continue;
    if (tied_weight(i).defined()) out.emplace_back(std::to_string(i) + ".weight", tied_weight(i));
  }
  return out;
}

std::vector<LinearSite> SpecModel::linear_sites() const {
  std::vector<LinearSite> sites;
  for (const auto& entry : net_->named_modules("", /*include_self=*/false)) {
    auto adaptable = std::dynamic_pointer_cast<OutputAdaptable>(entry.value());
    if (!adaptable) continue;
    LinearSite site{entry.key(), {}, nullptr, nullptr, {}, {}, std::nullopt, std::nullopt};
    site.set_output_adapter = [adaptable](OutputAdapter adapter) { adaptable->set_output_adapter(std::move(adapter)); };
    if (auto linear = std::dynamic_pointer_cast<AdaptableLinearImpl>(entry.value())) {
      site.weight = linear->weight;
      site.bias = linear->bias;
      site.set_input_adapter = [adaptable](InputAdapter adapter) { adaptable->set_input_adapter(std::move(adapter)); };
    } else if (auto conv = std::dynamic_pointer_cast<AdaptableConv2dImpl>(entry.value())) {
      site.weight = conv->weight;
      site.bias = conv->bias;
      site.set_input_adapter = [adaptable](InputAdapter adapter) { adaptable->set_input_adapter(std::move(adapter)); };
      const bool zeros = conv->padding_mode() == "zeros";
      site.conv = ConvGeometry{conv->stride(), conv->padding(), conv->dilation(), conv->groups(),
                               conv->padding().empty() ? "its padding is \"same\" (a padding given as a string)"
                               : !zeros ? "its padding_mode is not \"zeros\", which PEFT's adapters pad with"
                                        : ""};
    } else if (auto attention = std::dynamic_pointer_cast<MultiheadAttentionImpl>(entry.value())) {
      // Its packed q, k, v projection, amended as a linear layer's output; its out_proj comes with it.
      site.weight = attention->in_proj_weight;
      site.bias = attention->in_proj_bias;
      site.attention = true;
    } else if (auto embedding = std::dynamic_pointer_cast<AdaptableEmbeddingImpl>(entry.value())) {
      site.weight = embedding->weight;
      site.embedding = EmbeddingLookup{};
      if (const auto& padding = embedding->options.padding_idx()) site.embedding->padding_idx = *padding;
    }
    sites.push_back(std::move(site));
  }
  mark_attention_out_projs(sites);  // an attention's out_proj: adapted with it where it is targeted
  return sites;
}

std::vector<TokenSite> SpecModel::token_sites() const {
  std::vector<TokenSite> sites;
  for (const auto& entry : net_->named_modules("", /*include_self=*/false)) {
    if (auto embedding = std::dynamic_pointer_cast<torch::nn::EmbeddingImpl>(entry.value())) {
      sites.push_back({entry.key(), embedding->weight,
                       [embedding](const at::Tensor& weight) { embedding->weight = weight; }, true, false});
    } else if (auto linear = std::dynamic_pointer_cast<AdaptableLinearImpl>(entry.value())) {
      sites.push_back({entry.key(), linear->weight, [linear](const at::Tensor& weight) { linear->weight = weight; },
                       false, linear->bias.defined()});
    }
  }
  return sites;
}

std::vector<std::string> SpecModel::other_module_names() const {
  std::vector<std::string> names;
  for (const auto& entry : net_->named_modules("", /*include_self=*/false))
    if (!std::dynamic_pointer_cast<OutputAdaptable>(entry.value())) names.push_back(entry.key());
  return names;
}

NamedTensors SpecModel::named_buffers() const {
  NamedTensors out = defined_only(net_->named_buffers(true));
  for (auto& entry : lora_.named_buffers()) out.push_back(std::move(entry));
  return out;
}

std::vector<std::string> SpecModel::module_order() const {
  std::vector<std::string> names;
  for (const auto& entry : net_->named_modules()) names.push_back(entry.key());
  return names;
}

void SpecModel::set_training(bool training) { net_->train(training); }

bool SpecModel::is_training() const { return net_->is_training(); }

bool SpecModel::recompute_batch_norm(const InputSource& next) {
  CumulativeBatchNorm layers(*net_);
  if (layers.empty()) return false;
  const bool was_training = is_training();
  set_training(true);
  try {
    while (auto input = next()) forward({*input});
  } catch (...) {
    set_training(was_training);
    throw;
  }
  set_training(was_training);
  return true;
}

void SpecModel::write_torchscript(const std::string& path) const {
  auto unit = std::make_shared<torch::jit::CompilationUnit>();
  torch::jit::Module top(c10::QualifiedName("__torch__.accelerate.SpecModel"), unit);
  top.register_attribute("training", c10::BoolType::get(), is_training());
  // Inputs are x, x1, x2...; each layer's output is out<i>.
  auto input_name = [](size_t k) { return k == 0 ? std::string("x") : "x" + std::to_string(k); };
  std::string signature;
  for (size_t k = 0; k < input_count_; ++k) signature += ", " + input_name(k) + ": Tensor";
  std::string forward = "def forward(self" + signature + ") -> Tensor:\n";
  const auto& children = net_->children();
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::string name = std::to_string(i);
    auto layer = script_tensors(*children[i], "Layer" + name + "_" + layers_[i].type, is_training(), unit);
    std::string parameters, arguments;
    for (size_t k = 0; k < layers_[i].inputs.size(); ++k) {
      const TensorSource& source = layers_[i].inputs[k];
      parameters += ", " + layers_[i].input_names[k] + ": Tensor";
      arguments += std::string(k ? ", " : "") +
                   (source.model_input ? input_name(static_cast<size_t>(source.index)) : "out" + std::to_string(source.index));
    }
    if (layers_[i].type == kTiedLinear) {
      // The weight stays the embedding's alone: the top forward hands it over.
      parameters += ", weight: Tensor";
      arguments += ", getattr(self, \"" + std::to_string(tie_source(i)) + "\").weight";
    }
    layer.define("def forward(self" + parameters + ") -> Tensor:\n    " + layer_script(layers_[i]) + "\n");
    forward += "    out" + name + " = getattr(self, \"" + name + "\").forward(" + arguments + ")\n";
    top.register_module(name, layer);
  }
  forward += "    return out" + std::to_string(layers_.size() - 1) + "\n";
  top.define(forward);
  save_archive_atomically(path, [&](std::ostream& out) { top.save(out); });
}

std::shared_ptr<Model> model_from_spec(const std::string& json_spec, bool weights_pending) {
  return std::make_shared<SpecModel>(parse_layer_specs(json_spec), weights_pending);
}

}  // namespace acc
