#include "model/weights_part.h"

#include <ATen/core/grad_mode.h>

#include <map>
#include <utility>
#include <vector>

#include "checkpoint/safetensors.h"
#include "checkpoint/torch_load.h"
#include "common/error.h"

namespace acc {
namespace {

// The metadata key naming the adapter whose tensors a checkpoint's weights hold (a model's adapters
// are the active one's: named adapters keep their usual names there).
constexpr const char* kActiveAdapterKey = "accelerate_active_adapter";

// Weights read from `path`, checked against the model (names, shapes, dtypes) before anything changes;
// the original values of its modules to save (Model::kept_original_modules) where the file holds them
// (a checkpoint of an earlier version may not: the model's are kept then).
StagedLoad staged_weights_load(const std::shared_ptr<Model>& model, size_t model_index,
                               std::shared_ptr<const NamedTensors> tensors, const std::string& path,
                               const Metadata& metadata = {}) {
  require_same_adapter(*model, model_index, metadata, path);
  const NamedTensors originals = model->kept_original_modules();
  const std::map<std::string, at::Tensor> kept(originals.begin(), originals.end());
  auto weights = std::make_shared<NamedTensors>();
  auto restored = std::make_shared<std::vector<std::pair<at::Tensor, at::Tensor>>>();  // (kept, saved)
  for (const auto& [name, value] : *tensors) {
    const auto it = kept.find(name);
    if (it == kept.end()) {
      weights->emplace_back(name, value);
      continue;
    }
    if (value.sizes() != it->second.sizes())
      fail(Status::InvalidArgument, "checkpoint file '", path, "' does not fit model ", model_index, ": '", name,
           "' has shape ", value.sizes(), ", the model's ", it->second.sizes());
    restored->emplace_back(it->second, value);
  }
  try {
    model->check_state_dict(*weights, true);
  } catch (const Error& e) {
    fail(Status::InvalidArgument, "checkpoint file '", path, "' does not fit model ", model_index, ": ", e.what());
  }
  return {[model, tensors, weights, restored] {
            model->load_state_dict(*weights, true);
            at::NoGradGuard no_grad;
            for (auto& [kept_value, saved] : *restored) kept_value.copy_(saved);
          },
          {},
          {}};
}

// The model's weights and, where it keeps them, its modules to save as they were.
NamedTensors saved_weights(const Model& model) {
  NamedTensors out = model.state_dict();
  for (const auto& [name, kept] : model.kept_original_modules()) out.emplace_back(name, kept.detach());
  return out;
}

class WeightsPart final : public CheckpointPart {
 public:
  WeightsPart(size_t file_index, size_t model_index, std::shared_ptr<Model> model)
      : file_index_(file_index), model_index_(model_index), model_(std::move(model)) {}

  std::string file() const override { return indexed_name("model", file_index_, ".safetensors"); }
  void save(const std::string& path) const override {
    save_safetensors(path, saved_weights(*model_), weights_metadata(*model_));
  }
  StagedLoad load(const std::string& path) const override {
    auto contents = std::make_shared<SafetensorsContents>(load_safetensors(path));  // its tensors map the file
    return staged_weights_load(model_, model_index_, std::shared_ptr<const NamedTensors>(contents, &contents->tensors),
                               path, contents->metadata);
  }

 private:
  size_t file_index_, model_index_;
  std::shared_ptr<Model> model_;
};

// Python Accelerate's weights saved with safe_serialization=False: torch.save of the state dict.
class PickledWeightsPart final : public CheckpointPart {
 public:
  PickledWeightsPart(size_t file_index, size_t model_index, std::shared_ptr<Model> model)
      : file_index_(file_index), model_index_(model_index), model_(std::move(model)) {}

  std::string file() const override { return indexed_name("pytorch_model", file_index_, ".bin"); }
  void save(const std::string& path) const override {
    fail(Status::Internal, "'", path, "' is read from Python Accelerate's checkpoints, never written");
  }
  StagedLoad load(const std::string& path) const override {
    const TorchSavedFile file(path);
    const PickleNode& root = file.root();
    if (root.kind != PickleNode::Kind::Dict) file.refuse("the state dict", "a dict", root);
    auto tensors = std::make_shared<NamedTensors>();
    for (size_t i = 0; i + 1 < root.items.size(); i += 2) {
      const std::string& name = file.text(*root.items[i], "the state dict (a key)");
      tensors->emplace_back(name, file.tensor(*root.items[i + 1], name));
    }
    return staged_weights_load(model_, model_index_, tensors, path);
  }

 private:
  size_t file_index_, model_index_;
  std::shared_ptr<Model> model_;
};

}  // namespace

Metadata weights_metadata(const Model& model) {
  Metadata metadata{{"format", "pt"}};
  if (!model.lora().empty()) metadata[kActiveAdapterKey] = model.active_adapter();
  return metadata;
}

void require_same_adapter(const Model& model, size_t model_index, const Metadata& metadata, const std::string& path) {
  const auto saved_adapter = metadata.find(kActiveAdapterKey);
  if (saved_adapter != metadata.end() && !model.lora().empty() && saved_adapter->second != model.active_adapter())
    fail(Status::InvalidArgument, "checkpoint file '", path, "' holds the adapter '", saved_adapter->second,
         "' of model ", model_index, ", whose active adapter is '", model.active_adapter(),
         "': loading would write one adapter's values into another; make '", saved_adapter->second,
         "' active (acc_model_set_adapter) before preparing the model");
}

std::unique_ptr<CheckpointPart> weights_part(size_t file_index, size_t model_index, std::shared_ptr<Model> model) {
  return std::make_unique<WeightsPart>(file_index, model_index, std::move(model));
}

std::unique_ptr<CheckpointPart> pickled_weights_part(size_t file_index, size_t model_index,
                                                     std::shared_ptr<Model> model) {
  return std::make_unique<PickledWeightsPart>(file_index, model_index, std::move(model));
}

}  // namespace acc
