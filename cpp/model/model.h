// A trainable model: a TorchScript module loaded from a file, or a sequential model built from a
// layer spec. Both expose the same operations; the C API and the Accelerator see only this class.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/peft/eva.h"
#include "model/peft/lora.h"
#include "model/unit_policy.h"
#include "tensor/named_tensors.h"

namespace acc {

struct QuantizationConfig;   // model/quantization_config.h
struct LoraFiles;            // model/peft/lora_files.h
struct WeightedCombination;  // model/peft/weighted_adapter.h
class MixedBatch;            // model/peft/mixed_batch.h

// Called around each unit's forward (see Model::set_unit_hooks): sharded data parallelism's stage 3
// gathers a unit's parameters just before it runs and frees them after; `after` may return the
// output with a gradient hook attached. `inputs` (optional) is given every tensor a call of a
// module takes, after `before` for the call's units and before it runs (stage 3 learns from their
// gradients when the call's backward is done with its frozen parameters); a model that cannot
// name a call's inputs does not call it.
struct UnitHooks {
  std::function<void(size_t unit)> before;
  std::function<at::Tensor(size_t unit, const at::Tensor& output)> after;
  std::function<void(const std::vector<size_t>& units, const std::vector<at::Tensor>& inputs)> inputs;
};

class Model {
 public:
  virtual ~Model() = default;

  // Runs forward. Outputs are flattened to named tensors (see flatten_outputs in script_model.h).
  virtual NamedTensors forward(const std::vector<at::Tensor>& inputs) = 0;
  // Parameters and buffers with their full dotted names, aliasing the model's storage.
  virtual NamedTensors named_parameters() const = 0;
  // Every name of every parameter: a tensor several modules hold (a tied head) under each of them,
  // where named_parameters lists it once.
  virtual NamedTensors named_parameters_with_ties() const { return named_parameters(); }
  virtual NamedTensors named_buffers() const = 0;
  // The modules' dotted names in PyTorch's named_modules() order ("" for the model itself first):
  // state_dict lists tensors module by module in it (model/state_dict_order.h). None: parameters,
  // then buffers.
  virtual std::vector<std::string> module_order() const { return {}; }
  virtual void set_training(bool training) = 0;
  virtual bool is_training() const = 0;
  // Saves a TorchScript archive that torch.jit.load reads; LoRA adapters are merged into the file's
  // weights (the model here keeps them).
  virtual void save_torchscript(const std::string& path) const;
  // Whether a TorchScript forward is optimised by the JIT (see acc_model_set_graph_optimization);
  // models that run eagerly anyway ignore it.
  virtual void set_graph_optimization(bool) {}
  // PyTorch's swa_utils.update_bn, the model's part: runs forward in training mode on each input
  // `next` gives until it gives none, with every BatchNorm layer's running statistics reset and kept
  // as cumulative averages (momentum None), then gives the layers their momentum and the model its
  // mode back. False, reading no input, where the model has no BatchNorm layer (PyTorch returns there
  // too). By default a model whose buffers hold BatchNorm's statistics refuses (Unsupported): a
  // TorchScript BatchNorm's momentum is a constant of its graph.
  using InputSource = std::function<std::optional<at::Tensor>()>;
  virtual bool recompute_batch_norm(const InputSource& next);

