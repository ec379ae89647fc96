#include "checkpoint/pretrained_layout.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "checkpoint/safetensors.h"
#include "common/error.h"
#include "common/files.h"
#include "common/json_input.h"
#include "common/text.h"

namespace acc {

namespace fs = std::filesystem;
using nlohmann::json;

int64_t parse_size(const std::string& given) {
  const std::string text = trimmed(given);  // "4 KB" as huggingface_hub's parse_size_to_int takes it
  // The unit is the letters at the end; the number before it is Python's float() ("1.5e-1MB", "1e5").
  size_t letters = text.size();
  while (letters > 0 && std::isalpha(static_cast<unsigned char>(text[letters - 1]))) --letters;
  const std::string digits = trimmed(text.substr(0, letters));
  require(!digits.empty(), "size '", text, "' must start with a number (e.g. \"10GB\", \"500MB\")");
  double number = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
  require(error == std::errc() && end == digits.data() + digits.size() && std::isfinite(number), "size '", text,
          "' does not start with a number (e.g. \"10GB\", \"1.5e-1MB\")");
  const std::string unit = uppercase(text.substr(letters));
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
constexpr const char* kIndexName = "model.safetensors.index.json";

namespace {

// The shard files an index names (each a plain name beside the index), sorted; Io errors name the file.
std::vector<std::string> shards_of_index(const std::string& index_file) {
  const auto text = read_whole_file(index_file);
  if (!text) fail(Status::Io, "cannot open '", index_file, "'");
  const json index = parse_json_input(*text, "'" + index_file + "'", Status::Io);
  if (!index.contains("weight_map") || !index["weight_map"].is_object())
    fail(Status::Io, "'", index_file, "' has no weight_map");
  std::vector<std::string> shards;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string() || shard.get<std::string>().empty() ||
        shard.get<std::string>().find('/') != std::string::npos || shard.get<std::string>() == ".." ||
        shard.get<std::string>() == ".")
      fail(Status::Io, "'", index_file, "': weight_map[\"", name, "\"] must name a file beside the index, got ",
           shard.dump());
    if (std::find(shards.begin(), shards.end(), shard.get<std::string>()) == shards.end()) shards.push_back(shard);
  }
  std::sort(shards.begin(), shards.end());
  return shards;
}

// Moves a staged sharded save into `dir`: the earlier index out, the shards its index names in,
// the index last. The staged index is written after every shard, so its presence says the staged
// save is whole; run again after a stop, this completes the move (a shard already moved is no
// longer staged). Any failure stops it before the index moves, with the staged files kept.
void move_staged_save_in(const std::string& dir) {
  const std::string staging = dir + "/" + kStagingFolder, staged_index = staging + "/" + kIndexName;
  std::error_code ec;
  if (!fs::is_regular_file(staged_index, ec)) return;
  const std::vector<std::string> shards = shards_of_index(staged_index);
  // Gone before any shard moves (shards of this save under the earlier index would mix two saves).
  if (!fs::remove(dir + "/" + kIndexName, ec) && ec)
    fail(Status::Io, "cannot remove the earlier '", kIndexName, "' in '", dir, "': ", ec.message());
  for (const auto& shard : shards) {
    const std::string staged = staging + "/" + shard, in_place = dir + "/" + shard;
    if (fs::exists(staged, ec)) fs::rename(staged, in_place, ec);
    std::error_code there;
    if (ec || !fs::is_regular_file(in_place, there))
      fail(Status::Io, "cannot move '", shard, "' into '", dir, "'", ec ? ": " + ec.message() : std::string());
  }
  fs::rename(staged_index, dir + "/" + kIndexName, ec);
  if (ec) fail(Status::Io, "cannot move '", kIndexName, "' into '", dir, "': ", ec.message());
  sync_folder_of(dir + "/" + kIndexName, dir);  // the moves on disk (each file is: write_through_temporary)
  fs::remove_all(staging, ec);
}

}  // namespace

