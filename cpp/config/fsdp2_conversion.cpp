#include "config/fsdp2_conversion.h"

#include <yaml-cpp/yaml.h>

#include <set>

#include "common/error.h"
#include "config/sharding_config.h"

namespace acc {

ClusterConfig convert_to_fsdp2(const ClusterConfig& config, const std::string& origin, std::vector<std::string>& notes) {
  auto section = config.other.find("fsdp_config");
  const YAML::Node fsdp = section == config.other.end() ? YAML::Node() : YAML::Load(section->second);
  if (!fsdp.IsMap() || fsdp.size() == 0) {
    notes.push_back("no FSDP config in the file: nothing to convert");
    return config;
  }
  if (fsdp["fsdp_version"] && fsdp["fsdp_version"].IsScalar() && fsdp["fsdp_version"].Scalar() == "2") {
    notes.push_back("the config already says fsdp_version 2: nothing to convert (if its keys are FSDP1's, set "
                    "fsdp_version to 1 and convert again)");
    return config;
  }
  static const std::set<std::string> removed = {"fsdp_backward_prefetch", "fsdp_sync_module_states",
                                                "fsdp_use_orig_params"};
  YAML::Node converted(YAML::NodeType::Map);
  for (const auto& entry : fsdp) {
    const std::string key = entry.first.as<std::string>();
    const YAML::Node& value = entry.second;
    if (removed.count(key)) {
      notes.push_back(key + " has been removed in FSDP2: left out");
    } else if (key == "fsdp_forward_prefetch") {
      notes.push_back(key + " is not implemented in FSDP2: left out");
    } else if (key == "fsdp_sharding_strategy" || key == "fsdp_reshard_after_forward") {
      const auto reshard = value.IsScalar() ? fsdp_reshards_after_forward(value.Scalar()) : std::nullopt;
      if (reshard) converted["fsdp_reshard_after_forward"] = *reshard;
      else converted["fsdp_reshard_after_forward"] = value;
    } else if (key != "fsdp_version") {
      converted[key] = value;
    }
  }
  converted["fsdp_version"] = 2;
  ClusterConfig out = config;
  YAML::Emitter text;
  text << converted;
  out.other["fsdp_config"] = text.c_str();
  // Read back as a config file is read: the result is checked, and its variables are FSDP2's.
  return parse_config_text(config_to_yaml(out), origin);
}

}  // namespace acc
