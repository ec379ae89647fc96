// adapter_config.json as PEFT writes and reads it, for every method this library builds (LoRA and
// its variants, trainable tokens, (IA)^3, LoHa, LoKr, VeRA, OFT, AdaLoRA, BOFT, HRA, FourierFT):
// the fields in PEFT's order, PEFT's defaults for absent ones, and values PEFT allows but this
// library does not implement refused by name (model/peft/lora_files.h reads and writes the folder).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "model/peft/lora_config.h"

namespace acc {

// The method's configuration as PEFT writes it.
nlohmann::ordered_json adapter_config_json(const LoraConfig& config);

// The configuration `j` (read from `path`, named in errors: Io) holds, each object's keys in the
// file's order (rank_pattern's first matching key wins).
LoraConfig config_from_json(const nlohmann::ordered_json& j, const std::string& path);

}  // namespace acc