  // Moves parameters and buffers in place (their identity is kept, so optimizers stay valid).
  // Only floating tensors change dtype.
  void to(c10::optional<at::Device> device, c10::optional<at::ScalarType> dtype);
  // Parameters and buffers, detached, sharing storage, in PyTorch's state_dict() order.
  NamedTensors state_dict() const;
  // The modules to save and LN tuning's modules as they were when the adapters were added (what a
  // disabled forward and unload compute with), under PEFT's state_dict names
  // ("<module>.original_module.<tensor>", LN tuning's "<module>.base_layer.<tensor>"): handles, which
  // save_state writes beside the weights and load_state copies into. Empty where none are kept.
  NamedTensors kept_original_modules() const;
  // The name kept_original_modules gives the original of `name`, a tensor of a module to save, and
  // those of every such tensor, whether the model keeps their originals or not (stage 3 does not).
  std::string original_module_name(const std::string& name) const;
  std::set<std::string> original_module_names() const;
  // The kept originals' values are unknown, `why`: a disabled forward and LN tuning's unload are
  // then refused, saying why, until a state dict gives all of them (load_state_dict).
  void kept_originals_unknown(std::string why) { lora_.originals_unknown(std::move(why)); }
  // Copies values in by name; see acc_model_load_state_dict for the strict rules. Returns the
  // names the model has but `state` lacks, and those `state` has but the model lacks.
  std::pair<std::vector<std::string>, std::vector<std::string>> load_state_dict(const NamedTensors& state, bool strict);
  // The checks of load_state_dict alone (names under `strict`, shapes): throws what it would.
  std::pair<std::vector<std::string>, std::vector<std::string>> check_state_dict(const NamedTensors& state,
                                                                                 bool strict) const;
  // load_state_dict's checks of quantised layers' states, before anything is copied; the entries
  // holding 4-bit layers' JSON text (which may differ in length from the model's); and taking those
  // texts in after the tensors are copied.
  virtual void check_quantization_state(const NamedTensors&) const {}
  virtual bool is_quantization_text(const std::string&) const { return false; }
  virtual void quantization_state_loaded(const NamedTensors&) {}
  std::vector<at::Tensor> trainable_parameters() const;
  // The gradients that trainable parameters have (aliasing them).
  std::vector<at::Tensor> gradients() const;
  // Freezes (or unfreezes) the parameters whose names match: a frozen parameter gets no gradient,
  // and optimizers and DDP made afterwards leave it out. Returns how many matched; none is an error
  // (a pattern that matches nothing is most likely a typo).
  virtual size_t set_requires_grad(const std::string& patterns, bool requires_grad);
  // The names of the parameters that match, in the model's order.
  std::vector<std::string> parameter_names_matching(const std::string& patterns) const;
  at::Tensor find_tensor(const std::string& name) const;  // a parameter or buffer; throws if absent
  // The model's units in forward order, as parameter names: the granularity at which sharded data
  // parallelism (stage 3) gathers parameters. A spec model has one unit per layer with parameters,
  // a TorchScript model one per submodule its forward calls (model/script_units.h); by default the
  // whole model is one unit.
  virtual std::vector<std::vector<std::string>> parameter_units() const;
  // Installs hooks that forward calls around each unit of parameter_units(); false where the model
  // runs as one piece (the caller then brackets the whole forward). Empty hooks uninstall.
  virtual bool set_unit_hooks(UnitHooks) { return false; }
  // FSDP's auto_wrap_policy: which modules make parameter_units() (model/unit_policy.h).
  virtual void set_unit_policy(const UnitPolicy&) {}
  // FSDP's activation_checkpointing: the modules `policy` would wrap are recomputed in backward
  // (model/activation_checkpoint.h); returns how many. A model that cannot re-run its modules from
  // outside (TorchScript) refuses it (Unsupported).
  virtual size_t checkpoint_activations(const UnitPolicy& policy);
  // While sharded data parallelism (stage 3) holds only slices of the parameters, a TorchScript
  // file of the model would hold empty tensors: save_torchscript is refused with `reason`, and
  // merge_lora too (empty: allowed again).
  void set_sharded_at_rest(std::string reason);
  virtual bool sharded_at_rest() const { return !sharded_at_rest_.empty(); }
  // While sharded data parallelism (stages 1-3) keeps the parameters in its flat buffers, which the
  // optimizer steps, to() would cut them loose: a move or cast is refused with `reason` (empty:
  // allowed again).
  void set_flat_parameters(std::string reason) { flat_parameters_ = std::move(reason); }
  virtual const std::string& flat_parameters() const { return flat_parameters_; }
  // Refuses (InvalidArgument, changing nothing) what to(device, dtype) would change while the
  // parameters are flat (acc_model_to's check; the library's own placements come before).
  void require_movable(c10::optional<at::Device> device, c10::optional<at::ScalarType> dtype) const;
  // FSDP's cpu_ram_efficient_loading (DeepSpeed's zero3_init_flag): on every process but the main
  // one a model is built with placeholder weights (each parameter and buffer one zero, expanded to
  // its shape: no memory, reads as zeros, refuses writes) that preparing fills from the main process.
  // Until then its values are refused (forward, state_dict, saving; require_weights); loading a
  // state dict only checks it. Placeholders stay placeholders when moved (to()).
  void make_weights_pending();
  bool weights_pending() const { return weights_pending_; }
  // Gives the placeholders storage on `device` (default: where they are), uninitialised (a
  // broadcast fills them next), and ends pending; with `parameters_too` false only the buffers get
  // it and the model stays pending (stage 3 fills its shards straight from the main process, then
  // calls weights_arrived).
  void materialize_weights(c10::optional<at::Device> device, bool parameters_too);
  void weights_arrived();
  // Fails (NotInitialized) while the weights are pending: `action` would read them.
  void require_weights(const char* action) const;
  // Where the model computes: its first parameter's device (the CPU without parameters).
  c10::Device device() const;
  // Runs forward on `inputs` moved to device(), without recording autograd history (a pass over
  // data that only reads the layers' inputs: EVA, CorDA).
  void forward_without_grad(const std::vector<at::Tensor>& inputs);
  // Fails (InvalidArgument) while sharded at rest: `action` would read or write the model's own
  // (empty) parameter tensors.
  void require_whole_parameters(const char* action) const;
  // An optimizer made over the model, or a prepared model (DDP, sharding), was built over the
  // trainable parameters of the time: while such a hold lives, adding adapters and unfreezing are
  // refused with `reason` (freezing too when `freezing_too`: DDP's and sharding's reductions expect
  // every gradient; merging adapters too when `merging_too`). Dropping the returned hold ends it.
  std::shared_ptr<void> hold_trainable_set(std::string reason, bool freezing_too, bool merging_too = false);
  // Sets every parameter's gradient to none, and those kept elsewhere for it (set_gradient_keeper).
  virtual void zero_grad();
  // Sharded data parallelism keeps the gradients the optimizer steps in slices of its own: zero_grad
  // clears them too through `zero` (empty: nothing kept elsewhere).
  void set_gradient_keeper(std::function<void()> zero) { zero_kept_gradients_ = std::move(zero); }

