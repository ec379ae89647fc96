// Folders of save_state: automatic naming (project_dir/checkpoints/checkpoint_<i>), finding the
// newest complete one, rotation, and publishing a folder written under a temporary name.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace acc {

// The file that marks a checkpoint folder as complete (written last, before the rename).
inline constexpr const char* kCheckpointManifest = "accelerate_state.json";
// What marks a folder (without that manifest) as one Python Accelerate's save_state wrote: process
// 0's random states, which it writes after the models, optimizers and schedulers.
inline constexpr const char* kPythonAccelerateRandomStates = "random_states_0.pkl";

// Whether `folder` holds kPythonAccelerateRandomStates (one of Python Accelerate's checkpoints, if
// it lacks our manifest).
bool holds_python_accelerate_state(const std::string& folder);

// The number i of a folder named checkpoint_<i> (as saves name them: no leading zeros); none otherwise.
std::optional<int64_t> checkpoint_number(const std::string& name);

std::string automatic_checkpoint_dir(const std::string& project_dir, int64_t iteration);

// The complete checkpoint_<i> folder with the highest i under project_dir/checkpoints, ours (with
// the manifest) or Python Accelerate's (as Accelerate's load_state takes the highest number);
// entries that are not checkpoint_<number>, or are neither, are ignored.
std::optional<std::string> newest_checkpoint(const std::string& project_dir);

// Deletes the lowest-numbered complete checkpoint_<i> folders so that at most `keep` remain, `written`
// (the one just published) among them whatever its number; other entries are left alone and not
// counted. Run after a new checkpoint is complete, so a crash never leaves fewer than before.
void rotate_checkpoints(const std::string& project_dir, int64_t keep, const std::string& written);

// Refuses (InvalidArgument, naming what is there) a save_state target that publish_checkpoint would
// destroy without it being ours: a file, or a folder holding anything but a checkpoint's files (the
// parts' and those its manifest records). Nothing is changed. A missing or empty folder, or an
// earlier checkpoint, may be replaced.
void check_checkpoint_target(const std::string& target);

// An automatic checkpoint's folder found in place before a save: a complete checkpoint is refused
// (InvalidArgument: the counter must move past it); what a save killed while its pre-hooks ran left
// there (no manifest, its staging folder beside it) is renamed to a hidden ".<name>.interrupted" beside
// it, with a warning on stderr, so that the run goes on without losing it; an empty one is taken as it
// is; any other folder is the user's, refused (InvalidArgument) as Accelerate refuses it.
void clear_automatic_target(const std::string& target);

// What a folder holds (nothing where it does not exist), to tell afterwards what was written into it:
// a save's pre-hooks write into the checkpoint's folder, as Accelerate's do into output_dir, while the
// checkpoint is written beside it; what they wrote moves over before the new folder replaces it.
class FolderSnapshot {
 public:
  explicit FolderSnapshot(const std::string& folder);
  // What was written into the folder since the snapshot, by paths under it: entries added, replaced
  // or rewritten (another inode, size, modification or change time), and folders added.
  struct Written {
    std::vector<std::string> entries, folders;  // folders: each before what it holds
  };
  Written written_since() const;
  // Moves it into `destination`, at the same paths (the added folders, emptied, go from the folder).
  Written move_written_since(const std::string& destination) const;
  // Deletes it: what the hooks of a save that failed wrote into an earlier checkpoint's folder.
  void discard_written_since() const;

 private:
  struct Stamp {
    uint64_t device, inode;
    int64_t size, modified_ns, changed_ns;
    bool operator==(const Stamp& other) const;
  };
  static std::optional<Stamp> stamp_of(const std::string& path);
  void remove_added_folders(const Written& written) const;
  std::string folder_;
  std::map<std::string, Stamp> entries_;  // every entry but folders, by its path under the folder
  std::set<std::string> folders_;
};

// The records (file_records.h) of what the pre-hooks wrote, moved into a staging folder: each file's,
// and "name/" for an empty folder. A link or other special file is refused (InvalidArgument).
nlohmann::json pre_hook_file_records(const std::string& staging, const FolderSnapshot::Written& written);

// Deletes what saves and rotations killed midway left under project_dir/checkpoints: the hidden
// .checkpoint_<i>.incomplete[.old] and .checkpoint_<i>.deleting folders (run after a save is published).
void remove_interrupted_saves(const std::string& project_dir);

// A save_state target as the folder it names: absolute, without "." or ".." or a trailing
// separator ("." is the current folder, named from its parent), so that the staging folder beside
// it lies outside it. The root folder is refused (InvalidArgument): it has no parent to stage in.
std::string checkpoint_folder(const std::string& target);

// Where a checkpoint for `folder` (checkpoint_folder's) is written before it is complete: a hidden
// sibling folder.
std::string staging_dir(const std::string& folder);

// Moves a complete staging folder to `target`, replacing an existing folder there only once the
// new one is in place (the old one is moved aside first, then deleted).
void publish_checkpoint(const std::string& staging, const std::string& target);

}  // namespace acc
