#include "model/weights_part.h"

#include "checkpoint/safetensors.h"
#include "common/error.h"

namespace acc {
namespace {

class WeightsPart final : public CheckpointPart {
 public:
  WeightsPart(size_t file_index, size_t model_index, std::shared_ptr<Model> model)
      : file_index_(file_index), model_index_(model_index), model_(std::move(model)) {}

  std::string file() const override { return indexed_name("model", file_index_, ".safetensors"); }
  void save(const std::string& path) const override { save_safetensors(path, model_->state_dict()); }
  StagedLoad load(const std::string& path) const override {
    auto contents = std::make_shared<SafetensorsContents>(load_safetensors(path));
    try {
      model_->check_state_dict(contents->tensors, true);
    } catch (const Error& e) {
      fail(Status::InvalidArgument, "checkpoint file '", path, "' does not fit model ", model_index_, ": ", e.what());
    }
    return {[model = model_, contents] { model->load_state_dict(contents->tensors, true); }, {}, {}};
  }

 private:
  size_t file_index_, model_index_;
  std::shared_ptr<Model> model_;
};

}  // namespace

std::unique_ptr<CheckpointPart> weights_part(size_t file_index, size_t model_index, std::shared_ptr<Model> model) {
  return std::make_unique<WeightsPart>(file_index, model_index, std::move(model));
}

}  // namespace acc
