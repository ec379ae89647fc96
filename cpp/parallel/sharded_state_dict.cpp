// ShardedDataParallel's state dicts: the full weights gathered unit by unit, loading full weights
// into the shards, and a process's own shard (SHARDED_STATE_DICT).
#include <c10/util/accumulate.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <unordered_map>

#include "common/error.h"
#include "parallel/sharded_data_parallel.h"

namespace acc {

const ShardedDataParallel::FlatSet* ShardedDataParallel::flat_set_of(const std::string& name) const {
  if (trainable_.index.count(name)) return &trainable_;
  if (frozen_.index.count(name)) return &frozen_;
  return nullptr;
}

NamedTensors ShardedDataParallel::full_state_dict(const std::string& call) {
  if (options_.stage != 3) return model_->state_dict();
  std::unordered_map<std::string, at::Tensor> full;
  const std::string name = call + " (full state dict)";
  for (FlatSet* set : {&trainable_, &frozen_}) {
    for (size_t u = 0; u < set->units(); ++u) {
      const bool was_gathered = set->gathered[u];
      if (!was_gathered) gather(*set, u, name.c_str());
      for (size_t i : set->layout->units()[u].params) full[set->names[i]] = set->params[i].detach().clone();
      if (!was_gathered) release(*set, u);
    }
  }
  NamedTensors out;
  for (auto& entry : model_->state_dict()) {
    auto it = full.find(entry.first);
    out.emplace_back(entry.first, it != full.end() ? it->second : entry.second);
  }
  return out;
}

void ShardedDataParallel::check_full_state_dict(const NamedTensors& state) const {
  if (options_.stage != 3) {
    model_->check_state_dict(state, true);
    return;
  }
  // The sharded parameters are empty at rest: their shapes are checked against the ones kept.
  std::unordered_map<std::string, at::Tensor> by_name(state.begin(), state.end());
  NamedTensors rest;
  for (const auto& entry : state) {
    const FlatSet* set = flat_set_of(entry.first);
    if (!set) {
      rest.push_back(entry);
      continue;
    }
    const size_t index = set->index.at(entry.first);
    const auto& shape = set->shapes[index];
    require(entry.second.sizes() == c10::IntArrayRef(shape), "'", entry.first, "' has shape ", entry.second.sizes(),
            ", the model's is ", c10::IntArrayRef(shape));
    require_same_dtype_kind(entry.first, entry.second, set->params[index]);  // empty at rest, its dtype kept
  }
  for (const FlatSet* set : {&trainable_, &frozen_})
    for (const auto& name : set->names) require(by_name.count(name), "the state lacks '", name, "'");
  // Strict over the rest: every buffer, nothing unknown.
  const NamedTensors live = replicated_state_dict();
  std::unordered_map<std::string, bool> known;
  for (const auto& entry : live) known[entry.first] = true;
  for (const auto& entry : rest) require(known.count(entry.first), "the model has no '", entry.first, "'");
  model_->check_state_dict(rest, false);
  // A buffer several modules share is given under one of its names (saved once, as save_state does:
  // without_aliases).
  for (const auto& entry : live)
    require(by_name.count(entry.first) || std::any_of(live.begin(), live.end(),
                                                      [&](const auto& other) {
                                                        return by_name.count(other.first) &&
                                                               are_aliases(other.second, entry.second);
                                                      }),
            "the state lacks '", entry.first, "'");
}

void ShardedDataParallel::load_full_state_dict(const NamedTensors& state) {
  check_full_state_dict(state);
  if (options_.stage != 3) {
    model_->load_state_dict(state, true);
    return;
  }
  std::unordered_map<std::string, at::Tensor> by_name(state.begin(), state.end());
  NamedTensors rest;
  for (const auto& entry : state)
    if (!flat_set_of(entry.first)) rest.push_back(entry);
  model_->load_state_dict(rest, false);
  at::NoGradGuard no_grad;
  for (FlatSet* set : {&trainable_, &frozen_}) {
    for (size_t u = 0; u < set->shards.size(); ++u) {
      const FlatUnit& unit = set->layout->units()[u];
      at::Tensor full = at::zeros({unit.padded()}, set->shards[u].options());
      for (size_t k = 0; k < unit.params.size(); ++k) {
        const at::Tensor& value = by_name.at(set->names[unit.params[k]]);
        full.narrow(0, unit.offsets[k], value.numel()).copy_(value.reshape({-1}));
      }
      set->shards[u].copy_(full.narrow(0, unit.my_begin(shard_rank_), unit.slice));
    }
  }
}

std::string ShardedDataParallel::shard_layout_json() const {
  nlohmann::json units = nlohmann::json::array();
  for (const FlatSet* set : {&trainable_, &frozen_}) {
    for (size_t u = 0; u < set->units(); ++u) {
      const FlatUnit& unit = set->layout->units()[u];
      nlohmann::json params = nlohmann::json::array();
      for (size_t k = 0; k < unit.params.size(); ++k)
        params.push_back({set->names[unit.params[k]], set->shapes[unit.params[k]], unit.offsets[k]});
      units.push_back({{"slice", unit.slice}, {"params", params}});
    }
  }
  nlohmann::json order = nlohmann::json::array();
  for (const auto& entry : model_->state_dict()) order.push_back(entry.first);
  return nlohmann::json{{"units", units}, {"order", order}}.dump();
}

NamedTensors ShardedDataParallel::replicated_state_dict() const {
  NamedTensors out;
  for (const auto& entry : model_->state_dict())
    if (!flat_set_of(entry.first)) out.push_back(entry);
  return out;
}

NamedTensors ShardedDataParallel::shard_state_dict() const {
  NamedTensors out;
  size_t u = 0;
  for (const FlatSet* set : {&trainable_, &frozen_})
    for (const auto& shard : set->shards) out.emplace_back("unit." + std::to_string(u++), shard);
  for (auto& entry : replicated_state_dict()) out.push_back(std::move(entry));
  return out;
}

void ShardedDataParallel::check_shard_state(const NamedTensors& state) const {
  std::unordered_map<std::string, at::Tensor> by_name(state.begin(), state.end());
  size_t u = 0;
  for (const FlatSet* set : {&trainable_, &frozen_}) {
    for (const auto& shard : set->shards) {
      const std::string key = "unit." + std::to_string(u++);
      auto it = by_name.find(key);
      require(it != by_name.end(), "the shard lacks '", key, "'");
      require(it->second.dim() == 1 && it->second.numel() == shard.numel() &&
                  it->second.scalar_type() == shard.scalar_type(),
              "'", key, "' is not this process's slice of ", set->what, " ", u - 1, " (", shard.numel(), " elements of ",
              shard.scalar_type(), ")");
      by_name.erase(it);
    }
  }
  NamedTensors rest(by_name.begin(), by_name.end());
  model_->check_state_dict(rest, false);
  const NamedTensors replicated = replicated_state_dict();
  for (const auto& entry : replicated) require(by_name.count(entry.first), "the shard lacks '", entry.first, "'");
  require(rest.size() == replicated.size(), "the shard holds tensors the model does not have");
}

void ShardedDataParallel::load_shard_state(const NamedTensors& state) {
  check_shard_state(state);
  at::NoGradGuard no_grad;
  NamedTensors rest;
  for (const auto& entry : state) {
    if (entry.first.rfind("unit.", 0) == 0) shard_of(std::stoul(entry.first.substr(5))).copy_(entry.second);
    else rest.push_back(entry);
  }
  model_->load_state_dict(rest, false);
}

}  // namespace acc
