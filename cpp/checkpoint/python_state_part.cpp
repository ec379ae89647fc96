#include "checkpoint/python_state_part.h"

#include "checkpoint/torch_pickle.h"
#include "common/error.h"

namespace acc {
namespace {

class PythonStatePart final : public CheckpointPart {
 public:
  PythonStatePart(std::string file, bool per_process, std::function<c10::IValue()> state)
      : file_(std::move(file)), per_process_(per_process), state_(std::move(state)) {}

  std::string file() const override { return file_; }
  bool per_process() const override { return per_process_; }
  void save(const std::string& path) const override { save_torch_pickle(path, state_()); }
  StagedLoad load(const std::string& path) const override {
    fail(Status::Internal, "'", path, "' is written for Python Accelerate only; load_state reads the library's files");
  }

 private:
  std::string file_;
  bool per_process_;
  std::function<c10::IValue()> state_;
};

}  // namespace

std::unique_ptr<CheckpointPart> python_state_part(std::string file, bool per_process,
                                                  std::function<c10::IValue()> state) {
  return std::make_unique<PythonStatePart>(std::move(file), per_process, std::move(state));
}

}  // namespace acc
