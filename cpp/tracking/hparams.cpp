#include "tracking/hparams.h"

#include <filesystem>

#include "common/error.h"
#include "common/json_input.h"
#include "common/files.h"
#include "tracking/tracker.h"

namespace acc::tracking {
namespace {

void flatten_into(const nlohmann::json& node, const std::string& prefix, nlohmann::json& out) {
  for (const auto& [key, value] : node.items()) {
    const std::string name = prefix.empty() ? key : prefix + "/" + key;
    if (value.is_object() && !value.empty()) {
      flatten_into(value, name, out);
      continue;
    }
    // {"a/b": 1} next to {"a": {"b": 2}} would give two values one name: one would be lost.
    require(!out.contains(name), "config: the key \"", name, "\" appears twice once nested objects are joined with '/'",
            " (rename one of them)");
    if (value.is_number() || value.is_string() || value.is_boolean() || value.is_null())
      out[name] = value;
    else
      out[name] = value.dump();
  }
}

}  // namespace

nlohmann::json parse_config(const std::string& text) {
  if (text.empty()) return nlohmann::json::object();
  nlohmann::json config = parse_json_input(text, "config");
  require(config.is_object(), "config must be a JSON object of hyper-parameters, not ", config.type_name());
  return config;
}

nlohmann::json flatten_config(const nlohmann::json& config) {
  nlohmann::json out = nlohmann::json::object();
  flatten_into(config, "", out);
  return out;
}

void write_config_file(const std::string& dir, const nlohmann::json& config) {
  write_file_atomically(dir + "/hparams.json", config.dump(2) + "\n");
}

std::string make_run_dir(const std::string& logging_dir, const std::string& project_name) {
  const std::string dir = (std::filesystem::path(logging_dir) / project_name).string();
  make_folders(dir, "the run folder");
  return dir;
}

}  // namespace acc::tracking
