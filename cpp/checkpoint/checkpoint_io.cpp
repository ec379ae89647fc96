#include "checkpoint/checkpoint_io.h"

#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/file_records.h"
#include "checkpoint/save_identity.h"
#include "checkpoint/state_files.h"
#include "common/error.h"
#include "common/files.h"
#include "common/json_input.h"

namespace acc {
namespace fs = std::filesystem;

std::string indexed_name(const std::string& stem, size_t i, const std::string& extension) {
  return i == 0 ? stem + extension : stem + "_" + std::to_string(i) + extension;
}

namespace {

// A save that fails leaves no staging folder behind (a published one is gone from there already).
class StagingCleanup {
 public:
  explicit StagingCleanup(std::string staging) : staging_(std::move(staging)) {}
  ~StagingCleanup() {
    if (staging_.empty()) return;
    std::error_code ignored;
    fs::remove_all(staging_, ignored);
  }
  StagingCleanup(const StagingCleanup&) = delete;
  StagingCleanup& operator=(const StagingCleanup&) = delete;
  // The folder is another process's to clean up.
  void release() { staging_.clear(); }

 private:
  std::string staging_;
};

// What the pre-hooks of a save that fails before it is moved into the staging folder wrote into the
// target: deleted, so that an earlier checkpoint there stays one a save may replace (nothing of a
// failed save is kept, as the staging folder's contents are not).
class HookOutputOfAFailedSave {
 public:
  explicit HookOutputOfAFailedSave(const std::optional<FolderSnapshot>& before) : before_(before) {}
  HookOutputOfAFailedSave(const HookOutputOfAFailedSave&) = delete;
  HookOutputOfAFailedSave& operator=(const HookOutputOfAFailedSave&) = delete;
  ~HookOutputOfAFailedSave() {
    if (moved_ || !before_ || std::uncaught_exceptions() == 0) return;
    try {
      before_->discard_written_since();
    } catch (...) {
      // Best effort: the error that stopped the save is the one to report.
    }
  }
  void moved() { moved_ = true; }

