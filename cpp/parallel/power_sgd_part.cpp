#include "parallel/power_sgd_part.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <set>
#include <sstream>
#include <string>

#include "checkpoint/safetensors.h"
#include "checkpoint/save_identity.h"
#include "common/crc32c.h"
#include "common/error.h"

namespace acc {
namespace {

// Tensors: model_<i>.<error|p|q>.<bucket index>. Metadata: model_<i>.iter, model_<i>.rng, and
// model_<i>.settings, what the memories' shapes depend on (another hook, rank or wire dtype on
// resume starts PowerSGD afresh, as Accelerate always does).
const char* const kMemories[] = {"error", "p", "q"};

std::map<int64_t, at::Tensor>& memory(PowerSgdState& state, const std::string& kind) {
  return kind == "error" ? state.error : kind == "p" ? state.p_memory : state.q_memory;
}

std::string settings_text(const PowerSgdState& state) {
  const PowerSgdSettings& s = state.settings;
  std::ostringstream out;
  out << state.hook << " wire=" << state.wire << " rank=" << s.matrix_approximation_rank
      << " min_compression_rate=" << s.min_compression_rate << " error_feedback=" << s.use_error_feedback
      << " warm_start=" << s.warm_start << " batch_same_shapes=" << s.batch_tensors_with_same_shape;
  return out.str();
}

// Each memory's buckets and shapes: " p 0 [4, 2] ...".
std::string memory_shapes(PowerSgdState& state) {
  std::string out;
  for (const char* kind : kMemories)
    for (const auto& [bucket, tensor] : memory(state, kind)) out += concat(" ", kind, " ", bucket, " ", tensor.sizes());
  return out;
}

// A bucket index as written: decimal digits, no sign, no leading zero.
int64_t bucket_index(const std::string& text) {
  if (text.empty() || text.size() > 18 || (text.size() > 1 && text[0] == '0') ||
      text.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoll(text);
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
      metadata[prefix + "settings"] = settings_text(*state);
    }
    save_safetensors(path, tensors, metadata);
  }

  StagedLoad load(const std::string& path) const override {
    std::error_code error;
    if (!std::filesystem::exists(path, error)) {
      // Saved without PowerSGD (load_state has refused a file the manifest records but that is
      // gone): its state starts afresh, as in a new job.
      return {[states = states_] {
                for (const auto& entry : states) entry.second->reset();
              },
              {},
              {}};
    }
    const SafetensorsContents contents = load_safetensors(path);
    auto index = contents.metadata.find("process_index");
    if (index == contents.metadata.end() || index->second != std::to_string(rank_))
      fail(Status::Io, "checkpoint file '", path, "' holds the PowerSGD state of process ",
           index == contents.metadata.end() ? "(none named)" : index->second, ", not of process ", rank_);
    check_save_id(contents.metadata, save_id(), path);
    std::set<std::string> known{"process_index", kSaveIdKey, "format"};
    std::set<std::string> claimed;
    std::vector<std::function<void()>> sets;
    std::string shared;
    for (const auto& [model, live] : states_) {
      const std::string prefix = "model_" + std::to_string(model) + ".";
      for (const char* key : {"iter", "rng", "settings"}) known.insert(prefix + key);
      auto iter = contents.metadata.find(prefix + "iter");
      auto rng = contents.metadata.find(prefix + "rng");
      auto settings = contents.metadata.find(prefix + "settings");
      if (iter == contents.metadata.end() || rng == contents.metadata.end() || settings == contents.metadata.end())
        fail(Status::Io, "checkpoint file '", path, "' has no PowerSGD state for model ", model);
      auto restored = std::make_shared<PowerSgdState>(live->settings, live->device, live->hook, live->wire);
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
        const int64_t bucket = dot == std::string::npos ? -1 : bucket_index(rest.substr(dot + 1));
        if ((kind != "error" && kind != "p" && kind != "q") || bucket < 0 ||
            !at::isFloatingType(tensor.scalar_type()) || tensor.dim() < 1 || tensor.dim() > 2)
          fail(Status::Io, "checkpoint file '", path, "': '", name, "' is not a PowerSGD error, P or Q memory");
        // Moved where the gradients are now, so that applying cannot fail.
        memory(*restored, kind)[bucket] = tensor.to(live->device, /*non_blocking=*/false, /*copy=*/true);
        claimed.insert(name);
      }
      for (const auto& [bucket, p] : restored->p_memory)
        if (!restored->q_memory.count(bucket))
          fail(Status::Io, "checkpoint file '", path, "': model ", model, "'s PowerSGD P of bucket ", bucket,
               " has no Q");
      if (restored->p_memory.size() != restored->q_memory.size())
        fail(Status::Io, "checkpoint file '", path, "': model ", model, "'s PowerSGD Q memories have no P");
      if (settings->second != settings_text(*live)) {
        // Another hook, rank or wire dtype: the memories do not fit; PowerSGD starts afresh.
        if (rank_ == 0)
          std::fprintf(stderr, "accelerate: %s: model %zu's PowerSGD state was saved with other settings (%s; now %s): "
                       "PowerSGD starts afresh\n", path.c_str(), model, settings->second.c_str(),
                       settings_text(*live).c_str());
        sets.push_back([live = live] { live->reset(); });
        shared += concat("PowerSGD state of model ", model, ": started afresh\n");
        continue;
      }
      // The iteration (plain allreduce or compression), the random stream (Q's warm start) and the
      // memories' shapes decide the collectives every process runs: they must agree.
      shared += concat("PowerSGD state of model ", model, ": iteration ", restored->iter, ", random state CRC ",
                       crc32c(rng->second.data(), rng->second.size()), ",", memory_shapes(*restored), "\n");
      sets.push_back([live = live, restored] {
        live->iter = restored->iter;
        live->rng = restored->rng;
        live->error = std::move(restored->error);
        live->p_memory = std::move(restored->p_memory);
        live->q_memory = std::move(restored->q_memory);
      });
    }
    for (const auto& [name, tensor] : contents.tensors)
      if (!claimed.count(name))
        fail(Status::Io, "checkpoint file '", path, "': '", name, "' is no PowerSGD state of a model this job ",
             "trains with it");
    for (const auto& [key, value] : contents.metadata)
      if (!known.count(key))
        fail(Status::Io, "checkpoint file '", path, "': '", key, "' is no PowerSGD state of a model this job trains ",
             "with it");
    return {[sets] {
              for (const auto& set : sets) set();
            },
            {},
            shared};
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
