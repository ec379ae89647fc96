// Accelerator::save_state / load_state and the other checkpoint entry points.
//
// Layout of a checkpoint folder (Accelerate's names where a file plays the same role; another
// extension where our format differs from its pickles):
//   model.safetensors, model_1.safetensors ...          unwrapped weights (shared: main process)
//   optimizer.safetensors, optimizer_1.safetensors ...  optimizer state by parameter name (shared)
//   scheduler.json, scheduler_1.json ...                schedule step and base lrs (shared)
//   scaler.json                                         GradScaler (shared, fp16 only)
//   custom_checkpoint_0.bin ...                         registered objects' bytes (shared)
//   random_states_<rank>.safetensors                    each process's RNG states
//   dataloader_state_<rank>.json                        each process's loader positions
//   accelerate_state.json                               the manifest, written last
#include <filesystem>

#include "accelerator/accelerator.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/state_files.h"
#include "common/error.h"
#include "optim/optimizer_state.h"

namespace acc {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kFormatVersion = 1;

// Runs an object's own state checks; a failure names the checkpoint file it came from.
template <typename Check>
void checked(const std::string& path, Check check) {
  try {
    check();
  } catch (const Error& e) {
    fail(e.status(), "checkpoint file '", path, "': ", e.what());
  }
}

std::string rank_file(const std::string& dir, const char* stem, int64_t rank, const char* extension) {
  return join_path(dir, stem + std::to_string(rank) + extension);
}

NamedTensors contiguous_cpu(const NamedTensors& tensors) {
  NamedTensors out;
  for (const auto& entry : tensors) out.emplace_back(entry.first, entry.second.detach().to(at::kCPU).contiguous());
  return out;
}

}  // namespace

void Accelerator::on_every_process(const std::string& what, const std::function<void()>& step) {
  std::string failure;
  Status status = Status::Ok;
  try {
    step();
  } catch (const Error& e) {
    failure = e.what();
    status = e.status();
  } catch (const std::exception& e) {
    failure = e.what();
    status = Status::Internal;
  }
  if (!dist_) {
    if (status != Status::Ok) fail(status, failure);
    return;
  }
  // Each process sends its status code (one byte) and message; every process fails alike, with the
  // code of the first process that failed.
  const auto outcomes = collectives_.gather_object(std::string(1, static_cast<char>(status)) + failure, what);
  std::string message;
  Status first = Status::Ok;
  for (size_t rank = 0; rank < outcomes.size(); ++rank) {
    const auto code = static_cast<Status>(outcomes[rank].empty() ? 0 : outcomes[rank][0]);
    if (code == Status::Ok) continue;
    if (first == Status::Ok) first = code;
    message += concat(message.empty() ? "" : "; ", "process ", rank, ": ", outcomes[rank].substr(1));
  }
  if (first != Status::Ok) fail(first, what, " failed: ", message);
}

void Accelerator::register_for_checkpointing(StateSaver save, StateLoader load) {
  require(save && load, "register_for_checkpointing needs a save and a load function");
  custom_states_.push_back({std::move(save), std::move(load)});
}

std::string Accelerator::save_state(const std::string& dir) {
  const bool automatic = dir.empty();
  require(!automatic || config_.automatic_checkpoint_naming,
          "save_state needs a folder, or automatic_checkpoint_naming with a project_dir");
  const std::string target = automatic ? automatic_checkpoint_dir(config_.project_dir, iteration_) : dir;
  const std::string staging = staging_dir(target);
  const bool writer = writes_shared_files();
  const auto models = live_models();
  const auto optimizers = live_optimizers();
  const auto schedulers = live_schedulers();
  const auto loaders = live_loaders();

  on_every_process("save_state (preparing '" + target + "')", [&] {
    if (automatic && fs::exists(target))
      fail(Status::InvalidArgument, "checkpoint folder '", target, "' already exists (iteration ", iteration_,
           "); set iteration past it");
    check_checkpoint_target(target);
    for (const auto& hook : save_hooks_) hook(target);
    if (!writer) return;
    std::error_code ec;
    fs::remove_all(staging, ec);
    fs::create_directories(staging, ec);
    if (ec) fail(Status::Io, "cannot create '", staging, "': ", ec.message());
  });

  on_every_process("save_state (writing '" + target + "')", [&] {
    if (scaler_) scaler_->settle();  // the scale update the last step left for the next backward
    // Each process: its RNG states and loader positions.
    save_safetensors(rank_file(staging, "random_states_", process_index(), ".safetensors"), capture_rng_states(),
                     {{"step", std::to_string(step())}});
    std::vector<LoaderState> states;
    for (const auto& loader : loaders) states.push_back(loader->state());
    write_loader_states(rank_file(staging, "dataloader_state_", process_index(), ".json"), states);
    if (!writer) return;
    // Shared files.
    for (size_t i = 0; i < models.size(); ++i)
      save_safetensors(join_path(staging, indexed_name("model", i, ".safetensors")),
                       models[i]->unwrap()->state_dict());
    for (size_t i = 0; i < optimizers.size(); ++i) {
      auto snapshot = snapshot_optimizer(*optimizers[i]->unwrap());
      save_safetensors(join_path(staging, indexed_name("optimizer", i, ".safetensors")), snapshot.tensors,
                       snapshot.metadata);
    }
    for (size_t i = 0; i < schedulers.size(); ++i)
      write_scheduler_state(join_path(staging, indexed_name("scheduler", i, ".json")), schedulers[i]->state());
    if (scaler_)
      write_scaler_state(join_path(staging, "scaler.json"), {scaler_->current_scale(), scaler_->growth_tracker()});
    for (size_t i = 0; i < custom_states_.size(); ++i)
      write_file(join_path(staging, "custom_checkpoint_" + std::to_string(i) + ".bin"), custom_states_[i].save());
  });

  on_every_process("save_state (completing '" + target + "')", [&] {
    if (!writer) return;
    const json manifest = {{"format_version", kFormatVersion},
                           {"num_processes", num_processes()},
                           {"iteration", iteration_},
                           {"step", step()},
                           {"mixed_precision", config_.mixed_precision},
                           {"models", models.size()},
                           {"optimizers", optimizers.size()},
                           {"schedulers", schedulers.size()},
                           {"dataloaders", loaders.size()},
                           {"custom_objects", custom_states_.size()},
                           {"scaler", scaler_ != nullptr}};
    write_file(join_path(staging, kCheckpointManifest), manifest.dump(2));
    publish_checkpoint(staging, target);
    if (automatic) remove_interrupted_saves(config_.project_dir);
    if (automatic && config_.total_limit) rotate_checkpoints(config_.project_dir, *config_.total_limit);
  });
  ++iteration_;
  return target;
}

