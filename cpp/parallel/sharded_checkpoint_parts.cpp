#include "parallel/sharded_checkpoint_parts.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>

#include "checkpoint/data_checksum.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/save_identity.h"
#include "checkpoint/state_files.h"
#include "common/error.h"
#include "common/json_input.h"
#include "model/weights_part.h"
#include "ops/collectives.h"
#include "optim/optimizer_state.h"

namespace acc {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const char* const kShardMark = "_shard_";

}  // namespace


namespace {

// The parameters (name and shape) of a layout (shard_layout_json's), in any unit.
std::map<std::string, json> layout_parameters(const json& layout) {
  std::map<std::string, json> shapes;
  if (!layout.is_object() || !layout.contains("units") || !layout["units"].is_array()) return shapes;
  for (const auto& unit : layout["units"]) {
    if (!unit.is_object() || !unit.contains("params") || !unit["params"].is_array()) continue;
    for (const auto& param : unit["params"])
      if (param.is_array() && param.size() == 3 && param[0].is_string()) shapes[param[0].get<std::string>()] = param[1];
  }
  return shapes;
}

// Every name of the model's state (sharded or kept whole) that a layout lists.
std::set<std::string> layout_state_names(const json& layout) {
  std::set<std::string> names;
  if (!layout.is_object() || !layout.contains("order") || !layout["order"].is_array()) return names;
  for (const auto& name : layout["order"])
    if (name.is_string()) names.insert(name.get<std::string>());
  return names;
}

// Where a shard's layout names other parameters than the model's, or other shapes: the first such
// parameter ("'0.lora_A.weight' has shape [2,8] in the file, [3,8] in the model"), or "" when the
// parameters are the same and only their units differ (a parameter sharded in one and kept whole
// in the other, as ignored_modules keeps it, included).
std::string parameter_difference(const std::string& saved, const std::string& live) {
  const json saved_layout = json::parse(saved, nullptr, false), live_layout = json::parse(live, nullptr, false);
  const auto in_file = layout_parameters(saved_layout), in_model = layout_parameters(live_layout);
  const auto file_state = layout_state_names(saved_layout), model_state = layout_state_names(live_layout);
  for (const auto& [name, shape] : in_model) {
    const auto it = in_file.find(name);
    if (it == in_file.end()) {
      if (file_state.count(name)) continue;
      return "the model's '" + name + "' is not in it";
    }
    if (it->second != shape)
      return "'" + name + "' has shape " + it->second.dump() + " in the file, " + shape.dump() + " in the model";
  }
  for (const auto& [name, shape] : in_file)
    if (!in_model.count(name) && !model_state.count(name))
      return "it holds '" + name + "', which the model does not have";
  return "";
}

// Refuses a shard written by a different number of processes, another sharding or another process,
// or whose data is not what was written.
void check_shard_metadata(const Metadata& metadata, const NamedTensors& tensors, const ShardedDataParallel& engine,
                          const std::string& save_id, const std::string& path) {
  auto value = [&](const char* key) -> std::string {
    auto it = metadata.find(key);
    if (it == metadata.end()) fail(Status::Io, "checkpoint file '", path, "': not a shard (no '", key, "' in its metadata)");
    return it->second;
  };
  const std::string world = std::to_string(engine.layout().world()), stage = std::to_string(engine.options().stage);
  if (value("num_processes") != world || value("zero_stage") != stage)
    fail(Status::InvalidArgument, "checkpoint file '", path, "' is a shard of ", value("num_processes"),
         " processes under zero_stage ", value("zero_stage"), "; this job shards among ", world,
         " (its group of processes: all, or hybrid_shard's / dp_shard_size's) under zero_stage ", stage,
         " (SHARDED_STATE_DICT loads only on the same sharding; save with FULL_STATE_DICT to change it)");
  const std::string rank = std::to_string(engine.layout().rank());
  if (value("process_index") != rank)
    fail(Status::Io, "checkpoint file '", path, "' is the shard of process ", value("process_index"), ", not of process ",
         rank, " (renamed or swapped?)");
  check_save_id(metadata, save_id, path);
  check_data_crc32(metadata, tensors, path);
  // Slices of the same sizes can hold other parameters: the units must be laid out alike (the
  // wrap policy, DDP's bucket size and the frozen parameters decide them).
  auto layout = metadata.find("layout");
  if (layout == metadata.end()) return;
  const std::string live = engine.shard_layout_json();
  if (layout->second == live) return;
  const std::string other_model = parameter_difference(layout->second, live);
  if (!other_model.empty())
    fail(Status::InvalidArgument, "checkpoint file '", path, "' is a shard of another model: ", other_model);
  fail(Status::InvalidArgument, "checkpoint file '", path, "' lays the parameters out in other units than this job ",
       "(another auto_wrap_policy, transformer_cls_to_wrap, ignored_modules, ddp_bucket_cap_mb or set of frozen ",
       "parameters, or an ", "earlier version of this library, which did not align the parameters?): ",
       "SHARDED_STATE_DICT loads only on the same sharding; save with FULL_STATE_DICT to change it");
}

Metadata shard_metadata(const ShardedDataParallel& engine, const NamedTensors& tensors, const std::string& save_id,
                        Metadata metadata = {}) {
  metadata = with_data_crc32(std::move(metadata), tensors);
  metadata[kSaveIdKey] = save_id;
  metadata["num_processes"] = std::to_string(engine.layout().world());
  metadata["process_index"] = std::to_string(engine.layout().rank());
  metadata["zero_stage"] = std::to_string(engine.options().stage);
  metadata["layout"] = engine.shard_layout_json();
  return metadata;
}

// What every process's optimizer shard must hold alike: each group's settings and progress (a
// learning rate, a schedule-free optimizer's k and mode), without the parameter names, which are
// each process's own. Processes that disagree would drift apart, or run different collectives.
std::string shared_group_settings(const Metadata& metadata, const std::string& source) {
  const auto text = metadata.find("param_groups");
  require(text != metadata.end(), source, ": not an optimizer state (no 'param_groups' in its metadata)");
  json groups = parse_json_input(text->second, source + ": its param_groups metadata");
  require(groups.is_array(), source, ": its param_groups metadata is not a list");
  for (auto& group : groups)
    if (group.is_object()) group.erase("params");
  return "optimizer parameter groups " + groups.dump() + "\n";
}

// The file a part loads: its own kind if the checkpoint has it, else the other one.
std::string existing(const std::string& preferred, const std::string& other) {
  return fs::exists(preferred) || !fs::exists(other) ? preferred : other;
}

class ShardedWeightsPart final : public CheckpointPart {
 public:
  ShardedWeightsPart(size_t index, std::shared_ptr<ShardedDataParallel> engine)
      : index_(index), engine_(std::move(engine)), full_(engine_->options().full_state_dict()) {}

