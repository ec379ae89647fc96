#include "accelerator/registered_object_part.h"

#include "checkpoint/state_files.h"
#include "common/files.h"

namespace acc {
namespace {

class RegisteredObjectPart final : public CheckpointPart {
 public:
  RegisteredObjectPart(size_t index, std::function<std::string()> save, std::function<void(const std::string&)> load)
      : index_(index), save_(std::move(save)), load_(std::move(load)) {}

  std::string file() const override { return "custom_checkpoint_" + std::to_string(index_) + ".bin"; }
  void save(const std::string& path) const override { write_file(path, save_()); }
  StagedLoad load(const std::string& path) const override {
    auto bytes = std::make_shared<std::string>(read_file(path));
    auto before = std::make_shared<std::string>(save_());
    return {[load = load_, bytes, path] { checked_by_file(path, [&] { load(*bytes); }); },
            [load = load_, before] { load(*before); },
            {}};
  }

 private:
  size_t index_;
  std::function<std::string()> save_;
  std::function<void(const std::string&)> load_;
};

}  // namespace

std::unique_ptr<CheckpointPart> registered_object_part(size_t index, std::function<std::string()> save,
                                                       std::function<void(const std::string&)> load) {
  return std::make_unique<RegisteredObjectPart>(index, std::move(save), std::move(load));
}

}  // namespace acc