  // transformers' load_in_4bit and load_in_8bit (model/quantization_config.h): the linear layers
  // `config` chooses keep their weights in bitsandbytes' 4-bit or LLM.int8 storage, frozen, and
  // compute as its Linear4bit or Linear8bitLt does (model/four_bit_linear.h, eight_bit_linear.h).
  // Returns how many layers. Unsupported by default (TorchScript models have it).
  virtual size_t quantize(const QuantizationConfig& config);
  virtual bool has_quantized_layers() const { return false; }
  // PEFT's prepare_model_for_kbit_training: every parameter frozen, and every float16 or bfloat16
  // one cast to float32 (a quantised layer's bias included: its forward casts it back to the
  // compute dtype or its input's, as bitsandbytes' forwards do). Returns how many were cast. Its gradient
  // checkpointing is not done here (checkpoint_activations, where the model allows it).
  virtual size_t prepare_for_kbit_training();
  // Fails (Unsupported) where the model has quantised layers: `action` needs floating-point weights.
  void require_no_quantized_layers(const char* action) const;

  // LoRA adapters (model/peft/lora.h), PEFT's get_peft_model: adapts the linear layers the config targets
  // and freezes every other parameter. named_parameters lists each adapter's parameters right after
  // its layer's own, in PEFT's order. Returns how many layers were adapted. A refusal changes
  // nothing, the global generator included (some checks come after PEFT's draws).
  virtual size_t add_lora(const LoraConfig& config);
  // `config` with PEFT's all-linear turned into the names of the model's linear layers (nn.Linear,
  // transformers' Conv1D) but its output layer, in the model's order; InvalidArgument where none is left.
  LoraConfig with_all_linear(const LoraConfig& config) const;
  // PEFT's layout in `dir`: adapter_config.json and adapter_model.safetensors.
  virtual void save_lora(const std::string& dir) const;
  // Reads what save_lora (or PEFT's save_pretrained) wrote: adds the adapters if the model has none,
  // else requires the same configuration; every check comes before anything changes.
  virtual void load_lora(const std::string& dir);
  // AdaLoRA (model/peft/adalora.h): `loss` plus orth_reg_weight times the orthogonal regularization of
  // the adapters' A and B (PEFT's AdaLoraModel.forward adds it to the model's loss), and the rank
  // allocator's step after a backward (PEFT's update_and_allocate). Refused (InvalidArgument)
  // without AdaLoRA adapters, and (Unsupported) under sharded data parallelism, whose processes hold
  // slices of the adapters (stage 3) or of their gradients and optimizer steps (stages 1 and 2).
  virtual at::Tensor adalora_loss(const at::Tensor& loss) const;
  virtual void adalora_update_and_allocate(int64_t global_step);
  // Merges the adapters into the weights and removes them (PEFT's merge_and_unload).
  virtual void merge_lora();
  // PEFT's merge_and_unload(adapter_names=...): the named adapters (active or kept aside) merged
  // into the weights in the order given, then every adapter removed; nothing changes on a refusal.
  virtual void merge_lora_adapters(const std::vector<std::string>& names);
  // How many merges and unloads have removed adapters from the model: a prepared model refuses to
  // go on training once one has (its engine holds the parameters of the time).
  virtual uint64_t merges() const { return merges_; }
  // PEFT's enable_adapter_layers / disable_adapter_layers: disabled, the adapted layers compute as
  // the base model's (a reference model's outputs without a second model), and the modules to save
  // as they were when the adapters were added (a forward without gradients only). Fails without
  // adapters, and beside modules_to_save under stage 3 (which keeps no whole original).
  virtual void set_lora_enabled(bool enabled);
  virtual const LoraAdapters& lora() const { return lora_; }

