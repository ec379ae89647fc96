// LoRA adapters in PEFT's files: `adapter_config.json` (LoraConfig's fields) and
// `adapter_model.safetensors` with PEFT's tensor names, "base_model.model.<module>.lora_A.weight"
// and "...lora_B.weight", so that peft.PeftModel.from_pretrained reads what we write and back.
#pragma once

#include <map>
#include <string>

#include "model/lora.h"

namespace acc {

struct LoraFiles {
  LoraConfig config;
  struct Pair {
    at::Tensor a, b;
  };
  std::map<std::string, Pair> modules;  // by module name
  // The modules to save's parameters and buffers, by their names in the model.
  std::map<std::string, at::Tensor> saved;
};

// `saved`: the parameters and buffers of the modules modules_to_save names (LoraConfig::saves),
// written whole under PEFT's names ("base_model.model.<name>") beside the adapters.
void save_lora_files(const std::string& dir, const LoraAdapters& adapters, const NamedTensors& saved);

// Reads and checks both files (configuration values PEFT allows but this library does not
// implement are refused by name; every tensor name must be PEFT's and come in A/B pairs of rank r,
// or lie in a module modules_to_save names).
LoraFiles read_lora_files(const std::string& dir);

}  // namespace acc
