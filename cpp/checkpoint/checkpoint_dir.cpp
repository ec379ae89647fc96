#include "checkpoint/checkpoint_dir.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <system_error>
#include <vector>

#include "checkpoint/file_records.h"
#include "checkpoint/state_files.h"
#include "common/error.h"
#include "common/files.h"

namespace acc {
namespace fs = std::filesystem;

std::optional<int64_t> checkpoint_number(const std::string& name) {
  const std::string prefix = "checkpoint_";
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return std::nullopt;
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + name.size();
  if (*first == '0' && last - first > 1) return std::nullopt;  // "checkpoint_00" is not a name saves give
  int64_t number = 0;
  const auto [end, error] = std::from_chars(first, last, number);
  if (error != std::errc() || end != last || number < 0) return std::nullopt;
  return number;
}

bool holds_python_accelerate_state(const std::string& folder) {
  std::error_code ec;
  return fs::exists(fs::path(folder) / kPythonAccelerateRandomStates, ec);
}

namespace {

std::map<int64_t, fs::path> numbered_checkpoints(const std::string& project_dir) {
  std::map<int64_t, fs::path> found;
  const fs::path root = fs::path(project_dir) / "checkpoints";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return found;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (!entry.is_directory(ec)) continue;
    if (auto number = checkpoint_number(entry.path().filename().string())) found.emplace(*number, entry.path());
  }
  if (ec) fail(Status::Io, "cannot list '", root.string(), "': ", ec.message());
  return found;
}

// The names save_state writes (the CheckpointPart::file() of every part): model[_i].safetensors,
// optimizer[_i].safetensors (and their _shard_<rank> files), scheduler[_i].json, random_states_<rank>.safetensors,
// dataloader_state_<rank>.json, scaler.json, custom_checkpoint_<i>.bin (registered objects) and
// .safetensors (averaged models), ddp_comm_hook_<rank>.safetensors (PowerSGD) and the manifest.
bool is_checkpoint_file(const std::string& name) {
  static const std::regex pattern(
      R"((model|optimizer)(_[0-9]+)?(_shard_[0-9]+)?\.safetensors|scheduler(_[0-9]+)?\.json|random_states_[0-9]+\.safetensors|)"
      R"(dataloader_state_[0-9]+\.json|scaler\.json|custom_checkpoint_[0-9]+\.(bin|safetensors)|)"
      R"(ddp_comm_hook_[0-9]+\.safetensors)");
  return name == kCheckpointManifest || std::regex_match(name, pattern);
}

// The entries a checkpoint folder's manifest records (files by their records, and the pre-hooks' empty
// folders as "name/"), with their recorded sizes (-1 for a folder); none without a readable manifest
// that records its files and whose checksum holds (an older checkpoint's, or a damaged or edited one).
std::optional<std::map<std::string, int64_t>> recorded_entries(const fs::path& folder) {
  try {
    const std::string path = (folder / kCheckpointManifest).string();
    const nlohmann::json manifest = read_json(path);
    check_manifest_checksum(manifest, path);
    if (!manifest.is_object() || !manifest.contains(kManifestFilesKey) || !manifest[kManifestFilesKey].is_object())
      return std::nullopt;
    std::map<std::string, int64_t> entries;
    for (const auto& [name, record] : manifest[kManifestFilesKey].items())
      entries[name] = record.is_object() && record.contains("size") && record["size"].is_number_unsigned()
                          ? record["size"].get<int64_t>()
                          : -1;
    return entries;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The first entry under `folder` that no save wrote (its path relative to the folder), or none: what
// a save replacing the folder, or a rotation deleting it, would destroy that is not ours. Where the
// manifest records its files, a save's are those (the parts' by name, the pre-hooks' also by size: one
// changed since is the user's) and the manifest; a subfolder is a save's if the manifest records it or
// files in it, and holds nothing else. Without such a manifest only the parts' names at the top are
// ours. `ec` is set where the folder cannot be listed.
std::optional<std::string> first_foreign_entry(const fs::path& folder, std::error_code& ec) {
  const auto recorded = recorded_entries(folder);
  for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path relative = it->path().lexically_relative(folder);
    const std::string name = relative.generic_string();
    const bool top = !relative.has_parent_path();
    std::error_code kind_ec;
    const fs::file_status status = it->symlink_status(kind_ec);
    if (!kind_ec && fs::is_directory(status)) {
      const auto inside =
          recorded ? recorded->lower_bound(name + "/") : std::map<std::string, int64_t>::const_iterator();
      if (!recorded || inside == recorded->end() || inside->first.rfind(name + "/", 0) != 0) return name;
      continue;
    }
    if (kind_ec || !fs::is_regular_file(status)) return name;
    if (top && name == kCheckpointManifest) continue;
    if (!recorded) {
      if (top && is_checkpoint_file(name)) continue;
      return name;
    }
    const auto found = recorded->find(name);
    if (found == recorded->end()) return name;
    if (top && is_checkpoint_file(name)) continue;  // a part's: its size is the part's concern at load
    std::error_code size_ec;
    const auto size = it->file_size(size_ec);
    if (size_ec || found->second != static_cast<int64_t>(size)) return name;
  }
  return std::nullopt;
}

// Whether a folder holds nothing but what saves write (an empty one included).
bool holds_only_checkpoint_files(const fs::path& folder) {
  std::error_code ec;
  const auto foreign = first_foreign_entry(folder, ec);
  return !ec && !foreign;
}

// Whether a checkpoint_<i> folder is complete: its manifest, written last, is there.
bool complete_checkpoint(const fs::path& folder) {
  std::error_code ec;
  return fs::exists(folder / kCheckpointManifest, ec);
}

void remove_all_or_fail(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) fail(Status::Io, "cannot delete '", path.string(), "': ", ec.message());
}

}  // namespace