  // PEFT's several named adapters (model/named_adapters.cpp): one is active, lora(), the model's
  // adapters in every other respect; the others are kept aside, frozen, outside named_parameters,
  // computing nothing. Adapters made by add_lora or load_lora are "default" (PEFT's name).
  // add_named_lora and load_named_lora are PEFT's add_adapter and load_adapter: the new adapter is
  // drawn (and loaded) as add_lora (load_lora) would, then kept aside; on a model without adapters
  // it becomes the active one. Each adapter with modules_to_save trains its own copy of them, made
  // from the originals (PEFT's ModulesToSaveWrapper); while another is active, those modules are
  // the originals, frozen. Refused (Unsupported) where any of them trains the model's biases (bias),
  // trainable tokens, or a weight-decomposing initialisation.
  virtual size_t add_named_lora(const std::string& name, const LoraConfig& config);
  virtual void load_named_lora(const std::string& dir, const std::string& name);
  // PEFT's set_adapter: `name` computes and trains from now on, the active one is kept aside, frozen.
  virtual void set_adapter(const std::string& name);
  // PEFT's delete_adapter: the active one's place goes to the first of the others by name, as PEFT's.
  virtual void delete_adapter(const std::string& name);
  // PEFT's unload: every adapter removed, nothing merged; the model computes as its base does.
  virtual void unload_lora();
  // PEFT's add_weighted_adapter: a new adapter `name`, kept aside, whose layers combine the named
  // adapters' with `weights` (model/peft/weighted_adapter.h): PEFT's configuration (the first adapter's,
  // with the targets of all and r = lora_alpha = the combined rank), drawn as PEFT draws it, then
  // written (DARE's masks drawn after). Returns how many layers it adapts.
  virtual size_t add_weighted_adapter(const std::vector<std::string>& adapters, const std::vector<double>& weights,
                                      const std::string& name, const WeightedCombination& how);
  // PEFT's initialize_lora_eva_weights (model/peft/eva.h): the active adapters, made with init "eva",
  // take the components of their layers' inputs on `source`'s batches (read as `reading` says; a
  // layer's rows joined from every process by `gather_rows`, the rows themselves on one), the
  // model run in evaluation mode without gradients, adapters disabled. Ranks are redistributed as
  // PEFT's; returns how many layers keep adapters. Linear layers called as modules only.
  virtual size_t initialize_lora_eva(const EvaSource& source, const EvaReading& reading,
                                     const std::function<at::Tensor(const at::Tensor&)>& gather_rows);
  // PEFT's replace_lora_weights_loftq (model/model_loftq.cpp): each LoRA adapter of `adapter` (empty:
  // the active one) on a 4-bit layer restarts from LoftQ's factors of the layer's quantisation error,
  // the unquantised weight taken from `weights` (`<module>.weight`, read from `source`, named in
  // errors); `keep(module)` (may be empty) decides after each layer whether its new adapters stay
  // or the old ones come back. Every weight is checked before anything changes. Returns how many
  // layers kept new adapters.
  virtual size_t replace_lora_weights_loftq(const NamedTensors& weights, const std::string& source,
                                            const std::string& adapter,
                                            const std::function<bool(const std::string& module)>& keep);
  // The weight of a 4-bit layer at `module` dequantised as bitsandbytes' dequantize_4bit gives it;
  // undefined where the module is none.
  virtual at::Tensor four_bit_dequantized(const std::string& /*module*/) const { return {}; }
  // PEFT's preprocess_corda and get_peft_model with init_lora_weights "corda" (model/peft/corda.h): the
  // model runs on the batches `next` gives until it gives none (evaluation mode, no gradients; the
  // forward taking each batch's first `inputs` fields), the targeted linear layers' inputs summed
  // into covariances, and the adapters start from the weights' components along them, the weights
  // keeping the residual. Returns how many layers were adapted.
  virtual size_t add_lora_corda(LoraConfig config, const std::function<std::optional<std::vector<at::Tensor>>()>& next,
                                int64_t inputs);
  // PEFT's preprocess_loraga and get_peft_model with init_lora_weights "lora_ga" (model/peft/lora_ga.h), in
  // two steps around the caller's own training steps (PEFT's train_step): begin_lora_ga puts the
  // model in training mode with every parameter frozen but the targeted linear layers' weights
  // (their gradients cleared), whose backward passes are counted; the caller runs forward, loss and
  // backward on its batches, without an optimizer step; add_lora_ga averages each weight's
  // gradient over its backward passes, gives the parameters their requires_grad and the model its
  // mode back, and adds the adapters from the gradients (the state is consumed even where adding
  // fails). Returns how many layers were adapted.
  virtual void begin_lora_ga(LoraConfig config);
  virtual size_t add_lora_ga();
  bool estimating_lora_ga() const { return lora_ga_estimate_ != nullptr; }
  // Runs `run` while every call of layers[k] (linear layers the forward calls as modules, of a model
  // without adapters) hands its input to seen(k, input); Unsupported, naming it, for a layer whose
  // input cannot be seen.
  using LayerInputSeen = std::function<void(size_t layer, const at::Tensor& input)>;
  virtual void watch_layer_inputs(const std::vector<std::string>& layers, const LayerInputSeen& seen,
                                  const std::function<void()>& run);
  // The adapters' names in the order they came, and the active one's.
  virtual std::vector<std::string> adapter_names() const;
  virtual const std::string& active_adapter() const { return active_adapter_; }
  // The adapters kept aside, by name.
  virtual const std::map<std::string, LoraAdapters>& inactive_adapters() const { return inactive_; }
  // PEFT's forward with adapter_names (model/peft/mixed_batch.h): while the returned batch lives,
  // the forward computes sample i with the adapter names[i] ("__base__": none), through the layers
  // that take an output adapter now.
  virtual std::unique_ptr<MixedBatch> mixed_batch(const std::vector<std::string>& names) const;