std::vector<std::string> save_sharded(const std::string& dir, const NamedTensors& tensors, int64_t max_shard_bytes) {
  require(max_shard_bytes > 0, "max_shard_size must be positive");
  std::error_code ec;
  FolderMadeForWrite made;
  made.make(dir, "the model folder");
  // huggingface_hub's split_state_dict_into_shards_factory: a tensor larger than a shard gets one of
  // its own (listed then, the current shard staying open); a new shard when the next tensor would
  // overflow the current one; the current one last.
  std::vector<NamedTensors> shards;
  NamedTensors current;
  int64_t current_bytes = 0, total = 0;
  for (const auto& entry : without_aliases(tensors)) {
    const int64_t bytes = static_cast<int64_t>(entry.second.nbytes());
    total += bytes;
    if (bytes > max_shard_bytes) {
      shards.push_back({entry});
      continue;
    }
    if (current_bytes + bytes > max_shard_bytes) {
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(entry);
    current_bytes += bytes;
  }
  if (!current.empty() || shards.empty()) shards.push_back(std::move(current));
  std::vector<std::string> written;
  const std::string staging = dir + "/" + kStagingFolder;
  // A save stopped while moving its shards in is completed first (the folder then holds one save
  // whole, which this one replaces); one stopped while writing them left the earlier save standing.
  move_staged_save_in(dir);
  fs::remove_all(staging, ec);
  if (shards.size() == 1) {
    save_safetensors(dir + "/model.safetensors", shards[0]);
    written.push_back("model.safetensors");
  } else {
    // The shards, then their index, are written into a staging folder while the previous save
    // stays whole and loadable; then they are moved in (move_staged_save_in). A save stopped on the
    // way leaves the earlier save, or the new one, whole: readers and the next save complete a
    // stopped move (load_sharded), never read new shards under the old index.
    fs::create_directories(staging, ec);
    if (ec) fail(Status::Io, "cannot create '", staging, "': ", ec.message());
    json weight_map = json::object();
    try {
      for (size_t i = 0; i < shards.size(); ++i) {
        char name[64];
        std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
        save_safetensors(staging + "/" + name, shards[i]);
        for (const auto& entry : shards[i]) weight_map[entry.first] = name;
        written.push_back(name);
      }
      const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
      write_file_atomically(staging + "/" + kIndexName, index.dump(2) + "\n");
    } catch (const Error& e) {
      fs::remove_all(staging, ec);  // a failed save (a full disk) leaves no shards behind
      fail_naming_final(e, staging, dir);
    } catch (...) {
      fs::remove_all(staging, ec);
      throw;
    }
    written.push_back(kIndexName);
    move_staged_save_in(dir);
  }
  // Files of an earlier save that this one did not write would be picked up by loaders: remove
  // them, and only them (a user's model_best.safetensors beside them stays). An earlier index goes
  // first: until it does, loaders read the earlier save through it, whole; once it is gone, this
  // one. (Its shards first would leave an index naming missing files.) Also the temporary files of
  // a save that was stopped (write_through_temporary's).
  auto stale = [&](const std::string& name) {
    return std::find(written.begin(), written.end(), name) == written.end();
  };
  if (stale(kIndexName)) fs::remove(dir + "/" + kIndexName, ec);
  for (const auto& file : fs::directory_iterator(dir, ec)) {
    const std::string name = file.path().filename().string();
    const bool temporary = is_temporary_of(name, "model.safetensors") || is_temporary_of(name, kIndexName);
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

namespace {

// The tensors of the shards `index_file` names, each read from beside the index, or from `moved_to`
// where it is not there (a staged save whose move was stopped: its index and the shards not moved
// yet are staged, the others are in the folder).
NamedTensors load_index(const std::string& index_file, const std::string& moved_to) {
  const std::vector<std::string> shards = shards_of_index(index_file);
  const std::string beside = fs::path(index_file).parent_path().string();
  NamedTensors all;
  std::error_code ec;
  for (const auto& shard : shards) {
    const std::string here = beside + "/" + shard;
    const std::string file = fs::exists(here, ec) ? here : moved_to + "/" + shard;
    for (auto& entry : load_safetensors(file).tensors) all.push_back(std::move(entry));
  }
  return all;
}

}  // namespace

NamedTensors load_sharded(const std::string& path) {
  std::error_code ec;
  std::string file = path;
  if (fs::is_directory(path, ec)) {
    const std::string staged_index = path + "/" + kStagingFolder + "/" + kIndexName;
    // A single file first, as transformers' from_pretrained and Accelerate's load_checkpoint_in_model
    // read a folder: a sharded save replacing a single file removes that file only after its index
    // is in place, so every reader reads the earlier save until then, and the new one after.
    if (fs::exists(path + "/model.safetensors", ec))
      file = path + "/model.safetensors";
    else if (fs::exists(path + "/" + kIndexName, ec))
      file = path + "/" + kIndexName;
    else if (fs::is_regular_file(staged_index, ec))
      return load_index(staged_index, path);
    else
      fail(Status::Io, "'", path, "' holds neither model.safetensors nor ", kIndexName);
  }
  if (file.size() > 5 && file.substr(file.size() - 5) == ".json")
    return load_index(file, fs::path(file).parent_path().string());
  return load_safetensors(file).tensors;
}

}  // namespace acc