  std::string file() const override {
    return full_ ? indexed_name("model", index_, ".safetensors") : shard_name("model", index_, engine_->layout().rank());
  }
  bool per_process() const override { return !full_; }
  bool process_local() const override { return false; }
  bool writes_here() const override { return engine_->writes_shards(); }
  void collect() override {
    if (full_) state_ = engine_->full_state_dict("save_state");
  }
  void save(const std::string& path) const override {
    if (full_) {
      save_safetensors(path, without_aliases(state_), weights_metadata(engine_->model()));
      state_.clear();
      return;
    }
    const NamedTensors tensors = engine_->shard_state_dict();
    save_safetensors(path, tensors, shard_metadata(*engine_, tensors, save_id(), weights_metadata(engine_->model())));
  }
  StagedLoad load(const std::string& path) const override {
    const fs::path dir = fs::path(path).parent_path();
    const std::string source = existing(path, (dir / (full_ ? shard_name("model", index_, engine_->layout().rank())
                                                              : indexed_name("model", index_, ".safetensors")))
                                                  .string());
    auto contents = std::make_shared<SafetensorsContents>(load_safetensors(source));
    require_same_adapter(engine_->model(), index_, contents->metadata, source);
    if (!is_shard_file(source)) {
      // Stage 3 keeps no original values of the modules to save (a disabled forward is refused
      // there): those a checkpoint of another stage holds are left aside.
      const std::set<std::string> originals = engine_->model().original_module_names();
      NamedTensors& tensors = contents->tensors;
      tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                                   [&](const auto& entry) { return originals.count(entry.first) > 0; }),
                    tensors.end());
      checked_by_file(source, [&] { engine_->check_full_state_dict(contents->tensors); });
      return {[engine = engine_, contents] { engine->load_full_state_dict(contents->tensors); }, {}, {}};
    }
    check_shard_metadata(contents->metadata, contents->tensors, *engine_, save_id(), source);
    checked_by_file(source, [&] { engine_->check_shard_state(contents->tensors); });
    return {[engine = engine_, contents] { engine->load_shard_state(contents->tensors); }, {}, {}};
  }

 private:
  size_t index_;
  std::shared_ptr<ShardedDataParallel> engine_;
  bool full_;
  mutable NamedTensors state_;
};

