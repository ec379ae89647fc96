#include "config/parallelism_config.h"

#include <cstdint>
#include <map>
#include <set>

#include "common/error.h"
#include "common/options.h"
#include "common/text.h"

namespace acc {

namespace {

const std::string kPrefix = "parallelism_config_";

// A size as Accelerate's launcher takes it (argparse's int): an integer of at least 1.
int64_t size_setting(const std::string& origin, const std::string& key, const std::string& text) {
  const auto value = parse_integer(text);
  require(value && *value >= 1, origin, ": ", key, " = ", text, ": must be an integer >= 1");
  return *value;
}

}  // namespace

bool launches_fsdp2(const VariableLookup& variables) {
  const auto fsdp = variables("ACCELERATE_USE_FSDP");
  return fsdp && parse_bool(*fsdp).value_or(false) && variables("FSDP_VERSION").value_or("1") == "2";
}

const std::vector<std::string>& parallelism_setting_names() {
  static const std::vector<std::string> names = {
      "dp_replicate_size",     "dp_shard_size", "tp_size",    "cp_size",       "cp_backend",
      "cp_comm_strategy",      "sp_size",       "sp_backend", "sp_seq_length", "sp_seq_length_is_variable",
      "sp_attn_implementation"};
  return names;
}

SettingMap parallelism_environment(const SettingMap& settings, const SettingMap& sharding_env,
                                   const std::string& origin, std::vector<std::string>& warnings) {
  const std::set<std::string> known(parallelism_setting_names().begin(), parallelism_setting_names().end());
  std::map<std::string, int64_t> sizes = {
      {"dp_replicate_size", 1}, {"dp_shard_size", 1}, {"tp_size", 1}, {"cp_size", 1}, {"sp_size", 1}};
  for (const auto& [key, value] : settings) {
    const std::string name = key.rfind(kPrefix, 0) == 0 ? key.substr(kPrefix.size()) : "";
    if (!known.count(name)) {
      warnings.push_back(origin + ": " + key + " is not a parallelism_config setting; ignored");
      continue;
    }
    if (sizes.count(name)) sizes[name] = size_setting(origin, key, value);
  }
  for (const char* name : {"tp_size", "cp_size", "sp_size"})
    if (sizes[name] > 1)
      fail(Status::Unsupported, origin, ": ", kPrefix, name, " = ", sizes[name], " is not supported: only the ",
           "parallelism config's data-parallel dimensions (dp_shard_size, dp_replicate_size) are built here");
  const bool fsdp2 = launches_fsdp2([&sharding_env](const char* name) -> std::optional<std::string> {
    const auto found = sharding_env.find(name);
    if (found == sharding_env.end()) return std::nullopt;
    return found->second;
  });
  if (!fsdp2) {
    // As Accelerate's launcher: the config is for FSDP 2 (its FSDP 1 and DDP never read the mesh).
    require(sizes["dp_shard_size"] == 1, origin, ": ", kPrefix, "dp_shard_size = ", sizes["dp_shard_size"],
            " shards the model: it needs distributed_type FSDP with fsdp_version 2");
    return {};
  }
  SettingMap env = {{"ACCELERATE_USE_PARALLELISM_CONFIG", "true"}};
  for (const auto& [name, size] : sizes) {
    env["PARALLELISM_CONFIG_" + uppercase(name)] = std::to_string(size);
  }
  return env;
}

}  // namespace acc
