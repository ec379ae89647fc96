// Folders of save_state: automatic naming (project_dir/checkpoints/checkpoint_<i>), finding the
// newest complete one, rotation, and publishing a folder written under a temporary name.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace acc {

// The file that marks a checkpoint folder as complete (written last, before the rename).
inline constexpr const char* kCheckpointManifest = "accelerate_state.json";

std::string automatic_checkpoint_dir(const std::string& project_dir, int64_t iteration);

// The complete checkpoint_<i> folder with the highest i under project_dir/checkpoints; entries
// that are not checkpoint_<number>, or lack the manifest, are ignored.
std::optional<std::string> newest_checkpoint(const std::string& project_dir);

// Deletes the oldest checkpoint_<i> folders so that at most `keep` remain (other entries are left
// alone). Run after a new checkpoint is complete, so a crash never leaves fewer than before.
void rotate_checkpoints(const std::string& project_dir, int64_t keep);

// Refuses (InvalidArgument, naming what is there) a save_state target that publish_checkpoint would
// destroy without it being ours: a file, or a folder holding anything but a checkpoint's files (the
// parts' and those its manifest records). Nothing is changed. A missing or empty folder, or an
// earlier checkpoint, may be replaced.
void check_checkpoint_target(const std::string& target);

// What a folder holds (nothing where it does not exist), to tell afterwards what was written into it:
// a save's pre-hooks write into the checkpoint's folder, as Accelerate's do into output_dir, while the
// checkpoint is written beside it; what they wrote moves over before the new folder replaces it.
class FolderSnapshot {
 public:
  explicit FolderSnapshot(const std::string& folder);
  // Moves what was written into the folder since the snapshot (a file or other entry added, replaced
  // or rewritten: another inode, size or modification time; a folder added empty) into
  // `destination`, at the same paths under it.
  void move_written_since(const std::string& destination) const;

 private:
  struct Stamp {
    uint64_t device, inode;
    int64_t size, modified_ns;
    bool operator==(const Stamp& other) const;
  };
  static std::optional<Stamp> stamp_of(const std::string& path);
  std::string folder_;
  std::map<std::string, Stamp> entries_;  // every entry but folders, by its path under the folder
  std::set<std::string> folders_;
};

// The records (file_records.h) of the files the pre-hooks wrote into a staging folder, by their paths
// relative to it: every regular file but the parts' (and their temporaries) and `marker`.
nlohmann::json pre_hook_file_records(const std::string& staging, const std::string& marker);

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
