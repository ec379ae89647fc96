#include "checkpoint/rng_part.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

#include "checkpoint/safetensors.h"
#include "checkpoint/save_identity.h"
#include "common/random.h"
#include "common/error.h"

namespace acc {
namespace {

class RngStatesPart final : public CheckpointPart {
 public:
  RngStatesPart(int64_t rank, int64_t step) : rank_(rank), step_(step) {}

  std::string file() const override { return "random_states_" + std::to_string(rank_) + ".safetensors"; }
  bool per_process() const override { return true; }
  void save(const std::string& path) const override {
    NamedTensors states;
    for (auto& generator : default_generators()) states.emplace_back(generator.first, generator.second.get_state());
    save_safetensors(path, states, {{"step", std::to_string(step_)}, {"process_index", std::to_string(rank_)},
                                    {kSaveIdKey, save_id()}});
  }
  StagedLoad load(const std::string& path) const override {
    const SafetensorsContents contents = load_safetensors(path);
    const NamedTensors& saved = contents.tensors;
    auto index = contents.metadata.find("process_index");  // written since the check was added
    if (index != contents.metadata.end() && index->second != std::to_string(rank_))
      fail(Status::Io, "checkpoint file '", path, "' holds the random states of process ", index->second,
           ", not of process ", rank_, " (renamed or swapped?)");
    check_save_id(contents.metadata, save_id(), path);
    return restore_generator_states(saved, path);
  }

 private:
  int64_t rank_, step_;
};

}  // namespace

StagedLoad restore_generator_states(const NamedTensors& saved, const std::string& path) {
  std::vector<std::function<void()>> sets;
  for (auto& generator : default_generators()) {
    auto it = std::find_if(saved.begin(), saved.end(), [&](const auto& e) { return e.first == generator.first; });
    // A GPU the saving machine did not have (a CPU checkpoint resumed on a GPU, or more GPUs now)
    // keeps its generator, as Accelerate's set_rng_state_all sets only the states it has.
    if (it == saved.end() && generator.first != "cpu") continue;
    if (it == saved.end())
      fail(Status::InvalidArgument, "checkpoint file '", path, "' has no state for the ", generator.first,
           " generator");
    if (it->second.scalar_type() != at::kByte || it->second.numel() != generator.second.get_state().numel())
      fail(Status::InvalidArgument, "checkpoint file '", path, "': the ", generator.first,
           " generator state has the wrong size or type");
    const at::Tensor state = it->second.clone();
    {
      // Tried on the generator itself and undone at once, so that a state torch refuses is refused
      // before anything changes. (Not on a clone: libtorch 1.13's Generator::clone never frees the copy.)
      at::Generator gen = generator.second;
      std::lock_guard<std::mutex> lock(gen.mutex());
      const at::Tensor current = gen.get_state();
      try {
        gen.set_state(state);
      } catch (const c10::Error& e) {
        fail(Status::Io, "checkpoint file '", path, "': the ", generator.first,
             " generator state is not one torch accepts (", e.what_without_backtrace(), ")");
      }
      gen.set_state(current);
    }
    sets.push_back([gen = generator.second, state]() mutable { gen.set_state(state); });
  }
  return {[sets] {
            for (const auto& set : sets) set();
          },
          {},
          {}};
}

std::unique_ptr<CheckpointPart> rng_states_part(int64_t rank, int64_t step) {
  return std::make_unique<RngStatesPart>(rank, step);
}

}  // namespace acc