class ShardedOptimizerPart final : public CheckpointPart {
 public:
  ShardedOptimizerPart(size_t index, std::shared_ptr<ShardedOptimizer> optimizer)
      : index_(index), optimizer_(std::move(optimizer)), engine_(optimizer_->engine()),
        full_(engine_->options().full_state_dict()) {}

  std::string file() const override {
    return full_ ? indexed_name("optimizer", index_, ".safetensors")
                 : shard_name("optimizer", index_, engine_->layout().rank());
  }
  bool per_process() const override { return !full_; }
  bool process_local() const override { return false; }
  bool writes_here() const override { return engine_->writes_shards(); }
  void collect() override {
    if (full_) consolidated_ = consolidate();
  }
  void save(const std::string& path) const override {
    if (full_) {
      save_safetensors(path, consolidated_.tensors, consolidated_.metadata);
      consolidated_ = {};
      return;
    }
    OptimizerSnapshot mine = snapshot_optimizer(*optimizer_);
    save_safetensors(path, mine.tensors, shard_metadata(*engine_, mine.tensors, save_id(), mine.metadata));
  }
  StagedLoad load(const std::string& path) const override {
    const fs::path dir = fs::path(path).parent_path();
    const std::string source = existing(path, (dir / (full_ ? shard_name("optimizer", index_, engine_->layout().rank())
                                                              : indexed_name("optimizer", index_, ".safetensors")))
                                                  .string());
    SafetensorsContents contents = load_safetensors(source);
    const std::string what = "checkpoint file '" + source + "'";
    OptimizerSnapshot snapshot{std::move(contents.tensors), std::move(contents.metadata)};
    if (is_shard_file(source)) {
      check_shard_metadata(snapshot.metadata, snapshot.tensors, *engine_, save_id(), source);
      auto apply = prepare_optimizer_restore(*optimizer_, snapshot, what);
      return {std::move(apply), {}, shared_group_settings(snapshot.metadata, what)};
    }
    return {prepare_optimizer_restore(*optimizer_, optimizer_->slice(snapshot, what), what), {}, {}};
  }

