// The PEFT methods whose adapters are named tensors of a layer (LoraAdapter::factors): LoHa, LoKr,
// VeRA, PVeRA, OFT, AdaLoRA, BOFT, HRA, FourierFT, MiSS, C3A, SHiRA, RandLoRA, DeLoRA, RoAd, GraLoRA and HiRA. What
// each adapts, draws, reads from files, merges and computes, in one table, so the shared code (adding, files, loading,
// merging, wiring) asks it instead of testing the method at each turn. LoRA, (IA)^3 and trainable tokens have tensors
// of their own.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

struct FactorMethod {
  PeftType type;
  const char* adaptable;  // what it adapts, for a target that is none of these
  // Each layer's tensors by their names after its module's, in PEFT's order, and what a message
  // calls them ("factors", VeRA's "vectors").
  std::vector<std::string> suffixes;
  const char* tensors_word;
  // Why a file's tensor named with `suffix` cannot be that tensor (empty where it can).
  std::string (*file_tensor_refusal)(const std::string& suffix, const at::Tensor& tensor);
  // Whether a file holds every one of a layer's tensors (LoKr's: w1, or w1_a and w1_b: checked
  // apart), and whether its biases are among a file's tensors where its bias option trains them.
  bool files_hold_every_tensor;
  bool files_hold_biases;
  // Whether its adapters take LoRA's r and scaling from the configuration (LyCORIS'), which loading
  // files into them compares.
  bool rank_and_scaling;
  // Its adapters for `chosen` (in the model's order), drawn as PEFT draws them; checks every site
  // first, changing nothing.
  std::vector<LoraAdapter> (*make)(const LoraConfig& config, const std::vector<LinearSite>& chosen);
  // The tensors `config` makes for `site`, each of its shape, and what decides those shapes.
  std::vector<FactorShape> (*shapes)(const LoraConfig& config, const LinearSite& site);
  std::string (*decided_by)(const LoraConfig& config, const std::string& module);
  // The settings beyond the tensors' shapes that change what its adapters compute, as text (empty:
  // none): files loaded into existing adapters must have the same.
  std::string (*computing_settings)(const LoraConfig& config);
  // The layer's weight `w` merged with `factors` (the adapter's own or a state's), as PEFT's merge.
  at::Tensor (*merged_weight)(const LoraAdapter& adapter, const at::Tensor& w, const NamedTensors& factors,
                              const LoraConfig& config);
  // What the layer's forward runs on its output and on its input (null: nothing).
  OutputAdapter (*output_adapter)(const LoraAdapter& adapter, const LoraConfig& config,
                                  std::shared_ptr<const bool> enabled);
  InputAdapter (*input_adapter)(const LoraAdapter& adapter, const LoraConfig& config,
                                std::shared_ptr<const bool> enabled);
  // The layer's bias merged with `factors`, for a method whose merge changes it (RoAd's; null: the
  // bias stays).
  at::Tensor (*merged_bias)(const at::Tensor& bias, const NamedTensors& factors, const LoraConfig& config) = nullptr;
  // The name under which merged_weight takes the weight as it was before other adapters merged into
  // it, for a method whose merge multiplies the weight (HiRA's); null for the others.
  const char* unmerged_weight = nullptr;
};

// The frozen tensors a method's layers share (LoraAdapter::projections: VeRA's projections,
// RandLoRA's bases): their names in PEFT's files and in the model's state (beside its buffers), their
// dimensions and shapes over the targeted layers, and whether PEFT's files repeat them under each
// layer's name ("<module>.<state name>": RandLoRA's layers hold its bases too).
struct SharedTensors {
  const char* file_a;
  const char* file_b;
  const char* state_a;
  const char* state_b;
  int64_t dims;
  std::pair<std::vector<int64_t>, std::vector<int64_t>> (*shapes)(const LoraConfig& config,
                                                                  const std::vector<LinearSite>& chosen);
  bool per_layer_copies;
};
// The method's shared tensors; null for a method without them.
const SharedTensors* shared_tensors(PeftType type);
// The adapters' shared tensors under their state names (VeRA's projections, RandLoRA's bases), the
// buffers PEFT's model holds itself; none where the adapters share none.
NamedTensors shared_state_buffers(const LoraAdapters& adapters);

// The method's entry; null for LoRA, (IA)^3 and trainable tokens.
const FactorMethod* factor_method(PeftType type);
// The entry of the adapter's method (null for a LoRA or (IA)^3 adapter).
inline const FactorMethod* factor_method(const LoraAdapter& adapter) {
  return is_ia3(adapter) ? nullptr : factor_method(adapter.method);
}

}  // namespace acc
