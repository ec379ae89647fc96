// LoRA adapters in PEFT's files: `adapter_config.json` (LoraConfig's fields) and
// `adapter_model.safetensors` with PEFT's tensor names, "base_model.model.<module>.lora_A.weight"
// and "...lora_B.weight" (an embedding's "...lora_embedding_A" and "...lora_embedding_B", DoRA's
// "...lora_magnitude_vector"; (IA)^3's "...ia3_l", model/peft/ia3.h), so that
// peft.PeftModel.from_pretrained reads what we write and back.
#pragma once

#include <map>
#include <string>

#include "model/peft/lora.h"

namespace acc {

// PEFT's two files in an adapter's folder.
constexpr const char* kAdapterConfigFile = "adapter_config.json";
constexpr const char* kAdapterWeightsFile = "adapter_model.safetensors";
constexpr const char* kAdapterFileNames[] = {kAdapterConfigFile, kAdapterWeightsFile};
// The weights as PEFT's older saves wrote them (torch.save's pickle), read where there is no
// safetensors file.
constexpr const char* kAdapterPickledWeightsFile = "adapter_model.bin";
// The lock a save takes in the folder (every process of a job may save into one folder).
constexpr const char* kAdapterSaveLockFile = ".accelerate_adapter_save.lock";

struct LoraFiles {
  LoraConfig config;
  struct Pair {
    at::Tensor a, b;
    at::Tensor magnitude;  // DoRA's (use_dora)
    at::Tensor b_bias;     // lora_B's bias (lora_bias)
    bool embedding = false;  // PEFT's lora_embedding_A and lora_embedding_B (an embedding's)
    // Named "<attention>.base_layer.out_proj...": the out_proj adapter of that attention (PEFT's
    // lora.MultiheadAttention), its rank the attention's.
    std::string owner;
    at::Tensor ia3;  // an IA3 file's ia3_l (then a and b are undefined)
    // A LoHa or LoKr file's factors, or a VeRA file's vectors, under their names after the module's,
    // in the file's order.
    NamedTensors factors;
    at::Tensor indices;  // a SHiRA file's places of the values (<module>.shira_indices)
  };
  // A VeRA file's projections (base_model.vera_A, vera_B) or a RandLoRA file's bases (base_model.randlora_A,
  // randlora_B), where it saves them.
  at::Tensor projection_a, projection_b;
  std::map<std::string, Pair> modules;  // by module name
  // What trains whole beside the adapters (the modules to save's parameters and buffers, the biases
  // the bias setting trains), by their names in the model.
  std::map<std::string, at::Tensor> saved;
  // trainable_token_indices' rows, by module name ("<module>.token_adapter.trainable_tokens_delta").
  std::map<std::string, at::Tensor> tokens;
};

// `saved`: what trains whole beside the adapters (LoraConfig::trains_whole, the modules to save's
// buffers), by PEFT's names without "base_model.model.", written whole beside the adapters.
void save_lora_files(const std::string& dir, const LoraAdapters& adapters, const NamedTensors& saved);
// Fails (Io, naming the path) where save_lora_files would fail on what `dir` holds: a file in the
// folder's place, a folder (or another special file) in a file's. Changes nothing: a save of several
// adapters checks every folder before writing the first.
void require_lora_folder_writable(const std::string& dir);

// Reads and checks both files (configuration values PEFT allows but this library does not
// implement are refused by name; every tensor name must be PEFT's and come in A/B pairs of the
// module's rank, with DoRA's magnitude where use_dora says so, a trainable tokens' delta where
// trainable_token_indices is set, or be what modules_to_save and bias train).
LoraFiles read_lora_files(const std::string& dir);

}  // namespace acc
