#include "parallel/merge_shards.h"

#include <nlohmann/json.hpp>

#include <ATen/ATen.h>

#include <filesystem>
#include <limits>
#include <stdexcept>
#include <unordered_map>

#include "checkpoint/data_checksum.h"
#include "checkpoint/pretrained_layout.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/save_identity.h"
#include "common/error.h"
#include "common/json_input.h"
#include "parallel/flat_layout.h"
#include "parallel/sharded_checkpoint_parts.h"

namespace acc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string& metadata_value(const SafetensorsContents& shard, const std::string& key, const std::string& path) {
  auto it = shard.metadata.find(key);
  if (it == shard.metadata.end())
    fail(Status::Io, "'", path, "' is not a model shard of a sharded checkpoint (no '", key, "' in its metadata)");
  return it->second;
}

// Empty for shards written before saves had an id.
std::string recorded_save_id(const SafetensorsContents& shard) {
  auto it = shard.metadata.find(kSaveIdKey);
  return it == shard.metadata.end() ? std::string() : it->second;
}

int64_t metadata_int(const SafetensorsContents& shard, const std::string& key, const std::string& path) {
  const std::string& text = metadata_value(shard, key, path);
  try {
    size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used == text.size() && value >= 0) return value;
  } catch (const std::exception&) {
  }
  fail(Status::Io, "'", path, "': metadata '", key, "' is not a count: '", text, "'");
}

// One parameter of a unit, as the layout records it.
struct LaidOut {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
};

struct Layout {
  std::vector<std::pair<int64_t, std::vector<LaidOut>>> units;  // (slice, parameters)
  std::vector<std::string> order;
};

Layout read_layout(const std::string& text, const std::string& path) {
  const json j = parse_json_input(text, "'" + path + "': its layout metadata", Status::Io);
  auto integer = [&](const json& value) {
    if (!value.is_number_integer()) throw std::invalid_argument(value.dump() + " is not a whole number");
    return value.get<int64_t>();
  };
  Layout layout;
  try {
    for (const auto& unit : j.at("units")) {
      std::vector<LaidOut> params;
      for (const auto& p : unit.at("params")) {
        LaidOut laid{p.at(0).get<std::string>(), {}, integer(p.at(2))};
        if (laid.name.empty()) throw std::invalid_argument("a parameter has no name");
        for (const auto& d : p.at(1)) laid.shape.push_back(integer(d));
        params.push_back(std::move(laid));
      }
      layout.units.emplace_back(integer(unit.at("slice")), std::move(params));
    }
    layout.order = j.at("order").get<std::vector<std::string>>();
  } catch (const std::exception& e) {  // json's, and the checks above
    fail(Status::Io, "'", path, "': malformed layout metadata: ", e.what());
  }
  return layout;
}

// Elements of `shape`, or -1 when a dimension is negative or the product overflows.
int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > std::numeric_limits<int64_t>::max() / d)) return -1;
    n *= d;
  }
  return n;
}

}  // namespace