std::string automatic_checkpoint_dir(const std::string& project_dir, int64_t iteration) {
  require(!project_dir.empty(), "automatic checkpoint naming needs project_dir");
  return (fs::path(project_dir) / "checkpoints" / ("checkpoint_" + std::to_string(iteration))).string();
}

std::optional<std::string> newest_checkpoint(const std::string& project_dir) {
  const auto found = numbered_checkpoints(project_dir);
  for (auto it = found.rbegin(); it != found.rend(); ++it)
    if (complete_checkpoint(it->second) || holds_python_accelerate_state(it->second.string()))
      return it->second.string();
  return std::nullopt;
}

void rotate_checkpoints(const std::string& project_dir, int64_t keep, const std::string& written) {
  keep = std::max<int64_t>(keep, 1);  // 0 or less: Accelerate's rotation deletes every other one
  auto found = numbered_checkpoints(project_dir);
  // Only complete checkpoints of ours are counted and rotated, the one just written kept whatever its
  // number: a checkpoint_<i> folder without a manifest, or holding anything a save does not write, is
  // left alone.
  for (auto it = found.begin(); it != found.end();) {
    if (it->second.filename() == fs::path(written).filename()) {
      it = found.erase(it);
      continue;
    }
    const bool complete = complete_checkpoint(it->second);
    if (complete && holds_only_checkpoint_files(it->second)) {
      ++it;
      continue;
    }
    std::fprintf(stderr, "accelerate: total_limit: '%s' %s; it is kept and not counted\n", it->second.string().c_str(),
                 complete ? "holds files a save does not write" : "is not a complete checkpoint (no manifest)");
    it = found.erase(it);
  }
  while (static_cast<int64_t>(found.size()) + 1 > keep) {
    // Renamed first, so an interrupted delete never leaves a half-deleted checkpoint_<i> behind.
    const fs::path doomed = found.begin()->second;
    const fs::path hidden = doomed.parent_path() / ("." + doomed.filename().string() + ".deleting");
    std::error_code ec;
    fs::remove_all(hidden, ec);
    fs::rename(doomed, hidden, ec);
    if (ec) fail(Status::Io, "cannot delete the old checkpoint '", doomed.string(), "': ", ec.message());
    remove_all_or_fail(hidden);
    found.erase(found.begin());
  }
}

