// The LoRA starts computed from a data loader's batches, as the C API calls them: EVA (PEFT's
// initialize_lora_eva_weights, model/peft/eva.h) and CorDA (model/peft/corda.h). Each refuses a loader in the
// middle of an epoch and leaves it between epochs, on failure too.
#pragma once

#include <cstddef>
#include <cstdint>

#include "accelerator/accelerator.h"
#include "data/dataloader.h"
#include "model/model.h"

namespace acc {

// Model::initialize_lora_eva over `loader`; with an accelerator of several processes and
// gather_distributed_inputs, each layer's inputs are gathered from every process.
size_t initialize_lora_eva(Model& model, DataLoader& loader, const EvaReading& reading, Accelerator* accelerator);
// Model::add_lora_corda over one epoch of `loader`, the forward taking each batch's first `inputs` fields.
size_t add_lora_corda(Model& model, LoraConfig config, DataLoader& loader, int64_t inputs);

}  // namespace acc
