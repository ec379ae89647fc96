#include "checkpoint/checkpoint_models.h"

#include "common/error.h"

namespace acc {

const CheckpointModels::Entry& CheckpointModels::at(size_t i) const {
  require(i < entries_.size(), "model ", i, " does not exist: ", entries_.size(), " models are left to the checkpoint");
  return entries_[i];
}

void CheckpointModels::remove(size_t i) {
  const Entry& entry = at(i);
  if (!entry.kept_because.empty())
    fail(Status::Unsupported, "model ", entry.index,
         "'s weights are saved and loaded by the library: ", entry.kept_because);
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
}

std::vector<size_t> CheckpointModels::indices() const {
  std::vector<size_t> indices;
  for (const Entry& entry : entries_) indices.push_back(entry.index);
  return indices;
}

}  // namespace acc