void remove_interrupted_saves(const std::string& project_dir) {
  static const std::regex leftover(R"(\.checkpoint_[0-9]+\.(incomplete|incomplete\.old|deleting))");
  const fs::path root = fs::path(project_dir) / "checkpoints";
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (std::regex_match(it->path().filename().string(), leftover)) doomed.push_back(it->path());
  for (const auto& path : doomed) remove_all_or_fail(path);
}

void check_checkpoint_target(const std::string& target) {
  std::error_code ec;
  const auto status = fs::symlink_status(target, ec);
  if (!fs::exists(status)) return;
  if (!fs::is_directory(status))
    fail(Status::InvalidArgument, "save_state: '", target, "' ",
         fs::is_symlink(status) ? "is a link (a save replaces the folder itself; name the folder it points to)"
                                : "exists and is not a folder",
         " (nothing was changed)");
  const auto foreign = first_foreign_entry(target, ec);
  if (ec) fail(Status::Io, "save_state: cannot list '", target, "': ", ec.message());
  if (foreign)
    fail(Status::InvalidArgument, "save_state: '", target, "' holds '", *foreign, "', which is not part of a ",
         "checkpoint; a save replaces the whole folder, so it only writes into a new or empty folder or an earlier ",
         "checkpoint (nothing was changed)");
}

bool FolderSnapshot::Stamp::operator==(const Stamp& other) const {
  return device == other.device && inode == other.inode && size == other.size && modified_ns == other.modified_ns &&
         changed_ns == other.changed_ns;
}

std::optional<FolderSnapshot::Stamp> FolderSnapshot::stamp_of(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  auto ns = [](const timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec; };
  return Stamp{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<int64_t>(st.st_size),
               ns(st.st_mtim), ns(st.st_ctim)};
}

FolderSnapshot::FolderSnapshot(const std::string& folder) : folder_(folder) {
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(folder, ec))) return;
  for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().lexically_relative(folder).generic_string();
    std::error_code kind_ec;
    if (fs::is_directory(it->symlink_status(kind_ec)) && !kind_ec) {
      folders_.insert(name);
    } else if (const auto stamp = stamp_of(it->path().string())) {
      entries_.emplace(name, *stamp);
    }
  }
  if (ec) fail(Status::Io, "save_state: cannot list '", folder, "': ", ec.message());
}

FolderSnapshot::Written FolderSnapshot::written_since() const {
  Written written;
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(folder_, ec))) return written;  // a hook removed it, or none made it
  for (fs::recursive_directory_iterator it(folder_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().lexically_relative(folder_).generic_string();
    std::error_code kind_ec;
    if (fs::is_directory(it->symlink_status(kind_ec)) && !kind_ec) {
      if (!folders_.count(name)) written.folders.push_back(name);
      continue;
    }
    // A file rewritten in place keeps its inode, and a copy may keep the size and modification time
    // (cp -p, shutil.copy2): the change time moves whatever a program does.
    const auto before = entries_.find(name);
    const auto now = stamp_of(it->path().string());
    if (before == entries_.end() || !now || !(*now == before->second)) written.entries.push_back(name);
  }
  if (ec) fail(Status::Io, "save_state: cannot list '", folder_, "': ", ec.message());
  return written;
}

