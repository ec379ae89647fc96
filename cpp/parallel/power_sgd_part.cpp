#include "parallel/power_sgd_part.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <functional>
#include <string>

#include "checkpoint/safetensors.h"
#include "checkpoint/save_identity.h"
#include "common/error.h"

namespace acc {
namespace {

// Tensor names: model_<i>.<error|p|q>.<bucket index>; metadata: model_<i>.iter and model_<i>.rng.
const char* const kMemories[] = {"error", "p", "q"};

std::map<int64_t, at::Tensor>& memory(PowerSgdState& state, const std::string& kind) {
  return kind == "error" ? state.error : kind == "p" ? state.p_memory : state.q_memory;
}

class PowerSgdStatesPart final : public CheckpointPart {
 public:
  PowerSgdStatesPart(int64_t rank, std::vector<std::pair<size_t, std::shared_ptr<PowerSgdState>>> states)
      : rank_(rank), states_(std::move(states)) {}

  std::string file() const override { return "ddp_comm_hook_" + std::to_string(rank_) + ".safetensors"; }
  bool per_process() const override { return true; }

  void save(const std::string& path) const override {
    NamedTensors tensors;
    Metadata metadata{{"process_index", std::to_string(rank_)}, {kSaveIdKey, save_id()}};
    for (const auto& [model, state] : states_) {
      const std::string prefix = "model_" + std::to_string(model) + ".";
      for (const char* kind : kMemories)
        for (const auto& [bucket, tensor] : memory(*state, kind))
          tensors.emplace_back(prefix + kind + "." + std::to_string(bucket), tensor.detach().cpu().contiguous());
      metadata[prefix + "iter"] = std::to_string(state->iter);
      metadata[prefix + "rng"] = state->rng.state_text();
    }
    save_safetensors(path, tensors, metadata);
  }

  StagedLoad load(const std::string& path) const override {
    if (!std::filesystem::exists(path)) {
      // Saved without PowerSGD: its state starts afresh, as in a new job.
      return {[states = states_] {
                for (const auto& entry : states) entry.second->reset();
              },
              {}};
    }
    const SafetensorsContents contents = load_safetensors(path);
    auto index = contents.metadata.find("process_index");
    if (index == contents.metadata.end() || index->second != std::to_string(rank_))
      fail(Status::Io, "checkpoint file '", path, "' holds the PowerSGD state of process ",
           index == contents.metadata.end() ? "(none named)" : index->second, ", not of process ", rank_);
    check_save_id(contents.metadata, save_id(), path);
    std::vector<std::function<void()>> sets;
    size_t claimed = 0;
    for (const auto& [model, live] : states_) {
      const std::string prefix = "model_" + std::to_string(model) + ".";
      auto iter = contents.metadata.find(prefix + "iter");
      auto rng = contents.metadata.find(prefix + "rng");
      if (iter == contents.metadata.end() || rng == contents.metadata.end())
        fail(Status::Io, "checkpoint file '", path, "' has no PowerSGD state for model ", model,
             " (saved with another comm hook?)");
      auto restored = std::make_shared<PowerSgdState>(live->settings, live->device);
      try {
        size_t used = 0;
        restored->iter = std::stoll(iter->second, &used);
        if (used != iter->second.size() || restored->iter < 0) throw std::invalid_argument("iter");
        restored->rng.set_state_text(rng->second);
      } catch (const std::exception&) {
        fail(Status::Io, "checkpoint file '", path, "': model ", model, "'s PowerSGD iteration or random state is ",
             "not valid");
      }
      for (const auto& [name, tensor] : contents.tensors) {
        if (name.rfind(prefix, 0) != 0) continue;
        const std::string rest = name.substr(prefix.size());
        const auto dot = rest.find('.');
        const std::string kind = rest.substr(0, dot);
        int64_t bucket = -1;
        try {
          size_t used = 0;
          bucket = std::stoll(rest.substr(dot + 1), &used);
          if (used != rest.size() - dot - 1) bucket = -1;
        } catch (const std::exception&) {
        }
        if (dot == std::string::npos || (kind != "error" && kind != "p" && kind != "q") || bucket < 0 ||
            !at::isFloatingType(tensor.scalar_type()) || tensor.dim() < 1 || tensor.dim() > 2)
          fail(Status::Io, "checkpoint file '", path, "': '", name, "' is not a PowerSGD error, P or Q memory");
        memory(*restored, kind)[bucket] = tensor.clone();
        ++claimed;
      }
      sets.push_back([live = live, restored] {
        live->reset();
        live->iter = restored->iter;
        live->rng = restored->rng;
        for (const char* kind : kMemories)
          for (const auto& [bucket, tensor] : memory(*restored, kind))
            memory(*live, kind)[bucket] = tensor.to(live->device);
      });
    }
    if (claimed != contents.tensors.size())
      fail(Status::Io, "checkpoint file '", path, "' holds PowerSGD state of models this job does not train with it");
    return {[sets] {
              for (const auto& set : sets) set();
            },
            {}};
  }

 private:
  int64_t rank_;
  std::vector<std::pair<size_t, std::shared_ptr<PowerSgdState>>> states_;
};

}  // namespace

std::unique_ptr<CheckpointPart> power_sgd_states_part(
    int64_t rank, std::vector<std::pair<size_t, std::shared_ptr<PowerSgdState>>> states) {
  return std::make_unique<PowerSgdStatesPart>(rank, std::move(states));
}

}  // namespace acc
