#include "model/pretrained_weights.h"

#include "checkpoint/pretrained_layout.h"
#include "common/error.h"

namespace acc {

std::pair<std::vector<std::string>, std::vector<std::string>> load_checkpoint_in_model(Model& model,
                                                                                       const std::string& path,
                                                                                       bool strict) {
  model.require_whole_parameters("acc_model_load_safetensors");
  const NamedTensors state = load_sharded(path);
  try {
    return model.load_state_dict(state, strict);
  } catch (const Error& e) {
    fail(e.status(), "'", path, "' does not fit the model: ", e.what());
  }
}

}  // namespace acc