FolderSnapshot::Written FolderSnapshot::move_written_since(const std::string& destination) const {
  const Written written = written_since();
  std::error_code ec;
  for (const std::string& name : written.folders) {
    fs::create_directories(fs::path(destination) / name, ec);
    if (ec)
      fail(Status::Io, "save_state: cannot create '", (fs::path(destination) / name).string(), "': ", ec.message());
  }
  for (const std::string& name : written.entries) {
    const fs::path from = fs::path(folder_) / name, to = fs::path(destination) / name;
    fs::create_directories(to.parent_path(), ec);
    if (!ec) fs::rename(from, to, ec);
    if (ec)
      fail(Status::Io, "save_state: cannot move '", from.string(), "', which a pre-hook wrote, into the checkpoint ",
           "being written: ", ec.message());
  }
  remove_added_folders(written);
  return written;
}

void FolderSnapshot::discard_written_since() const {
  const Written written = written_since();
  for (const std::string& name : written.entries) {
    std::error_code ignored;
    fs::remove(fs::path(folder_) / name, ignored);
  }
  remove_added_folders(written);
}

void FolderSnapshot::remove_added_folders(const Written& written) const {
  // Deepest first (a folder is listed before what it holds); only emptied ones go.
  for (auto it = written.folders.rbegin(); it != written.folders.rend(); ++it) {
    std::error_code ignored;
    fs::remove(fs::path(folder_) / *it, ignored);
  }
}

void clear_automatic_target(const std::string& target) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(target, ec))) return;
  if (fs::is_directory(fs::symlink_status(target, ec)) && fs::is_empty(target, ec)) return;
  if (!fs::is_directory(fs::symlink_status(target, ec)) || fs::exists(fs::path(target) / kCheckpointManifest, ec))
    fail(Status::InvalidArgument, "checkpoint folder '", target, "' already exists; set iteration past it");
  // A save killed while its pre-hooks ran leaves its staging folder beside the one made for the hooks;
  // without it the folder is the user's, refused as Accelerate refuses any folder there.
  if (!fs::exists(fs::symlink_status(staging_dir(target), ec)))
    fail(Status::InvalidArgument, "checkpoint folder '", target,
         "' already exists and is not a checkpoint (nor what an interrupted save left); set iteration past it, ",
         "or move the folder");
  const fs::path path(target);
  fs::path aside;
  for (int n = 0;; ++n) {
    aside = path.parent_path() / ("." + path.filename().string() + ".interrupted" + (n ? "_" + std::to_string(n) : ""));
    if (!fs::exists(fs::symlink_status(aside, ec))) break;
  }
  fs::rename(path, aside, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)  // another node's writer moved it first
    fail(Status::Io, "save_state: cannot move the interrupted save's '", target, "' aside: ", ec.message());
  if (!ec)
    std::fprintf(stderr, "accelerate: '%s' is what a save stopped while its pre-hooks ran left behind; moved to '%s'\n",
                 target.c_str(), aside.string().c_str());
}

nlohmann::json pre_hook_file_records(const std::string& staging, const FolderSnapshot::Written& written) {
  nlohmann::json records = nlohmann::json::object();
  for (const std::string& name : written.folders)
    if (fs::is_empty(fs::path(staging) / name)) records[name + "/"] = nlohmann::json::object();
  for (const std::string& name : written.entries) {
    if (name == kCheckpointManifest) continue;  // the save's own, written over it last
    const fs::path path = fs::path(staging) / name;
    std::error_code ec;
    // What a later save or rotation could not tell from the user's (a link's target is not the checkpoint's).
    if (!fs::is_regular_file(fs::symlink_status(path, ec)))
      fail(Status::InvalidArgument, "save_state: the pre-hooks wrote '", name, "', which is not a regular file or ",
           "folder; a checkpoint holds files and folders only (nothing was published)");
    records[name] = file_record(path.string());
  }
  return records;
}

