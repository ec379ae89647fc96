// Accelerator::save_state / load_state and the other checkpoint entry points.
//
// Layout of a checkpoint folder (Accelerate's names where a file plays the same role; another
// extension where our format differs from its pickles):
//   model.safetensors, model_1.safetensors ...          unwrapped weights (shared: main process)
//   optimizer.safetensors, optimizer_1.safetensors ...  optimizer state by parameter name (shared)
//   scheduler.json, scheduler_1.json ...                schedule step and base lrs (shared)
//   scaler.json                                         GradScaler (shared, fp16 only)
//   custom_checkpoint_0.bin ...                         registered objects' bytes (shared; an averaged
//                                                       model's state: custom_checkpoint_<i>.safetensors)
//   random_states_<rank>.safetensors                    each process's RNG states
//   dataloader_state_<rank>.json                        each process's loader positions
//   ddp_comm_hook_<rank>.safetensors                    each process's PowerSGD state (with that hook)
//   accelerate_state.json                               the manifest (and DDP's bucket layouts), written last
#include <cstdio>
#include <filesystem>
#include <limits>

#include "accelerator/accelerator.h"
#include "accelerator/registered_object_part.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/rng_part.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/state_files.h"
#include "common/environment.h"
#include "common/error.h"
#include "common/own_callbacks.h"
#include "data/loader_part.h"
#include "model/weights_part.h"
#include "optim/optimizer_part.h"
#include "parallel/power_sgd_part.h"
#include "parallel/sharded_checkpoint_parts.h"
#include "precision/scaler_part.h"
#include "schedule/scheduler_part.h"