 protected:
  // The TorchScript archive of the model as it is (save_torchscript merges adapters around it).
  virtual void write_torchscript(const std::string& path) const = 0;
  // The linear layers adapters can adapt, and the names of every other module (to refuse targets
  // that are not linear layers), in the model's module order.
  virtual std::vector<LinearSite> linear_sites() const { return {}; }
  virtual std::vector<std::string> other_module_names() const { return {}; }
  // Every parameter of a submodule as a site target_parameters may adapt (`parameter` its name,
  // `module` its module's), in the model's order: the models whose forward can compute with another
  // tensor in its place (TorchScript); none for the others.
  virtual std::vector<LinearSite> parameter_sites() const { return {}; }
  // Whether the model is of a transformers class (a PreTrainedModel), whose output layer PEFT's
  // all-linear leaves out.
  virtual bool is_transformers_model() const { return false; }
  // linear_sites, then parameter_sites.
  std::vector<LinearSite> adaptable_sites() const;
  // The embeddings and linear layers whose rows trainable_token_indices may train.
  virtual std::vector<TokenSite> token_sites() const { return {}; }

  LoraAdapters lora_;
  // Takes the layers' wiring for the active adapters down (a TorchScript model's marked forward).
  virtual void forget_adapted_layers() {}
  // load_lora of PEFT's TRAINABLE_TOKENS files (`where`: the folder, quoted, for messages).
  void load_trainable_tokens(const LoraFiles& files, const std::string& where);
  // load_lora's work on what read_lora_files read from `where`.
  void load_lora_files(LoraFiles files, const std::string& where);
  // Freezes every parameter but the adapters' (LoRA's, the trainable tokens') and `trained_whole`.
  void freeze_all_but_adapters(const std::map<std::string, at::Tensor>& trained_whole);
  // Fails with a live hold's reason when the trainable set may not change (see hold_trainable_set).
  void require_trainable_set_free(bool freezing) const;
  // Fails with the reason of a live hold that keeps adapters from being merged.
  void require_merging_free() const;