std::string Accelerator::load_state(const std::string& dir) {
  std::string source = dir;
  if (source.empty()) {
    require(!config_.project_dir.empty(), "load_state needs a folder, or a project_dir with checkpoints");
    auto newest = newest_checkpoint(config_.project_dir);
    if (!newest) fail(Status::Io, "no complete checkpoint under '", config_.project_dir, "/checkpoints'");
    source = *newest;
  }
  const auto models = live_models();
  const auto optimizers = live_optimizers();
  const auto schedulers = live_schedulers();
  const auto loaders = live_loaders();

  // Everything is read and checked first; `apply` then changes state and cannot fail on bad files.
  std::vector<std::function<void()>> apply;
  // Registered objects can only be checked by loading them: they are loaded first, each one's
  // current bytes kept to roll back to should one of them refuse.
  std::vector<std::string> custom_paths, custom_bytes, custom_before;
  int64_t saved_iteration = 0;
  on_every_process("load_state ('" + source + "')", [&] {
    // Loaders resume between epochs only; say so before anything has changed.
    for (size_t i = 0; i < loaders.size(); ++i)
      if (loaders[i]->position() > 0)
        fail(Status::InvalidArgument, "prepared data loader ", i,
             " is in the middle of an epoch: load the checkpoint before iterating it");
    for (const auto& hook : load_hooks_) hook(source);
    const std::string manifest_path = join_path(source, kCheckpointManifest);
    if (!fs::is_directory(source)) fail(Status::Io, "checkpoint folder '", source, "' does not exist");
    if (!fs::exists(manifest_path))
      fail(Status::Io, "'", source, "' is not a complete checkpoint (", kCheckpointManifest, " is missing)");
    const json manifest = read_json(manifest_path);
    const auto version = json_field<int>(manifest, "format_version", manifest_path);
    if (version != kFormatVersion)
      fail(Status::VersionMismatch, manifest_path, ": checkpoint format ", version, ", this library reads ", kFormatVersion);
    const auto saved_processes = json_field_at_least<int64_t>(manifest, "num_processes", manifest_path, 1);
    if (saved_processes != num_processes())
      fail(Status::InvalidArgument, manifest_path, ": the checkpoint was saved by ", saved_processes,
           " processes, this job has ", num_processes());
    auto expect_count = [&](const char* key, size_t have) {
      const auto saved = json_field<size_t>(manifest, key, manifest_path);
      if (saved != have)
        fail(Status::InvalidArgument, manifest_path, ": the checkpoint holds ", saved, " ", key, ", ", have,
             " are prepared");
    };
    expect_count("models", models.size());
    expect_count("optimizers", optimizers.size());
    expect_count("schedulers", schedulers.size());
    expect_count("dataloaders", loaders.size());
    expect_count("custom_objects", custom_states_.size());
    const auto saved_precision = json_field<std::string>(manifest, "mixed_precision", manifest_path);
    if (saved_precision != "no" && saved_precision != "fp16" && saved_precision != "bf16")
      fail(Status::Io, "checkpoint file '", manifest_path, "': 'mixed_precision' must be no, fp16 or bf16, not '",
           saved_precision, "'");
    if (json_field<bool>(manifest, "scaler", manifest_path) != (scaler_ != nullptr))
      fail(Status::InvalidArgument, manifest_path, ": saved with mixed_precision ", saved_precision,
           ", this accelerator uses ", config_.mixed_precision, " (GradScaler state ", scaler_ ? "missing" : "unexpected",
           ")");
    saved_iteration = json_field_at_least<int64_t>(manifest, "iteration", manifest_path, 0);
    const auto saved_step = json_field_at_least<int64_t>(manifest, "step", manifest_path, 0);

    for (size_t i = 0; i < models.size(); ++i) {
      const std::string path = join_path(source, indexed_name("model", i, ".safetensors"));
      auto contents = std::make_shared<SafetensorsContents>(load_safetensors(path));
      auto model = models[i]->unwrap();
      try {
        model->check_state_dict(contents->tensors, true);
      } catch (const Error& e) {
        fail(Status::InvalidArgument, "checkpoint file '", path, "' does not fit model ", i, ": ", e.what());
      }
      apply.push_back([model, contents] { model->load_state_dict(contents->tensors, true); });
    }
    for (size_t i = 0; i < optimizers.size(); ++i) {
      const std::string path = join_path(source, indexed_name("optimizer", i, ".safetensors"));
      SafetensorsContents contents = load_safetensors(path);  // its tensors keep the file mapped
      OptimizerSnapshot snapshot{std::move(contents.tensors), std::move(contents.metadata)};
      apply.push_back(prepare_optimizer_restore(*optimizers[i]->unwrap(), snapshot, "checkpoint file '" + path + "'"));
    }
    for (size_t i = 0; i < schedulers.size(); ++i) {
      const std::string path = join_path(source, indexed_name("scheduler", i, ".json"));
      const SchedulerState state = read_scheduler_state(path);
      auto scheduler = schedulers[i];
      checked(path, [&] { scheduler->check_state(state); });
      apply.push_back([scheduler, state] { scheduler->load_state(state); });
    }
    if (scaler_) {
      const std::string path = join_path(source, "scaler.json");
      const ScalerState state = read_scaler_state(path);
      auto scaler = scaler_;
      checked(path, [&] { scaler->check_state(state.scale, state.growth_tracker); });
      apply.push_back([scaler, state] { scaler->load_state(state.scale, state.growth_tracker); });
    }
    {
      const std::string path = rank_file(source, "dataloader_state_", process_index(), ".json");
      const auto states = read_loader_states(path);
      if (states.size() != loaders.size())
        fail(Status::InvalidArgument, "checkpoint file '", path, "' holds ", states.size(), " loader states, ",
             loaders.size(), " loaders are prepared");
      for (size_t i = 0; i < loaders.size(); ++i) {
        auto loader = loaders[i];
        checked(path, [&] { loader->check_state(states[i]); });
        apply.push_back([loader, state = states[i]] { loader->load_state(state); });
      }
    }
    {
      const std::string path = rank_file(source, "random_states_", process_index(), ".safetensors");
      apply.push_back(prepare_rng_restore(load_safetensors(path).tensors, path));
    }
    for (size_t i = 0; i < custom_states_.size(); ++i) {
      custom_paths.push_back(join_path(source, "custom_checkpoint_" + std::to_string(i) + ".bin"));
      custom_bytes.push_back(read_file(custom_paths.back()));
      custom_before.push_back(custom_states_[i].save());
    }
    auto state = gradient_state_;
    apply.push_back([state, saved_step] { state->set_step(saved_step); });
  });
  size_t loaded = 0;
  try {
    on_every_process("load_state (registered objects of '" + source + "')", [&] {
      for (; loaded < custom_states_.size(); ++loaded)
        checked(custom_paths[loaded], [&] { custom_states_[loaded].load(custom_bytes[loaded]); });
    });
  } catch (...) {
    for (size_t i = 0; i < loaded; ++i) {
      try {
        custom_states_[i].load(custom_before[i]);
      } catch (...) {
        // Best effort: the error that stopped the load is the one to report.
      }
    }
    throw;
  }
  on_every_process("load_state (restoring '" + source + "')", [&] {
    for (auto& step : apply) step();
  });
  // Unlike Accelerate (#1601), the iteration counter resumes too: the next save does not collide.
  iteration_ = saved_iteration + 1;
  return source;
}

void Accelerator::save(const NamedTensors& tensors, const std::string& path) {
  if (writes_shared_files()) save_safetensors(path, tensors);  // it copies to the CPU
}

NamedTensors Accelerator::get_state_dict(const std::shared_ptr<Model>& model, bool unwrap) const {
  require(model != nullptr, "get_state_dict needs a model");
  NamedTensors state = contiguous_cpu(unwrap_model(model)->state_dict());
  const bool wrapped = !unwrap && dist_ && std::dynamic_pointer_cast<PreparedModel>(wrapped_model(model));
  if (wrapped)
    for (auto& entry : state) entry.first = "module." + entry.first;
  return state;
}

}  // namespace acc