namespace acc {
using nlohmann::json;

namespace {

constexpr int kFormatVersion = 1;

// The manifest's "ddp_buckets": each model's DDP bucket layout once the Reducer rebuilt it (a list of
// buckets, each a list of parameter indices), null before the rebuild or without DDP.
json bucket_layouts(const std::vector<std::shared_ptr<PreparedModel>>& models) {
  json layouts = json::array();
  for (const auto& model : models) {
    const DataParallel* ddp = model->data_parallel();
    const auto layout = ddp ? ddp->saved_layout() : std::nullopt;
    layouts.push_back(layout ? json(*layout) : json(nullptr));
  }
  return layouts;
}

// The saved layout of model `i` (nullopt: as before the first step; also for a checkpoint written
// before layouts were saved), its shape checked.
std::optional<BucketLayout> saved_bucket_layout(const json& manifest, size_t i, size_t models,
                                                const std::string& path) {
  if (!manifest.contains("ddp_buckets")) return std::nullopt;
  const json& all = manifest["ddp_buckets"];
  if (!all.is_array() || all.size() != models)
    fail(Status::Io, "checkpoint file '", path, "': 'ddp_buckets' must be a list of one entry per model");
  if (all[i].is_null()) return std::nullopt;
  auto refuse = [&] {
    fail(Status::Io, "checkpoint file '", path, "': 'ddp_buckets' entry ", i,
         " must be null or a list of lists of parameter indices");
  };
  if (!all[i].is_array()) refuse();
  BucketLayout layout;
  for (const json& bucket : all[i]) {
    if (!bucket.is_array()) refuse();
    layout.emplace_back();
    for (const json& index : bucket) {
      if (!index.is_number_unsigned()) refuse();
      layout.back().push_back(index.get<size_t>());
    }
  }
  return layout;
}

NamedTensors contiguous_cpu(const NamedTensors& tensors) {
  NamedTensors out;
  for (const auto& entry : tensors) out.emplace_back(entry.first, entry.second.detach().to(at::kCPU).contiguous());
  return out;
}

}  // namespace

void Accelerator::register_for_checkpointing(StateSaver save, StateLoader load) {
  require(save && load, "register_for_checkpointing needs a save and a load function");
  register_for_checkpointing([save = std::move(save), load = std::move(load)](size_t index) {
    return registered_object_part(index, save, load);
  });
}

void Accelerator::register_for_checkpointing(CustomPartMaker make_part) {
  require(static_cast<bool>(make_part), "register_for_checkpointing needs an object");
  custom_states_.push_back(std::move(make_part));
}

CheckpointModels Accelerator::checkpoint_models() const {
  std::vector<CheckpointModels::Entry> entries;
  const auto models = live_models();
  for (size_t i = 0; i < models.size(); ++i) {
    const auto engine = models[i]->sharded();
    entries.push_back({i, models[i],
                       engine ? "it is prepared with sharded data parallelism (zero_stage " +
                                    std::to_string(engine->options().stage) +
                                    "), whose weights the library gathers or shards itself (Accelerate's FSDP and "
                                    "DeepSpeed hooks get no weights either)"
                              : std::string()});
  }
  return CheckpointModels(std::move(entries));
}

CheckpointParts Accelerator::weights_parts(const CheckpointModels& weights_of) const {
  CheckpointParts parts;
  for (size_t file = 0; file < weights_of.size(); ++file) {
    const CheckpointModels::Entry& entry = weights_of.at(file);
    // The entry's own reference: a hook may have freed the handle it was prepared through.
    const auto model = std::static_pointer_cast<PreparedModel>(entry.model);
    auto engine = model->sharded();
    parts.push_back(engine && engine->options().stage == 3 ? sharded_weights_part(file, engine)
                                                           : weights_part(file, entry.index, model->unwrap()));
  }
  return parts;
}

CheckpointParts Accelerator::checkpoint_parts(const CheckpointModels& weights_of) const {
  CheckpointParts parts = weights_parts(weights_of);
  const auto optimizers = live_optimizers();
  for (size_t i = 0; i < optimizers.size(); ++i) {
    auto sharded = std::dynamic_pointer_cast<ShardedOptimizer>(optimizers[i]->unwrap());
    parts.push_back(sharded ? sharded_optimizer_part(i, sharded) : optimizer_part(i, optimizers[i]->unwrap()));
  }
  const auto schedulers = live_schedulers();
  for (size_t i = 0; i < schedulers.size(); ++i) parts.push_back(scheduler_part(i, schedulers[i]));
  if (scaler_) parts.push_back(scaler_part(scaler_));
  parts.push_back(loader_states_part(process_index(), live_loaders()));
  parts.push_back(rng_states_part(process_index(), step()));
  std::vector<std::pair<size_t, std::shared_ptr<PowerSgdState>>> power_sgd;
  const auto models = live_models();
  for (size_t i = 0; i < models.size(); ++i)
    if (const DataParallel* ddp = models[i]->data_parallel(); ddp && ddp->power_sgd_state())
      power_sgd.emplace_back(i, ddp->power_sgd_state());
  if (!power_sgd.empty()) parts.push_back(power_sgd_states_part(process_index(), std::move(power_sgd)));
  for (size_t i = 0; i < custom_states_.size(); ++i)
    parts.push_back(custom_states_[i](i));
  return parts;
}

json Accelerator::checkpoint_manifest() const {
  return {{"format_version", kFormatVersion},
          {"num_processes", num_processes()},
          {"iteration", iteration_},
          {"step", step()},
          {"mixed_precision", config_.mixed_precision},
          {"models", live_models().size()},
          {"optimizers", live_optimizers().size()},
          {"schedulers", live_schedulers().size()},
          {"dataloaders", live_loaders().size()},
          {"custom_objects", custom_states_.size()},
          {"scaler", scaler_ != nullptr},
          {"ddp_buckets", bucket_layouts(live_models())}};
}

void Accelerator::warn_scaler_not_read(const std::string& checkpoint) const {
  if (is_main_process())
    std::fprintf(stderr,
                 "accelerate: %s holds fp16's GradScaler state, which is not read: this accelerator uses "
                 "mixed_precision %s and no GradScaler\n",
                 checkpoint.c_str(), config_.mixed_precision.c_str());
}

std::function<void()> Accelerator::check_checkpoint_manifest(const json& manifest, const std::string& path,
                                                             const CheckpointModels& models_left,
                                                             bool& other_process_count) {
  const auto version = json_field<int>(manifest, "format_version", path);
  if (version != kFormatVersion)
    fail(Status::VersionMismatch, path, ": checkpoint format ", version, ", this library reads ", kFormatVersion);
  const auto saved_processes = json_field_at_least<int64_t>(manifest, "num_processes", path, 1);
  const std::string dir = std::filesystem::path(path).parent_path().string();
  if (saved_processes != num_processes()) {
    // Consolidated weights and optimizer state fit any number of processes; shards do not, and
    // each process's RNG streams and loader positions have no counterpart: they stay as they are.
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (is_shard_file(entry.path().string()))
        fail(Status::InvalidArgument, path, ": the checkpoint was saved as shards (SHARDED_STATE_DICT) by ",
             saved_processes, " processes, this job has ", num_processes(),
             " (save with FULL_STATE_DICT to resume on another number of processes)");
    other_process_count = true;
    if (is_main_process())
      std::fprintf(stderr, "accelerate: loading a checkpoint of %lld processes on %lld: weights, optimizer, scheduler "
                   "and scaler states are restored; random states and data loader positions are not\n",
                   static_cast<long long>(saved_processes), static_cast<long long>(num_processes()));
  }
  // Shards load only into objects sharded alike (the parts check how); one kept whole here would be
  // looked for in its consolidated file, and reported missing.
  for (size_t file = 0; file < models_left.size(); ++file) {
    const auto engine = std::static_pointer_cast<PreparedModel>(models_left.at(file).model)->sharded();
    if (!engine || engine->options().stage != 3)
      refuse_shards_of_a_whole_object(dir, "model", file,
                                      engine ? "zero_stage " + std::to_string(engine->options().stage) +
                                                   " shards the optimizer state, not the parameters"
                                             : "not sharded");
  }
  const auto optimizers = live_optimizers();
  for (size_t i = 0; i < optimizers.size(); ++i)
    if (!std::dynamic_pointer_cast<ShardedOptimizer>(optimizers[i]->unwrap()))
      refuse_shards_of_a_whole_object(dir, "optimizer", i, "not sharded");
  const json live = checkpoint_manifest();
  for (const char* key : {"models", "optimizers", "schedulers", "dataloaders", "custom_objects"}) {
    const auto saved = json_field<size_t>(manifest, key, path);
    if (saved != live[key].get<size_t>())
      fail(Status::InvalidArgument, path, ": the checkpoint holds ", saved, " ", key, ", and this accelerator has ",
           live[key].get<size_t>(), " prepared");
  }
  const auto saved_precision = json_field<std::string>(manifest, "mixed_precision", path);
  if (saved_precision != "no" && saved_precision != "fp16" && saved_precision != "bf16")
    fail(Status::Io, "checkpoint file '", path, "': 'mixed_precision' must be no, fp16 or bf16, not '",
         saved_precision, "'");
  const bool saved_scaler = json_field<bool>(manifest, "scaler", path);
  if (scaler_ && !saved_scaler)
    fail(Status::InvalidArgument, path, ": saved with mixed_precision ", saved_precision, ", this accelerator uses ",
         config_.mixed_precision, " (GradScaler state missing)");
  if (saved_scaler && !scaler_) warn_scaler_not_read(path);
  const auto saved_iteration = json_field_at_least<int64_t>(manifest, "iteration", path, 0);
  if (saved_iteration == std::numeric_limits<int64_t>::max())
    fail(Status::Io, path, ": iteration ", saved_iteration, " leaves no number for the next checkpoint");
  const auto saved_step = json_field_at_least<int64_t>(manifest, "step", path, 0);
  // DDP's buckets as saved: on more than 2 processes they decide the sums' rounding.
  std::vector<std::pair<DataParallel*, std::optional<BucketLayout>>> layouts;
  const auto models = live_models();
  for (size_t i = 0; i < models.size(); ++i) {
    DataParallel* ddp = models[i]->data_parallel();
    if (!ddp) continue;
    auto layout = saved_bucket_layout(manifest, i, models.size(), path);
    if (layout) ddp->check_layout(*layout, "checkpoint file '" + path + "'");
    layouts.emplace_back(ddp, std::move(layout));
  }
  return [this, saved_iteration, saved_step, layouts, other_process_count] {
    for (const auto& [ddp, layout] : layouts) {
      ddp->restore_layout(layout);
      // Another process count has no counterpart of each process's PowerSGD error feedback.
      if (other_process_count && ddp->power_sgd_state()) ddp->power_sgd_state()->reset();
    }
    gradient_state_->set_step(saved_step);
    // Unlike Accelerate (#1601), the iteration counter resumes too: the next save does not collide.
    // Never backwards: after loading an earlier checkpoint (a rollback, a folder saved by path) the
    // next automatic save would meet a later one, or become the newest under a lower number.
    iteration_ = std::max(iteration_, saved_iteration + 1);
  };
}

std::string Accelerator::save_state(const std::string& dir) {
  // The pre-hooks and registered objects' callbacks run inside: a save or load from one of them
  // would replace the folder being written, or the state being saved.
  refuse_inside_own_callbacks(&state_hooks_, "accelerator's save_state or load_state", "save_state");
  const OwnCallbacksRunning running(&state_hooks_);
  const bool automatic = dir.empty();
  require(!automatic || config_.automatic_checkpoint_naming,
          "save_state needs a folder, or automatic_checkpoint_naming with a project_dir");
  // The counter names checkpoint_<iteration> and must advance past it.
  require(iteration_ < std::numeric_limits<int64_t>::max(), "the checkpoint counter (option iteration) is at its ",
          "largest value, ", iteration_, ": there is no number for the checkpoint after this one");
  CheckpointSave save;
  save.target = automatic ? automatic_checkpoint_dir(config_.project_dir, iteration_) : dir;
  save.automatic = automatic;
  save.project_dir = config_.project_dir;
  save.total_limit = config_.total_limit;
  save.writer = writes_shared_files();
  for (const auto& model : live_models())
    if (DataParallel* ddp = model->data_parallel()) ddp->settle_layout();
  save.manifest = checkpoint_manifest();
  save.models = checkpoint_models();
  save.hooks = state_hooks_.of(CheckpointHooks::Kind::Save);
  if (config_.python_state_files) check_python_state_files("python_state_files");
  save_accelerator_state(
      save,
      [this](const CheckpointModels& models) {
        CheckpointParts parts = checkpoint_parts(models);
        if (config_.python_state_files)
          for (auto& part : python_state_parts()) parts.push_back(std::move(part));
        return parts;
      },
      collectives_);
  ++iteration_;
  return save.target;
}

std::string Accelerator::load_state(const std::string& dir) {
  refuse_inside_own_callbacks(&state_hooks_, "accelerator's save_state or load_state", "load_state");
  const OwnCallbacksRunning running(&state_hooks_);
  CheckpointLoad load;
  load.source = expand_user(dir);  // as Accelerate's load_state (not its save_state)
  if (load.source.empty()) {
    require(config_.automatic_checkpoint_naming && !config_.project_dir.empty(),
            "load_state needs a folder, or automatic_checkpoint_naming with a project_dir (its newest checkpoint)");
    auto newest = newest_checkpoint(config_.project_dir);
    if (!newest) fail(Status::Io, "no complete checkpoint under '", config_.project_dir, "/checkpoints'");
    load.source = *newest;
  }
  const auto loaders = live_loaders();
  load.precheck = [&] {
    // Loaders resume between epochs only; say so before anything has changed.
    for (size_t i = 0; i < loaders.size(); ++i)
      if (loaders[i]->position() > 0)
        fail(Status::InvalidArgument, "prepared data loader ", i,
             " is in the middle of an epoch: load the checkpoint before iterating it");
  };
  load.models = checkpoint_models();
  load.hooks = state_hooks_.of(CheckpointHooks::Kind::Load);
  load.check_manifest = [this, &load](const json& manifest, const std::string& path) {
    return check_checkpoint_manifest(manifest, path, load.models, load.other_process_count);
  };
  // A folder Python Accelerate's save_state wrote has no manifest: its own files are read instead.
  load.check_python_layout = [this, &load](const std::string& folder) {
    check_python_checkpoint(folder, load.models, load.other_process_count);
  };
  load.python_parts_of = [this, &load](const CheckpointModels& models) {
    CheckpointParts parts = python_weights_parts(models, load.source);
    for (auto& part : python_state_parts()) parts.push_back(std::move(part));
    return parts;
  };
  load_accelerator_state(
      load, [this](const CheckpointModels& models) { return checkpoint_parts(models); }, collectives_);
  // Python Accelerate's folders record no iteration: a checkpoint_<i> one's name gives it.
  std::filesystem::path folder(load.source);
  if (folder.filename().empty()) folder = folder.parent_path();  // "checkpoint_3/"
  const auto number = checkpoint_number(folder.filename().string());
  if (load.python_layout && number && *number < std::numeric_limits<int64_t>::max())
    iteration_ = std::max(iteration_, *number + 1);
  return load.source;
}

void Accelerator::save(const NamedTensors& tensors, const std::string& path) {
  if (writes_shared_files()) save_safetensors(path, tensors);  // it copies to the CPU
}

NamedTensors Accelerator::get_state_dict(const std::shared_ptr<Model>& model, bool unwrap) const {
  require(model != nullptr, "get_state_dict needs a model");
  auto engine = sharding_engine(model);
  // Sharded: a collective (every process calls it), as Accelerate's get_state_dict under FSDP;
  // announced first, as save_model's.
  if (engine)
    collectives_.barrier("get_state_dict (gathering the sharded weights)");
  else
    require_not_sharded_elsewhere(*unwrap_model(model), "get_state_dict");
  NamedTensors state = contiguous_cpu(engine ? as_given_out(engine->full_state_dict("get_state_dict"), *engine)
                                             : unwrap_model(model)->state_dict());
  const bool wrapped = !unwrap && dist_ && std::dynamic_pointer_cast<PreparedModel>(wrapped_model(model));
  if (wrapped)
    for (auto& entry : state) entry.first = "module." + entry.first;
  return state;
}

}  // namespace acc
