#include "optim/optimizer_part.h"

#include "checkpoint/safetensors.h"
#include "checkpoint/state_files.h"
#include "common/error.h"
#include "common/files.h"
#include "optim/optimizer_state.h"

namespace acc {
namespace {

class OptimizerPart final : public CheckpointPart {
 public:
  OptimizerPart(size_t index, std::shared_ptr<Optimizer> optimizer) : index_(index), optimizer_(std::move(optimizer)) {}

  std::string file() const override { return indexed_name("optimizer", index_, ".safetensors"); }
  void save(const std::string& path) const override {
    auto snapshot = snapshot_optimizer(*optimizer_);
    save_safetensors(path, snapshot.tensors, snapshot.metadata);
  }
  StagedLoad load(const std::string& path) const override {
    SafetensorsContents contents = load_safetensors(path);  // its tensors hold the file
    OptimizerSnapshot snapshot{std::move(contents.tensors), std::move(contents.metadata)};
    return {prepare_optimizer_restore(*optimizer_, snapshot, "checkpoint file '" + path + "'"), {}, {}};
  }

 private:
  size_t index_;
  std::shared_ptr<Optimizer> optimizer_;
};

}  // namespace

std::unique_ptr<CheckpointPart> optimizer_part(size_t index, std::shared_ptr<Optimizer> optimizer) {
  return std::make_unique<OptimizerPart>(index, std::move(optimizer));
}

}  // namespace acc