 private:
  const std::optional<FolderSnapshot>& before_;
  bool moved_ = false;
};

// In the main process's staging folder while the save is written: under save_on_each_node, another
// node's writer that finds it (with this save's id) shares the main process's file system, and
// leaves the shared files and the publishing to it (one folder, one rename).
constexpr const char* kStagingOwner = ".accelerate_staging_owner";

void create_staging(const std::string& staging) {
  std::error_code ec;
  fs::remove_all(staging, ec);  // a stopped save's
  if (ec)
    fail(Status::Io, "cannot delete '", staging, "', which a stopped save left: ", ec.message(),
         " (delete it, then save again)");
  fs::create_directories(staging, ec);
  if (ec) fail(Status::Io, "cannot create '", staging, "': ", ec.message());
}

bool staged_by_main_process(const std::string& staging, const std::string& save_id) {
  const auto owner = read_whole_file(join_path(staging, kStagingOwner));
  return owner && *owner == save_id;
}

// Whether `target` holds the checkpoint of save `save_id`, complete: its manifest, written last
// before the folder is published, names that save.
bool published(const std::string& target, const std::string& save_id) {
  try {
    const nlohmann::json manifest = read_json(join_path(target, kCheckpointManifest));
    return manifest.is_object() && manifest.value(kSaveIdKey, std::string()) == save_id;
  } catch (const std::exception&) {
    return false;
  }
}

// "[0, 2]": prepare-order indices of models, for messages and comparisons.
std::string listed(const std::vector<size_t>& indices) {
  std::string text;
  for (size_t index : indices) text += (text.empty() ? "" : ", ") + std::to_string(index);
  return "[" + text + "]";
}

// The models whose weights the checkpoint holds (kManifestModelWeightsKey, written by the save; every
// model's where the manifest does not say) must be those the load pre-hooks left: a hook takes out
// at load what one took out at save. After the manifest's count of models was checked.
void check_saved_model_weights(const nlohmann::json& manifest, const std::string& path,
                               const std::vector<size_t>& left) {
  std::vector<size_t> saved;
  if (!manifest.contains(kManifestModelWeightsKey)) {
    for (size_t i = 0, n = json_field<size_t>(manifest, "models", path); i < n; ++i) saved.push_back(i);
  } else {
    const nlohmann::json& in_file = manifest[kManifestModelWeightsKey];
    auto refuse = [&] {
      fail(Status::Io, "checkpoint file '", path, "': '", kManifestModelWeightsKey,
           "' must be a list of model indices in increasing order");
    };
    if (!in_file.is_array()) refuse();
    for (const nlohmann::json& index : in_file) {
      if (!index.is_number_unsigned() || (!saved.empty() && index.get<size_t>() <= saved.back())) refuse();
      saved.push_back(index.get<size_t>());
    }
  }
  if (saved != left)
    fail(Status::InvalidArgument, path, ": the checkpoint holds the weights of models ", listed(saved),
         ", and the load_state pre-hooks leave models ", listed(left),
         " to load: a load pre-hook must take out the models whose weights a save pre-hook took out");
}

// The manifest's counts of what is saved must be the same on every process (a process that registered
// an object the others did not would save a checkpoint none can load, and parts gathered across
// processes would not pair): refused on every process alike, before anything is written.
void check_same_objects_on_every_process(const nlohmann::json& manifest, Collectives& collectives) {
  nlohmann::json mine = nlohmann::json::object();
  for (const char* key : {"models", "optimizers", "schedulers", "dataloaders", "custom_objects", "scaler"})
    if (manifest.contains(key)) mine[key] = manifest[key];
  const auto all = collectives.gather_object(mine.dump(), "save_state (what each process saves)");
  const nlohmann::json first = parse_json_input(all.at(0), "process 0's checkpoint contents");
  for (size_t rank = 1; rank < all.size(); ++rank) {
    const nlohmann::json theirs = parse_json_input(all[rank], "a process's checkpoint contents");
    for (const auto& [key, value] : first.items())
      if (!theirs.contains(key) || theirs[key] != value)
        fail(Status::InvalidArgument, "save_state: process 0 saves ", value.dump(), " ", key, " and process ", rank,
             " saves ", theirs.contains(key) ? theirs[key].dump() : "none",
             "; every process must prepare and register the same objects");
  }
}

}  // namespace

void save_accelerator_state(CheckpointSave& save, const CheckpointPartsOf& parts_of, Collectives& collectives) {
  std::string target, staging;
  collectives.agree(
      "save_state (resolving '" + save.target + "')",
      [&] {
        target = checkpoint_folder(save.target);
        staging = staging_dir(target);
      },
      "save_state (resolving)");
  const bool main_process = collectives.rank() == 0;
  check_same_objects_on_every_process(save.manifest, collectives);
  const std::string save_id = new_save_id(collectives);
  StagingCleanup cleanup(save.writer ? staging : std::string());
  std::optional<FolderSnapshot> before_hooks;  // the writers': what the target held before any hook ran
  collectives.agree(
      "save_state (preparing '" + target + "')",
      [&] {
        // The writers look: they replace the folder (on a shared file system the others see theirs).
        if (save.writer) {
          if (save.automatic) clear_automatic_target(target);
          check_checkpoint_target(target);
          if (!save.hooks.empty()) before_hooks.emplace(target);
        }
        if (!main_process) return;
        create_staging(staging);
        write_file(join_path(staging, kStagingOwner), save_id);
      },
      "save_state (preparing)");
  // The other writers (save_on_each_node's local main processes) stage on their own file systems.
  // Then the pre-hooks run with the folder, made as Accelerate makes output_dir for them.
  bool writer = save.writer;
  FolderMadeForWrite made_for_hooks;  // (what a hook left there is not the library's to delete)
  HookOutputOfAFailedSave discard_if_failed(before_hooks);
  collectives.agree(
      "save_state (preparing on each node '" + target + "')",
      [&] {
        if (writer && !main_process) {
          if (staged_by_main_process(staging, save_id)) {
            writer = false;
            cleanup.release();
          } else {
            create_staging(staging);
          }
        }
        // Only for hooks: a save killed meanwhile leaves the folder behind (empty, or what a hook wrote).
        if (!save.hooks.empty()) made_for_hooks.make(target, "the checkpoint folder");
        for (const auto& hook : save.hooks) hook(save.models, save.target);
      },
      "save_state (preparing on each node)");
  const CheckpointParts parts = parts_of(save.models);
  for (const auto& part : parts) part->set_save_id(save_id);
  nlohmann::json written = nlohmann::json::object();  // this process's files, with their sizes and checksums
  collectives.agree(
      "save_state (writing '" + target + "')",
      [&] {
        // What the pre-hooks wrote (every process's hooks are done): part of the checkpoint too.
        if (writer && before_hooks) {
          written = pre_hook_file_records(staging, before_hooks->move_written_since(staging));
          discard_if_failed.moved();  // in the staging folder now, which a failure removes
        }
        for (const auto& part : parts) part->collect();
        for (const auto& part : parts) {
          if (!((part->per_process() && part->writes_here()) || writer)) continue;
          const std::string path = join_path(staging, part->file());
          try {
            part->save(path);
          } catch (const Error& e) {
            fail_naming_final(e, staging, target);  // where the file would be
          }
          written[part->file()] = file_record(path);
        }
      },
      "save_state (writing)");
  // Every process's files go into the manifest, so that each process checks what it reads; every
  // process's hooks must have left the same models (each node's writer writes their weights).
  nlohmann::json files = nlohmann::json::object();
  const nlohmann::json mine = {{"files", written}, {"models", listed(save.models.indices())}};
  std::string models_on_process_0;
  const auto all = collectives.gather_object(mine.dump(), "save_state (file checksums)");
  for (size_t rank = 0; rank < all.size(); ++rank) {
    const nlohmann::json theirs = parse_json_input(all[rank], "a process's checkpoint file checksums");
    files.update(theirs.at("files"));
    const std::string models = theirs.at("models").get<std::string>();
    if (rank == 0) models_on_process_0 = models;
    if (models != models_on_process_0)
      fail(Status::InvalidArgument, "save_state: the pre-hooks left the weights of models ", models_on_process_0,
           " to the checkpoint on process 0 and of models ", models, " on process ", rank,
           "; every process's hooks must take out the same models");
  }
  try {
    collectives.agree(
        "save_state (completing '" + target + "')",
        [&] {
          if (!writer) return;
          if (main_process) fs::remove(join_path(staging, kStagingOwner));
          nlohmann::json manifest = save.manifest;
          manifest[kSaveIdKey] = save_id;
          manifest[kManifestModelWeightsKey] = save.models.indices();
          manifest[kManifestFilesKey] = files;
          write_file(join_path(staging, kCheckpointManifest), with_manifest_checksum(manifest).dump(2));
          publish_checkpoint(staging, target);
          if (save.automatic) remove_interrupted_saves(save.project_dir);
          if (save.automatic && save.total_limit) rotate_checkpoints(save.project_dir, *save.total_limit, target);
        },
        "save_state (completing)");
  } catch (const Error& e) {
    // The save failed after the main process published it (a peer gone while the outcome was shared,
    // or rotation failing): say that the new checkpoint is there, and the one it replaced is not.
    if (!published(target, save_id)) throw;
    fail(e.status(), e.what(), "; the checkpoint '", target, "' was written complete and replaced what was there ",
         "before this failure: load_state takes it");
  }
}

void load_accelerator_state(CheckpointLoad& load, const CheckpointPartsOf& parts_of, Collectives& collectives) {
  const std::string& source = load.source;
  // Everything is read and checked first, on every process; nothing has changed if any fails.
  std::vector<StagedLoad> staged;
  std::function<void()> apply_manifest;
  std::string loaded_save_id;
  collectives.agree(
      "load_state ('" + source + "')",
      [&] {
        if (load.precheck) load.precheck();
        for (const auto& hook : load.hooks) hook(load.models, source);
        const std::string manifest_path = join_path(source, kCheckpointManifest);
        if (!fs::is_directory(source))
          fail(Status::Io, "checkpoint folder '", source, "' ",
               fs::exists(source) ? "is not a folder" : "does not exist");
        const bool python_layout =
            !fs::exists(manifest_path) && load.python_parts_of && holds_python_accelerate_state(source);
        if (python_layout) {
          load.python_layout = true;
          load.check_python_layout(source);
          for (const auto& part : load.python_parts_of(load.models))
            if (!load.other_process_count || !part->process_local())
              staged.push_back(part->load(join_path(source, part->file())));
          return;
        }
        if (!fs::exists(manifest_path))
          fail(Status::Io, "'", source, "' is not a complete checkpoint (", kCheckpointManifest, " is missing",
               load.python_parts_of
                   ? concat(", and it is not one of Python Accelerate's either: no ", kPythonAccelerateRandomStates)
                   : std::string(),
               ")");
        const nlohmann::json manifest = read_json(manifest_path);
        if (load.check_manifest) apply_manifest = load.check_manifest(manifest, manifest_path);
        check_saved_model_weights(manifest, manifest_path, load.models.indices());
        check_manifest_checksum(manifest, manifest_path);  // after the checks that name a bad value's key
        loaded_save_id = manifest.is_object() && manifest.contains(kSaveIdKey)
                             ? json_field<std::string>(manifest, kSaveIdKey, manifest_path)
                             : std::string();
        for (const auto& part : parts_of(load.models)) {
          if (load.other_process_count && part->process_local()) continue;
          part->set_save_id(loaded_save_id);
          const std::string path = join_path(source, part->file());
          check_recorded_file_present(manifest, part->file(), path);
          staged.push_back(part->load(path));
          // After the part's own checks, which name what is wrong more precisely than a checksum can.
          check_file_record(manifest, part->file(), path, manifest_path);
        }
      },
      "load_state (reading)");
  // What each process read from its own files that every process must share, compared before any
  // change: a difference would otherwise surface as mismatched collectives (a hang) later.
  // The save's id first: processes loading different checkpoints (or folders) differ there.
  // The models whose weights are loaded (the hooks' choice) too.
  std::string shared = "save id " + loaded_save_id + "\nweights of models " + listed(load.models.indices()) + "\n";
  for (const StagedLoad& s : staged) shared += s.shared;
  const std::string differences =
      collectives.differences_from_process_0(shared, "load_state (comparing the processes' files)", 3);
  if (!differences.empty())
    fail(Status::Io, "checkpoint '", source,
         "': the processes' own files hold states that must agree and do not: ", differences);
  // Parts that can only be checked by loading them go first; if any refuses (on any process), those
  // loaded are rolled back and nothing else has changed.
  size_t loaded = 0;
  std::vector<size_t> revocable;
  for (size_t i = 0; i < staged.size(); ++i)
    if (staged[i].rollback) revocable.push_back(i);
  try {
    collectives.agree(
        "load_state (registered objects of '" + source + "')",
        [&] {
          for (; loaded < revocable.size(); ++loaded) staged[revocable[loaded]].apply();
        },
        "load_state (registered objects)");
  } catch (...) {
    for (size_t i = 0; i < loaded; ++i) {
      try {
        staged[revocable[i]].rollback();
      } catch (...) {
        // Best effort: the error that stopped the load is the one to report.
      }
    }
    throw;
  }
  collectives.agree(
      "load_state (restoring '" + source + "')",
      [&] {
        for (auto& s : staged)
          if (!s.rollback) s.apply();
        if (apply_manifest) apply_manifest();
      },
      "load_state (restoring)");
}

}  // namespace acc
