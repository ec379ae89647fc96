#include "checkpoint/state_files.h"

#include <filesystem>

#include "common/files.h"
#include "common/json_input.h"

namespace acc {

std::string join_path(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

std::string read_file(const std::string& path) {
  auto bytes = read_whole_file(path);
  if (!bytes) fail(Status::Io, "checkpoint file '", path, "' is missing or unreadable");
  return std::move(*bytes);
}

nlohmann::json read_json(const std::string& path) {
  return parse_json_input(read_file(path), "checkpoint file '" + path + "'", Status::Io);
}

}  // namespace acc
