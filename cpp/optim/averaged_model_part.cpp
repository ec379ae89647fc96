#include "optim/averaged_model_part.h"

#include "checkpoint/safetensors.h"
#include "checkpoint/state_files.h"

namespace acc {
namespace {

class AveragedModelPart final : public CheckpointPart {
 public:
  AveragedModelPart(size_t index, std::shared_ptr<AveragedModel> averaged)
      : index_(index), averaged_(std::move(averaged)) {}

  std::string file() const override { return "custom_checkpoint_" + std::to_string(index_) + ".safetensors"; }
  void save(const std::string& path) const override { save_safetensors(path, averaged_->state_dict()); }
  StagedLoad load(const std::string& path) const override {
    auto contents = std::make_shared<SafetensorsContents>(load_safetensors(path));
    checked_by_file(path, [&] { averaged_->check_state_dict(contents->tensors); });
    return {[averaged = averaged_, contents] { averaged->load_state_dict(contents->tensors); }, {}, {}};
  }

 private:
  size_t index_;
  std::shared_ptr<AveragedModel> averaged_;
};

}  // namespace

std::unique_ptr<CheckpointPart> averaged_model_part(size_t index, std::shared_ptr<AveragedModel> averaged) {
  return std::make_unique<AveragedModelPart>(index, std::move(averaged));
}

}  // namespace acc
