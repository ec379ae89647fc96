#include "checkpoint/checkpoint_dir.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include "common/error.h"

namespace acc {
namespace fs = std::filesystem;
namespace {

// checkpoint_<digits> -> the number; anything else -> none.
std::optional<int64_t> checkpoint_number(const std::string& name) {
  const std::string prefix = "checkpoint_";
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size() || name.size() > prefix.size() + 18) return std::nullopt;
  const std::string digits = name.substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  return std::stoll(digits);
}

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
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    std::error_code ec;
    if (fs::exists(it->second / kCheckpointManifest, ec)) return it->second.string();
  }
  return std::nullopt;
}

void rotate_checkpoints(const std::string& project_dir, int64_t keep) {
  require(keep >= 1, "total_limit must be at least 1, got ", keep);
  auto found = numbered_checkpoints(project_dir);
  while (static_cast<int64_t>(found.size()) > keep) {
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

std::string staging_dir(const std::string& target) {
  fs::path path(target);
  while (!path.empty() && path.filename().empty()) path = path.parent_path();  // "dir/" -> "dir"
  return (path.parent_path() / ("." + path.filename().string() + ".incomplete")).string();
}

void publish_checkpoint(const std::string& staging, const std::string& target) {
  std::error_code ec;
  const fs::path aside = fs::path(staging).string() + ".old";
  const bool replacing = fs::exists(target, ec);
  if (replacing) {
    remove_all_or_fail(aside);
    fs::rename(target, aside, ec);
    if (ec) fail(Status::Io, "cannot move the earlier checkpoint '", target, "' aside: ", ec.message());
  }
  fs::rename(staging, target, ec);
  if (ec) {
    std::error_code ignored;
    if (replacing) fs::rename(aside, target, ignored);  // put the earlier one back
    fail(Status::Io, "cannot move the new checkpoint into '", target, "': ", ec.message());
  }
  if (replacing) remove_all_or_fail(aside);
}

}  // namespace acc
