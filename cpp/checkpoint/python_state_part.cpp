#include "checkpoint/python_state_part.h"

#include "checkpoint/torch_pickle.h"

namespace acc {
namespace {

class PythonStatePart final : public CheckpointPart {
 public:
  PythonStatePart(std::string file, bool per_process, std::function<c10::IValue()> state,
                  std::function<StagedLoad(const TorchSavedFile&)> load)
      : file_(std::move(file)), per_process_(per_process), state_(std::move(state)), load_(std::move(load)) {}

  std::string file() const override { return file_; }
  bool per_process() const override { return per_process_; }
  void save(const std::string& path) const override { save_torch_pickle(path, state_()); }
  StagedLoad load(const std::string& path) const override { return load_(TorchSavedFile(path)); }

 private:
  std::string file_;
  bool per_process_;
  std::function<c10::IValue()> state_;
  std::function<StagedLoad(const TorchSavedFile&)> load_;
};

}  // namespace

std::unique_ptr<CheckpointPart> python_state_part(std::string file, bool per_process,
                                                  std::function<c10::IValue()> state,
                                                  std::function<StagedLoad(const TorchSavedFile&)> load) {
  return std::make_unique<PythonStatePart>(std::move(file), per_process, std::move(state), std::move(load));
}

}  // namespace acc
