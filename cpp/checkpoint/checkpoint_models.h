// The models a save_state or load_state pre-hook is handed: Accelerate's hook(models, weights, dir)
// and hook(models, dir). A hook that saves or loads a model's weights its own way (PEFT's adapters,
// save_pretrained) removes the model (Accelerate's weights.pop(i) / models.pop(i)); the checkpoint's
// weight files then number the models left: model.safetensors for the first, model_1.safetensors
// for the second, ..., as Accelerate numbers what its hooks leave.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace acc {

class Model;  // held, never used here: the checkpoint layer does not depend on the model layer

class CheckpointModels {
 public:
  struct Entry {
    size_t index;                  // in prepare order
    std::shared_ptr<Model> model;  // the prepared model
    // Non-empty: why the library must save this model's weights itself (a hook cannot remove it).
    std::string kept_because;
  };
  CheckpointModels() = default;
  explicit CheckpointModels(std::vector<Entry> entries) : entries_(std::move(entries)) {}

  size_t size() const { return entries_.size(); }
  // The i-th model left; an i past the end is an error naming the count.
  const Entry& at(size_t i) const;
  // Removes the i-th model left (the later ones move up, as a Python list's pop(i)).
  void remove(size_t i);
  // The prepare-order indices of the models left.
  std::vector<size_t> indices() const;

 private:
  std::vector<Entry> entries_;
};

}  // namespace acc
