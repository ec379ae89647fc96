#include "model/weights_part.h"

#include <set>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "checkpoint/torch_load.h"
#include "common/error.h"

namespace acc {
namespace {

// The metadata key naming the adapter whose tensors a checkpoint's weights hold (a model's adapters
// are the active one's: named adapters keep their usual names there).
constexpr const char* kActiveAdapterKey = "accelerate_active_adapter";

// Weights read from `path`, checked against the model (names, shapes, dtypes) before anything changes.
// The original values of its modules to save (Model::kept_original_modules) come all or none: a
// checkpoint saved under zero_stage 3 (which keeps none) or by an earlier version holds none, and the
// model then takes their values as unknown, rather than keep values the checkpoint's run never had.
StagedLoad staged_weights_load(const std::shared_ptr<Model>& model, size_t model_index,
                               std::shared_ptr<const NamedTensors> tensors, const std::string& path,
                               const Metadata& metadata = {}) {
  require_same_adapter(*model, model_index, metadata, path);
  try {
    model->check_state_dict(*tensors, true);
  } catch (const Error& e) {
    fail(Status::InvalidArgument, "checkpoint file '", path, "' does not fit model ", model_index, ": ", e.what());
  }
  std::set<std::string> given;
  for (const auto& entry : *tensors) given.insert(entry.first);
  const NamedTensors originals = model->kept_original_modules();
  std::vector<std::string> absent;
  for (const auto& entry : originals)
    if (!given.count(entry.first)) absent.push_back(entry.first);
  if (!absent.empty() && absent.size() < originals.size())
    fail(Status::InvalidArgument, "checkpoint file '", path, "' does not fit model ", model_index,
         ": it holds some of the original values of the modules to save, but not '", absent.front(), "'");
  const bool none = !originals.empty() && absent.size() == originals.size();
  return {[model, tensors, none, path] {
            model->load_state_dict(*tensors, true);
            if (none)
              model->kept_originals_unknown("the checkpoint '" + path +
                                            "' held none of their original values (saved "
                                            "under zero_stage 3, or by an earlier version)");
          },
          {},
          {}};
}

// The model's weights and, where it keeps them, its modules to save as they were.
NamedTensors saved_weights(const Model& model) {
  NamedTensors out = model.state_dict();
  for (const auto& [name, kept] : model.kept_original_modules()) out.emplace_back(name, kept.detach());
  return without_aliases(out);
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
    auto contents = std::make_shared<SafetensorsContents>(load_safetensors(path));  // its tensors hold the file
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
    return staged_weights_load(model_, model_index_, std::make_shared<NamedTensors>(read_torch_saved_state_dict(path)),
                               path);
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
