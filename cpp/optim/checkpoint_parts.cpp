#include "optim/checkpoint_parts.h"

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
    SafetensorsContents contents = load_safetensors(path);  // its tensors keep the file mapped
    OptimizerSnapshot snapshot{std::move(contents.tensors), std::move(contents.metadata)};
    return {prepare_optimizer_restore(*optimizer_, snapshot, "checkpoint file '" + path + "'"), {}};
  }

 private:
  size_t index_;
  std::shared_ptr<Optimizer> optimizer_;
};

class SchedulerPart final : public CheckpointPart {
 public:
  SchedulerPart(size_t index, std::shared_ptr<Scheduler> scheduler) : index_(index), scheduler_(std::move(scheduler)) {}

  std::string file() const override { return indexed_name("scheduler", index_, ".json"); }
  void save(const std::string& path) const override {
    const SchedulerState state = scheduler_->state();
    write_file(path, nlohmann::json{{"step", state.step}, {"base_lrs", state.base_lrs}}.dump(2));
  }
  StagedLoad load(const std::string& path) const override {
    const nlohmann::json j = read_json(path);
    SchedulerState state{json_field_at_least<int64_t>(j, "step", path, 0),
                         json_field<std::vector<double>>(j, "base_lrs", path)};
    for (double lr : state.base_lrs)
      if (lr < 0) fail(Status::Io, "checkpoint file '", path, "': 'base_lrs' holds a negative learning rate ", lr);
    checked_by_file(path, [&] { scheduler_->check_state(state); });
    return {[scheduler = scheduler_, state] { scheduler->load_state(state); }, {}};
  }

 private:
  size_t index_;
  std::shared_ptr<Scheduler> scheduler_;
};

}  // namespace

std::unique_ptr<CheckpointPart> optimizer_part(size_t index, std::shared_ptr<Optimizer> optimizer) {
  return std::make_unique<OptimizerPart>(index, std::move(optimizer));
}

std::unique_ptr<CheckpointPart> scheduler_part(size_t index, std::shared_ptr<Scheduler> scheduler) {
  return std::make_unique<SchedulerPart>(index, std::move(scheduler));
}

}  // namespace acc