 private:
  // The requires_grad of the base model's parameters (all but the adapters'), by name, and the names
  // of those the active adapters train whole (modules to save, biases).
  struct BaseFlags {
    std::map<std::string, bool> requires_grad;
    std::set<std::string> trained_whole;
  };
  BaseFlags base_flags() const;
  // Gives the base parameters their flags of `before` back (PEFT's set_adapter, and an add_adapter
  // that fails, leave the user's settings alone), but for those the active adapters train whole
  // now, which train, and those the adapters of `before` trained whole, which are frozen again.
  void restore_base_flags(const BaseFlags& before);
  // add_weighted_adapter over IA3 adapters (PEFT's IA3Model.add_weighted_adapter): their vectors summed.
  size_t add_weighted_ia3(const std::vector<const LoraAdapters*>& sources, const std::vector<double>& weights,
                          const std::string& name, const WeightedCombination& how);
  // add_lora's work, which may have drawn before it fails.
  size_t add_adapters(const LoraConfig& config);
  // Named adapters: see add_named_lora.
  std::string active_adapter_ = "default";
  std::map<std::string, LoraAdapters> inactive_;
  std::vector<std::string> adapter_order_;  // the names given, in the order the adapters came
  // The active adapters taken off the model, whole, and the model left without any.
  LoraAdapters take_active_adapters();
  // The same, to be kept aside: the modules they save hold their original values again, and the
  // adapters their own values of them (reinstate brings those back).
  LoraAdapters set_active_aside();
  // `kept` made the active adapters again (enabled or not): the layers wired by add_lora of its
  // configuration, drawing nothing from the global generator; `kept` is left as it was on failure.
  void reinstate(LoraAdapters& kept, bool enabled);
  // Runs `make` (which gives the model adapters of `config` of its own) with the active ones set
  // aside, and keeps what it made aside as `name`; on failure the model is as it was, the global
  // stream too.
  size_t make_named(const std::string& name, const LoraConfig& config, const std::function<size_t()>& make);
  void forget_named_adapters();
  // Every adapter removed, nothing merged (PEFT's unload; `every_original`: its delete_adapter of the
  // last adapter, which puts the modules to save back as they were too).
  void remove_adapters(bool every_original);
  // Forgets the adapter kept aside as `name`.
  void drop_kept_aside(const std::string& name);
  std::string sharded_at_rest_;
  std::string flat_parameters_;
  struct LoraGaEstimate;  // model/model_lora_ga.cpp
  std::shared_ptr<LoraGaEstimate> lora_ga_estimate_;
  std::function<void()> zero_kept_gradients_;
  bool weights_pending_ = false;
  struct TrainableSetHold {
    std::string reason;
    bool freezing_too;
    bool merging_too;
  };
  std::vector<std::weak_ptr<const TrainableSetHold>> holds_;
  uint64_t merges_ = 0;
};

// Makes each tensor a placeholder in place (see Model::make_weights_pending).
void make_placeholders(const NamedTensors& tensors);
// Gives each placeholder among `tensors` memory of its own (uninitialised), in place, on `device`
// (none: where it is).
void fill_placeholders(const std::vector<at::Tensor>& tensors, c10::optional<at::Device> device = c10::nullopt);

// Writes a TorchScript archive to `path` by `save(out)` into a temporary file renamed into place:
// a save that fails or is stopped leaves the file that was there. An unwritable place or a failed
// write (a full disk) is an Io error naming the file (write_stream).
void save_archive_atomically(const std::string& path, const std::function<void(std::ostream& out)>& save);

// `weights_pending`: built with placeholder weights (Model::make_weights_pending). A TorchScript
// file is read whole first (torch::jit::load has no lazy reading); a spec model's layers never
// hold their weights past their construction.
std::shared_ptr<Model> load_torchscript_model(const std::string& path, bool weights_pending = false);
std::shared_ptr<Model> model_from_spec(const std::string& json_spec, bool weights_pending = false);

// Loading converts between float dtypes (a bf16 file into fp32 weights) but never between kinds:
// integer bits read as weights, or weights truncated into a counter, are a wrong file
// (InvalidArgument naming the entry).
void require_same_dtype_kind(const std::string& name, const at::Tensor& given, const at::Tensor& own);

}  // namespace acc
