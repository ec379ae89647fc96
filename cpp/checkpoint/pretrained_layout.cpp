#include "checkpoint/pretrained_layout.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "common/error.h"
#include "common/files.h"
#include "common/json_input.h"

namespace acc {

namespace fs = std::filesystem;
using nlohmann::json;

int64_t parse_size(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) ++digits;
  require(digits > 0, "size '", text, "' must start with a number (e.g. \"10GB\", \"500MB\")");
  double number = 0;
  try {
    number = std::stod(text.substr(0, digits));
  } catch (const std::exception&) {
    fail(Status::InvalidArgument, "size '", text, "' is not a number");
  }
  std::string unit = text.substr(digits);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::map<std::string, double> units = {{"", 1},         {"B", 1},          {"KB", 1e3},       {"MB", 1e6},
                                               {"GB", 1e9},     {"TB", 1e12},      {"KIB", 1024.0},   {"MIB", 1048576.0},
                                               {"GIB", 1073741824.0}, {"TIB", 1099511627776.0}};
  auto it = units.find(unit);
  require(it != units.end(), "unknown size unit in '", text, "' (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
  require(number * it->second >= 1, "size '", text, "' must be at least one byte");
  require(number * it->second < 9.2e18, "size '", text, "' is too large");
  return static_cast<int64_t>(number * it->second);
}

// Where save_sharded writes a sharded save's files before moving them in (ours by its name).
constexpr const char* kStagingFolder = ".accelerate-save-staging";

std::vector<std::string> save_sharded(const std::string& dir, const NamedTensors& tensors, int64_t max_shard_bytes) {
  require(max_shard_bytes > 0, "max_shard_size must be positive");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(Status::Io, "cannot create '", dir, "': ", ec.message());
  // Hugging Face's rule: a new shard when the next tensor would overflow a non-empty one.
  std::vector<NamedTensors> shards(1);
  int64_t current = 0, total = 0;
  for (const auto& entry : tensors) {
    const int64_t bytes = static_cast<int64_t>(entry.second.nbytes());
    if (current > 0 && current + bytes > max_shard_bytes) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(entry);
    current += bytes;
    total += bytes;
  }
  std::vector<std::string> written;
  const std::string staging = dir + "/" + kStagingFolder;
  fs::remove_all(staging, ec);  // a stopped save's
  if (shards.size() == 1) {
    save_safetensors(dir + "/model.safetensors", shards[0]);
    written.push_back("model.safetensors");
  } else {
    // The shards are written into a staging folder first, while the previous save stays whole and
    // loadable; then its index goes, the new shards are renamed in and the new index written last. A
    // save stopped on the way leaves the old save, or a folder without an index (refused by loaders),
    // never new shards under the old index.
    fs::create_directories(staging, ec);
    if (ec) fail(Status::Io, "cannot create '", staging, "': ", ec.message());
    json weight_map = json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
      save_safetensors(staging + "/" + name, shards[i]);
      for (const auto& entry : shards[i]) weight_map[entry.first] = name;
      written.push_back(name);
    }
    fs::remove(dir + "/model.safetensors.index.json", ec);
    for (const auto& name : written) {
      fs::rename(staging + "/" + name, dir + "/" + name, ec);
      if (ec) fail(Status::Io, "cannot move '", name, "' into '", dir, "': ", ec.message());
    }
    fs::remove_all(staging, ec);
    const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file_atomically(dir + "/model.safetensors.index.json", index.dump(2) + "\n");
    written.push_back("model.safetensors.index.json");
  }
  // Files of an earlier save that this one did not write would be picked up by loaders: remove
  // them, and only them (a user's model_best.safetensors beside them stays). An earlier index goes
  // first: until it does, loaders read the earlier save through it, whole; once it is gone, this
  // one. (Its shards first would leave an index naming missing files.) Also the temporary files of
  // a save that was stopped (write_through_temporary's).
  auto stale = [&](const std::string& name) {
    return std::find(written.begin(), written.end(), name) == written.end();
  };
  if (stale("model.safetensors.index.json")) fs::remove(dir + "/model.safetensors.index.json", ec);
  for (const auto& file : fs::directory_iterator(dir, ec)) {
    const std::string name = file.path().filename().string();
    const bool temporary = name == "model.safetensors.tmp" || name == "model.safetensors.index.json.tmp";
    if ((is_pretrained_file_name(name) && stale(name)) || temporary) fs::remove(file.path(), ec);
  }
  return written;
}

bool is_pretrained_file_name(const std::string& name) {
  if (name == "model.safetensors" || name == "model.safetensors.index.json") return true;
  // model-00001-of-00003.safetensors
  const std::string head = "model-", middle = "-of-", tail = ".safetensors";
  if (name.size() != head.size() + 5 + middle.size() + 5 + tail.size()) return false;
  auto digits = [&](size_t at) {
    return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(at), name.begin() + static_cast<std::ptrdiff_t>(at + 5),
                       [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  };
  return name.compare(0, head.size(), head) == 0 && digits(head.size()) &&
         name.compare(head.size() + 5, middle.size(), middle) == 0 && digits(head.size() + 5 + middle.size()) &&
         name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
}

NamedTensors load_sharded(const std::string& path) {
  std::error_code ec;
  std::string file = path;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(path + "/model.safetensors.index.json")) file = path + "/model.safetensors.index.json";
    else if (fs::exists(path + "/model.safetensors")) file = path + "/model.safetensors";
    else fail(Status::Io, "'", path, "' holds neither model.safetensors nor model.safetensors.index.json");
  }
  if (file.size() > 5 && file.substr(file.size() - 5) == ".json") {
    const auto text = read_whole_file(file);
    if (!text) fail(Status::Io, "cannot open '", file, "'");
    const json index = parse_json_input(*text, "'" + file + "'", Status::Io);
    if (!index.contains("weight_map") || !index["weight_map"].is_object())
      fail(Status::Io, "'", file, "' has no weight_map");
    const std::string dir = fs::path(file).parent_path().string();
    std::vector<std::string> shards;
    for (const auto& [name, shard] : index["weight_map"].items()) {
      // A shard is a file beside the index, named by a string.
      if (!shard.is_string() || shard.get<std::string>().empty() ||
          shard.get<std::string>().find('/') != std::string::npos || shard.get<std::string>() == ".." ||
          shard.get<std::string>() == ".")
        fail(Status::Io, "'", file, "': weight_map[\"", name, "\"] must name a file beside the index, got ", shard.dump());
      if (std::find(shards.begin(), shards.end(), shard.get<std::string>()) == shards.end()) shards.push_back(shard);
    }
    std::sort(shards.begin(), shards.end());
    NamedTensors all;
    for (const auto& shard : shards)
      for (auto& entry : load_safetensors(dir + "/" + shard).tensors) all.push_back(std::move(entry));
    return all;
  }
  return load_safetensors(file).tensors;
}

}  // namespace acc
