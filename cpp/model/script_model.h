// A model backed by a TorchScript module (loaded from PyTorch, or generated from a layer spec).
#pragma once

#include <torch/script.h>

#include <optional>
#include <string>

#include "model/model.h"
#include "model/quantized_linear.h"
#include "model/script_lora.h"
#include "model/script_units.h"
#include "model/unit_lora.h"

namespace acc {

// The module's submodules (itself first, named "") as Python's named_modules() lists them: each module
// once, under its first path. libtorch's lists every path to a module several attributes hold (in a
// loaded archive, copies holding the same tensors), which would make one layer several targets for
// PEFT's methods or quantisation.
std::vector<torch::jit::NameModule> distinct_named_modules(const torch::jit::Module& module);

// Flattens a forward result: a tensor is one unnamed entry, tuples and lists give "0", "1", ...,
// dicts give their keys, nested containers join names with '.', numbers become 0-dim tensors.
NamedTensors flatten_outputs(const c10::IValue& value);

// A submodule whose class is a Linear (nn.Linear, NonDynamicallyQuantizableLinear) with a 2-D
// floating-point weight; transformers' Conv1D (weight in x out, a bias of its outputs).
bool is_linear_module(const torch::jit::Module& module);
bool is_transformers_conv1d(const torch::jit::Module& module);

class ScriptModel final : public Model {
 public:
  explicit ScriptModel(torch::jit::Module module);
  ~ScriptModel() override;

  NamedTensors forward(const std::vector<at::Tensor>& inputs) override;
  NamedTensors named_parameters() const override;
  NamedTensors named_parameters_with_ties() const override;
  NamedTensors named_buffers() const override;
  std::vector<std::string> module_order() const override;
  void set_training(bool training) override;
  bool is_training() const override;
  void set_graph_optimization(bool enabled) override { optimize_ = enabled; }
  // Stage 3's units: see model/script_units.h. LoRA adapters join their layer's unit: adapters of
  // weights have their adapted weights made unit by unit (model/unit_lora.h), adapters of outputs
  // run from markers inside their layer's unit (model/script_lora.h).
  std::vector<std::vector<std::string>> parameter_units() const override;
  bool set_unit_hooks(UnitHooks hooks) override;
  void set_unit_policy(const UnitPolicy& policy) override;
  // Adapts the layers' outputs as PEFT does (model/script_lora.h); where the forward reads an
  // adapted layer's weight itself, and lora_dropout is 0, that layer's weight instead (model/peft/lora.h).
  size_t add_lora(const LoraConfig& config) override;
  // Through a forward marked after the layers' calls, as LoRA's (model/script_lora.h).
  void watch_layer_inputs(const std::vector<std::string>& layers, const LayerInputSeen& seen,
                          const std::function<void()>& run) override;
  void merge_lora() override;
  // The chosen nn.Linear and transformers' Conv1D layers (its weight transposed first, as
  // transformers does) get 4-bit or int8 weights: the module's `weight` becomes the codes (uint8
  // as Params4bit, int8 as Int8Params; frozen), its bias frozen (a 4-bit layer's in the compute
  // dtype, which bitsandbytes casts it to on the first forward), and the forward runs them through
  // markers (model/quantized_linear.h). The quantisation states are listed among the buffers under
  // bitsandbytes' state-dict names. Before adapters, optimizers or preparing; once.
  size_t quantize(const QuantizationConfig& config) override;
  bool has_quantized_layers() const override { return quantized_ != nullptr; }
  void check_quantization_state(const NamedTensors& state) const override;
  bool is_quantization_text(const std::string& name) const override;
  void quantization_state_loaded(const NamedTensors& state) override;
  at::Tensor four_bit_dequantized(const std::string& module) const override;

 protected:
  void forget_adapted_layers() override { drop_lora_outputs(); }
  void write_torchscript(const std::string& path) const override;
  // Submodules whose class is a Linear (nn.Linear, NonDynamicallyQuantizableLinear) with a 2-D weight.
  std::vector<LinearSite> linear_sites() const override;
  std::vector<LinearSite> parameter_sites() const override;
  bool is_transformers_model() const override;
  std::vector<std::string> other_module_names() const override;
  std::vector<TokenSite> token_sites() const override;

 private:
  NamedTensors run_forward(const std::vector<at::Tensor>& inputs);  // forward without its error translation
  mutable torch::jit::Module module_;
  bool optimize_ = true;
  // forward's argument counts (without self), read once from its schema; none without a forward.
  struct Arity {
    size_t required, expected;
    std::string schema;
  };
  std::optional<Arity> arity_;
  const int64_t unit_token_ = next_unit_token();
  UnitPolicy unit_policy_;
  // Planned with unit_policy_, keeping the calls of the layers whose outputs LoRA adapts.
  mutable std::optional<ScriptUnitPlan> unit_plan_;
  const ScriptUnitPlan& unit_plan() const;
  // forward with the unit markers, while hooks are installed.
  std::unique_ptr<torch::jit::GraphFunction> units_forward_;
  // LoRA on outputs: the layers adapted so (their order is the markers'), what the markers run, and
  // forward with the markers.
  std::vector<std::string> output_layers_;
  std::shared_ptr<MarkedAdapters> lora_outputs_;
  bool input_markers_ = false;  // the marked forward runs input adapters too ((IA)^3)
  std::unique_ptr<torch::jit::GraphFunction> lora_forward_;
  void drop_lora_outputs();
  // Stage 3's units with each adapted layer's adapters in its weight's unit, and those adapters by
  // unit; none where the forward is one unit or an adapted weight is in no unit under its own name
  // (a tied one).
  struct AdaptedUnits {
    std::vector<std::vector<std::string>> units;
    std::vector<std::vector<size_t>> adapters_of_unit;
    std::vector<std::vector<size_t>> tokens_of_unit;  // trainable tokens, by the unit of their weight
  };
  std::optional<AdaptedUnits> adapted_units() const;
  // Quantised layers: what their markers run, in the markers' order (LoRA's branches on them included),
  // and forward with the markers (the LoRA and watching forwards carry them too).
  std::shared_ptr<QuantizedLayers> quantized_;
  std::unique_ptr<torch::jit::GraphFunction> quantized_forward_;
  // The forward with LoRA's markers (calls of `layers`) and the quantised layers' markers.
  std::shared_ptr<torch::jit::Graph> marked_forward(const std::vector<std::string>& layers) const;
  // While stage 3's hooks run a model with LoRA adapters of weights or trainable tokens.
  std::unique_ptr<UnitLora> unit_lora_;
};

}  // namespace acc