NamedTensors merge_model_shards(const std::string& checkpoint_dir, size_t model_index) {
  const fs::path dir(checkpoint_dir);
  std::error_code ec;
  require(fs::exists(dir, ec), "'", checkpoint_dir, "' does not exist");
  require(fs::is_directory(dir, ec), "'", checkpoint_dir, "' is not a checkpoint folder");
  auto shard_path = [&](int64_t rank) { return (dir / shard_name("model", model_index, rank)).string(); };
  const std::string first = shard_path(0);
  if (!fs::exists(first) && model_index > 0 && fs::exists(dir / shard_name("model", 0, 0))) {
    size_t models = 1;
    while (models < model_index && fs::exists(dir / shard_name("model", models, 0))) ++models;
    fail(Status::InvalidArgument, "'", checkpoint_dir, "' holds the shards of ", models, " model",
         models == 1 ? "" : "s", " (indices 0 to ", models - 1, "); there is no model ", model_index);
  }
  if (!fs::exists(first))
    fail(Status::InvalidArgument, "'", checkpoint_dir, "' holds no model shards (", fs::path(first).filename().string(),
         "): merging is for checkpoints saved with state_dict_type SHARDED_STATE_DICT under zero_stage 3 (the ",
         "others hold the full weights already)");

  // Every shard is read and checked against the first before anything is put together.
  std::vector<SafetensorsContents> shards;
  shards.push_back(load_safetensors(first));
  const int64_t processes = metadata_int(shards[0], "num_processes", first);
  // Copies: `shards` grows below.
  const std::string layout_text = metadata_value(shards[0], "layout", first);
  const std::string save_id = recorded_save_id(shards[0]);
  if (metadata_value(shards[0], "zero_stage", first) != "3")
    fail(Status::Io, "'", first, "' is not a zero_stage 3 model shard");
  if (processes < 1 || processes > (1 << 20)) fail(Status::Io, "'", first, "' claims ", processes, " processes");
  for (int64_t r = 0; r < processes; ++r) {
    const std::string path = shard_path(r);
    if (r > 0) {
      if (!fs::exists(path))
        fail(Status::Io, "the shard of process ", r, " of ", processes, " is missing: '", path, "'");
      shards.push_back(load_safetensors(path));
    }
    const SafetensorsContents& shard = shards.back();
    if (metadata_int(shard, "process_index", path) != r)
      fail(Status::Io, "'", path, "' is the shard of process ", metadata_int(shard, "process_index", path),
           ", not of process ", r, " (renamed or swapped?)");
    if (r > 0 && (metadata_int(shard, "num_processes", path) != processes ||
                  metadata_value(shard, "layout", path) != layout_text || recorded_save_id(shard) != save_id))
      fail(Status::Io, "'", path, "' is not process ", r, "'s shard of the same save as '", first, "'");
    check_data_crc32(shard.metadata, shard.tensors, path);
  }
  const Layout layout = read_layout(layout_text, first);

  std::unordered_map<std::string, at::Tensor> merged;
  std::vector<std::unordered_map<std::string, at::Tensor>> by_name;
  for (const auto& shard : shards) by_name.emplace_back(shard.tensors.begin(), shard.tensors.end());
  for (size_t u = 0; u < layout.units.size(); ++u) {
    const auto& [slice, params] = layout.units[u];
    const std::string key = "unit." + std::to_string(u);
    std::vector<at::Tensor> slices;
    for (int64_t r = 0; r < processes; ++r) {
      auto it = by_name[static_cast<size_t>(r)].find(key);
      if (it == by_name[static_cast<size_t>(r)].end() || it->second.dim() != 1 || it->second.numel() != slice ||
          (r > 0 && it->second.scalar_type() != slices.front().scalar_type()))
        fail(Status::Io, "'", shard_path(r), "' lacks '", key, "' as its layout describes it (", slice, " elements)");
      slices.push_back(it->second);
    }
    const at::Tensor full = at::cat(slices);  // a new tensor: the parameters are views of it
    // A unit is its parameters one after the other from 0, each at the next multiple of
    // kFlatAlignment, then padding to a slice per process.
    int64_t end = 0;
    for (const auto& p : params) {
      const int64_t n = elements(p.shape);
      if (n < 0 || p.offset < end || p.offset - end >= kFlatAlignment || p.offset > full.numel() - n)
        fail(Status::Io, "'", first, "': the layout puts '", p.name, "' at ", p.offset, " in unit ", u,
             ", not right after ", "the parameter before it (which ends at ", end, ") and inside the unit's ",
             full.numel(), " elements");
      if (!merged.emplace(p.name, full.narrow(0, p.offset, n).view(p.shape)).second)
        fail(Status::Io, "'", first, "': the layout lists '", p.name, "' twice");
      end = p.offset + n;
    }
    // Slices of flat_slice, or of ceil(end / processes) in a layout written before they were aligned.
    if (full.numel() != flat_slice(end, processes) * processes &&
        full.numel() != (end + processes - 1) / processes * processes)
      fail(Status::Io, "'", first, "': unit ", u, " holds ", full.numel(), " elements, its parameters only ", end);
  }
  for (const auto& entry : shards[0].tensors) {
    if (entry.first.rfind("unit.", 0) == 0) {
      const std::string number = entry.first.substr(5);
      const bool described = !number.empty() && number.size() < 10 &&
                             number.find_first_not_of("0123456789") == std::string::npos &&
                             std::stoul(number) < layout.units.size();
      if (!described) fail(Status::Io, "'", first, "' holds '", entry.first, "', which its layout does not describe");
    } else if (!merged.emplace(entry.first, entry.second.clone()).second) {
      fail(Status::Io, "'", first, "' holds '", entry.first, "' both in a unit and on its own");
    }
  }

  NamedTensors out;
  for (const auto& name : layout.order) {
    auto it = merged.find(name);
    if (it == merged.end()) fail(Status::Io, "'", first, "': the model's '", name, "' is in no shard");
    out.emplace_back(name, it->second);
    merged.erase(it);
  }
  if (!merged.empty())
    fail(Status::Io, "'", first, "' holds '", merged.begin()->first, "', which its model's state does not list");
  return out;
}

std::vector<std::string> merge_sharded_checkpoint(const std::string& checkpoint_dir, size_t model_index,
                                                  const std::string& output_dir, const std::string& max_shard_size) {
  const int64_t limit = parse_size(max_shard_size.empty() ? kDefaultMaxShardSize : max_shard_size);
  return save_sharded(output_dir, merge_model_shards(checkpoint_dir, model_index), limit);
}

}  // namespace acc