std::string checkpoint_folder(const std::string& target) {
  std::error_code ec;
  fs::path path = fs::absolute(target, ec).lexically_normal();
  if (ec) fail(Status::Io, "save_state: cannot resolve '", target, "': ", ec.message());
  if (!path.has_filename()) path = path.parent_path();  // "dir/" -> "dir"
  if (!path.has_filename() || path == path.root_path())
    fail(Status::InvalidArgument, "save_state: '", target, "' is the root folder; name a folder of its own");
  // Refused before anything is written (the staging folder's name is cut to fit: staging_dir).
  if (path.filename().string().size() > kFileNameMax)
    fail(Status::InvalidArgument, "save_state: the folder name of '", target, "' is longer than a file name may be ",
         "(255 bytes)");
  // A save replaces the folder: the process's current folder would go with it.
  const fs::path here = fs::current_path(ec).lexically_normal();
  if (!ec && std::mismatch(path.begin(), path.end(), here.begin(), here.end()).first == path.end())
    fail(Status::InvalidArgument, "save_state: '", target, "' is or holds the current folder, which a save would ",
         "replace; name a folder of its own");
  return path.string();
}

std::string staging_dir(const std::string& folder) {
  const fs::path path(folder);
  // ".<name>.incomplete.old" (publish_checkpoint's) must fit in a file name: a longer name is cut.
  const std::string aside = name_with_suffix_fitted("." + path.filename().string(), ".incomplete.old");
  return (path.parent_path() / aside.substr(0, aside.size() - (sizeof(".old") - 1))).string();
}

namespace {

// Deletes `earlier` (the checkpoint a save replaced, or what a stopped one left at `aside`'s name);
// one that cannot be deleted (a write-protected folder) is moved out of the way of later saves, to
// ".<target's name>.replaced[_N]" beside it. Empty when deleted, else what to tell the user.
std::string delete_earlier(const fs::path& earlier, const fs::path& target) {
  std::error_code ec;
  fs::remove_all(earlier, ec);
  if (!ec) return "";
  const std::string why = ec.message();
  for (int n = 0; n < 1000; ++n) {
    const fs::path kept =
        target.parent_path() /
        name_with_suffix_fitted("." + target.filename().string(), n ? ".replaced_" + std::to_string(n) : ".replaced");
    if (fs::exists(fs::symlink_status(kept, ec))) continue;
    fs::rename(earlier, kept, ec);
    if (ec) break;
    return "cannot delete the checkpoint it replaced (" + why + "); it is kept as '" + kept.string() + "'";
  }
  return "cannot delete '" + earlier.string() + "' (" + why + ")";
}

// delete_earlier for the checkpoint just replaced: a failure (the new one is in place) says so.
void delete_replaced(const fs::path& earlier, const fs::path& target) {
  const std::string kept = delete_earlier(earlier, target);
  if (!kept.empty()) fail(Status::Io, "save_state: ", kept);
}

}  // namespace

void publish_checkpoint(const std::string& staging, const std::string& target) {
  std::error_code ec;
  const fs::path aside = fs::path(staging).string() + ".old";
  // Every file on disk before the folder replaces the earlier checkpoint (fsync: a crash or a
  // write-back failure never leaves a checkpoint in place that was never written).
  sync_to_disk(staging, target);
  const bool replacing = fs::exists(target, ec);
  // Swapped in one step where the file system can: a process killed between two renames would
  // leave nothing at the target. The earlier checkpoint is then at the staging name, removed.
  if (replacing && ::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    sync_folder_of(target, target);
    delete_replaced(staging, target);
    return;
  }
  if (replacing) {
    if (fs::exists(fs::symlink_status(aside, ec))) static_cast<void>(delete_earlier(aside, target));
    fs::rename(target, aside, ec);
    if (ec) fail(Status::Io, "cannot move the earlier checkpoint '", target, "' aside: ", ec.message());
  }
  fs::rename(staging, target, ec);
  if (ec) {
    std::error_code ignored;
    if (replacing) fs::rename(aside, target, ignored);  // put the earlier one back
    fail(Status::Io, "cannot move the new checkpoint into '", target, "': ", ec.message());
  }
  sync_folder_of(target, target);
  if (replacing) delete_replaced(aside, target);
}

}  // namespace acc