 private:
  // Every process's piece state made whole: elementwise fields are all-gathered unit by unit,
  // per-parameter scalars (Adam's step) travel as JSON. Named and grouped as an unsharded
  // optimizer's snapshot, so DDP and any number of processes can load it.
  OptimizerSnapshot consolidate() const {
    OptimizerSnapshot mine = snapshot_optimizer(*optimizer_);
    std::map<std::string, std::map<std::string, at::Tensor>> by_param;
    for (auto& entry : mine.tensors) {
      const auto [param, field] = split_state_key(entry.first, "optimizer state");
      by_param[param][field] = entry.second;
    }
    json info = {{"fields", json::object()}, {"scalars", json::object()}, {"stepped", json::array()}};
    for (const auto& [param, fields] : by_param) {
      info["stepped"].push_back(param);
      for (const auto& [field, tensor] : fields) {
        if (tensor.dim() == 0) info["scalars"][param][field] = {static_cast<int>(tensor.scalar_type()), tensor.item<double>()};
        else info["fields"][field] = static_cast<int>(tensor.scalar_type());
      }
    }
    Collectives collectives(engine_->distributed());
    json fields = json::object(), scalars = json::object();
    std::set<std::string> stepped;
    for (const auto& bytes : collectives.gather_object(info.dump(), "save_state (optimizer shards)")) {
      const json other = parse_json_input(bytes, "a process's optimizer shard summary");
      fields.update(other["fields"]);
      scalars.update(other["scalars"]);
      for (const auto& name : other["stepped"]) stepped.insert(name.get<std::string>());
    }
    std::map<std::string, std::map<std::string, at::Tensor>> whole;
    const auto& layout = engine_->layout();
    const c10::Device wire = engine_->distributed()->device();
    for (size_t u = 0; u < layout.units().size(); ++u) {
      const FlatUnit& unit = layout.units()[u];
      for (const auto& [field, dtype] : fields.items()) {
        const auto type = static_cast<at::ScalarType>(dtype.get<int>());
        at::Tensor local = at::zeros({unit.slice}, at::TensorOptions().dtype(type));
        for (const auto& piece : layout.pieces()) {
          if (piece.unit != u) continue;
          auto p = by_param.find(engine_->names()[piece.param]);
          if (p == by_param.end() || !p->second.count(field)) continue;
          local.narrow(0, piece.shard_pos - unit.shard_offset, piece.length).copy_(p->second.at(field));
        }
        at::Tensor full = at::empty({unit.padded()}, local.options().device(wire));
        engine_->allgather(full, local.to(wire), "save_state (optimizer shards)");
        full = full.cpu();
        for (size_t k = 0; k < unit.params.size(); ++k) {
          const std::string& name = engine_->names()[unit.params[k]];
          if (!stepped.count(name)) continue;
          const auto& shape = engine_->shapes()[unit.params[k]];
          whole[name][field] = full.narrow(0, unit.offsets[k], c10::multiply_integers(shape)).view(shape).clone();
        }
      }
    }
    OptimizerSnapshot out;
    for (const auto& [param, values] : scalars.items())
      for (const auto& [field, typed] : values.items()) {
        const auto type = static_cast<at::ScalarType>(typed[0].get<int>());
        whole[param][field] = at::scalar_tensor(typed[1].get<double>(), at::TensorOptions().dtype(type));
      }
    // Frozen parameters an optimizer holds are replicated: their state is this process's own.
    for (const auto& [param, values] : by_param)
      if (!engine_->is_trainable(param))
        for (const auto& [field, tensor] : values) whole[param][field] = tensor;
    for (const auto& group : optimizer_->group_names())
      for (const auto& name : group) {
        auto it = whole.find(name);
        if (it == whole.end()) continue;
        for (auto& [field, tensor] : it->second) out.tensors.emplace_back("state." + name + "." + field, tensor);
      }
    out.metadata = mine.metadata;
    json groups = parse_json_input(mine.metadata.at("param_groups"), "optimizer param_groups");
    for (size_t g = 0; g < groups.size(); ++g) groups[g]["params"] = optimizer_->group_names()[g];
    out.metadata["param_groups"] = groups.dump();
    return out;
  }

  size_t index_;
  std::shared_ptr<ShardedOptimizer> optimizer_;
  std::shared_ptr<ShardedDataParallel> engine_;
  bool full_;
  mutable OptimizerSnapshot consolidated_;
};

}  // namespace

std::string shard_name(const std::string& stem, size_t index, int64_t rank) {
  return indexed_name(stem, index, "") + kShardMark + std::to_string(rank) + ".safetensors";
}

void refuse_shards_of_a_whole_object(const std::string& dir, const std::string& stem, size_t index,
                                     const std::string& here) {
  const std::string shard = (fs::path(dir) / shard_name(stem, index, 0)).string();
  std::error_code ec;
  if (!fs::exists(shard, ec)) return;
  const Metadata metadata = load_safetensors_metadata(shard);
  auto value = [&](const char* key) {
    auto it = metadata.find(key);
    return it == metadata.end() ? std::string("?") : it->second;
  };
  fail(Status::InvalidArgument, "checkpoint file '", shard, "' is a shard of ", value("num_processes"),
       " processes under zero_stage ", value("zero_stage"), " (SHARDED_STATE_DICT); this job keeps ",
       indexed_name(stem, index, ""), " whole (", here, "): SHARDED_STATE_DICT loads only on the same sharding; ",
       "save with FULL_STATE_DICT to change it");
}

bool is_shard_file(const std::string& path) {
  return fs::path(path).filename().string().find(kShardMark) != std::string::npos;
}

std::unique_ptr<CheckpointPart> sharded_weights_part(size_t index, std::shared_ptr<ShardedDataParallel> engine) {
  return std::make_unique<ShardedWeightsPart>(index, std::move(engine));
}

std::unique_ptr<CheckpointPart> sharded_optimizer_part(size_t index, std::shared_ptr<ShardedOptimizer> optimizer) {
  return std::make_unique<ShardedOptimizerPart>(index, std::move(optimizer));
}

}  // namespace acc
