// Accelerate's load_checkpoint_in_model for a model of ours: the weights of a Hugging Face
// safetensors layout (model/pretrained_layout.h: one file, or shards and their index) loaded into it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "model/model.h"

namespace acc {

// Loads `path` (a file, an index, or a folder holding either) into `model`, as Model::load_state_dict
// does (every check before anything changes; the names missing from and unexpected in the file).
// Refusals name `path`.
std::pair<std::vector<std::string>, std::vector<std::string>> load_checkpoint_in_model(Model& model,
                                                                                       const std::string& path,
                                                                                       bool strict);

}  // namespace acc
