#include "tracking/wandb_settings.h"

#include <cstdio>
#include <optional>

#include "common/environment.h"
#include "common/error.h"
#include "common/system_random.h"
#include "common/utf8.h"
#include "tracking/init_kwargs.h"

namespace acc::tracking::wandb {
namespace {

// Characters, as Python's len counts them.
size_t code_points(const std::string& text) {
  size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

void check_run_id(const std::string& id, const char* from) {
  require(!id.empty(), "wandb: the run id (", from, ") cannot be empty");
  require(id.find('\0') == std::string::npos, "wandb: the run id (", from, ") holds a NUL character");
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  require(!blank(id.front()) && !blank(id.back()), "wandb: the run id \"", printable_utf8(id), "\" (", from,
          ") cannot start or end with whitespace");
  require(id.find_first_of(":;,#?/'") == std::string::npos, "wandb: the run id \"", printable_utf8(id), "\" (", from,
          ") cannot contain any of the characters :;,#?/'");
}

void check_tags(const std::vector<std::string>& tags, const char* from) {
  for (const auto& tag : tags)
    require(code_points(tag) >= 1 && code_points(tag) <= 64, "wandb: the tag \"", printable_utf8(tag), "\" (", from,
            ") must have 1 to 64 characters");
}

Mode parse_mode(const std::string& mode, const char* from) {
  if (mode == "offline" || mode == "dryrun") return Mode::Offline;
  if (mode == "disabled") return Mode::Disabled;
  if (mode == "online" || mode == "run" || mode == "shared")
    fail(Status::Unsupported, "wandb: mode \"", mode, "\" (", from,
         ") uploads to a W&B server while training, which is not built: use mode \"offline\" (the run is written "
         "under wandb/ and `wandb sync` uploads it) or \"disabled\"");
  fail(Status::InvalidArgument, "wandb: mode (", from, ") is \"online\", \"offline\", \"shared\", \"disabled\" or ",
       "\"dryrun\", not \"", printable_utf8(mode), "\"");
}

// The keys of wandb.init's config that config_include_keys / config_exclude_keys leave.
void filter_config(nlohmann::ordered_json& config, const std::optional<nlohmann::json>& include,
                   const std::optional<nlohmann::json>& exclude) {
  require(!(include && exclude),
          "init_kwargs[\"wandb\"]: config_include_keys and config_exclude_keys cannot both be "
          "given");
  const auto& keys = include ? *include : exclude ? *exclude : nlohmann::json();
  if (keys.is_null()) return;
  require(keys.is_array(), "init_kwargs[\"wandb\"]: config_", include ? "include" : "exclude",
          "_keys is a list of keys, not ", keys.type_name());
  for (const auto& key : keys)
    require(key.is_string(), "init_kwargs[\"wandb\"]: config_", include ? "include" : "exclude",
            "_keys holds keys (strings), not ", key.type_name());
  nlohmann::ordered_json kept = nlohmann::ordered_json::object();
  for (const auto& item : config.items()) {
    bool listed = false;
    for (const auto& key : keys) listed = listed || key.get<std::string>() == item.key();
    if (listed == include.has_value()) kept[item.key()] = item.value();
  }
  config = std::move(kept);
}

}  // namespace

RunSettings run_settings(const nlohmann::json& kwargs) {
  RunSettings s;
  auto env = [](const char* name) {
    const char* value = nonempty_env(name);
    // Protobuf's strings are UTF-8: W&B's readers refuse a record holding anything else.
    require(!value || is_utf8(value), "wandb: ", name, " is not valid UTF-8");
    return value ? std::string(value) : std::string();
  };
  if (nonempty_env("WANDB_MODE")) {
    s.mode = parse_mode(env("WANDB_MODE"), "WANDB_MODE");
    s.mode_chosen = true;
  }
  s.root_dir = expand_user(env("WANDB_DIR"));
  s.entity = env("WANDB_ENTITY");
  s.run_id = env("WANDB_RUN_ID");
  if (!s.run_id.empty()) check_run_id(s.run_id, "WANDB_RUN_ID");
  s.display_name = env("WANDB_NAME");
  s.notes = env("WANDB_NOTES");
  s.run_group = env("WANDB_RUN_GROUP");
  s.job_type = env("WANDB_JOB_TYPE");
  if (nonempty_env("WANDB_TAGS")) {  // split at every comma, as wandb does (nothing trimmed)
    const std::string tags = env("WANDB_TAGS");
    for (size_t start = 0;;) {
      const size_t comma = tags.find(',', start);
      s.tags.push_back(tags.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    check_tags(s.tags, "WANDB_TAGS");
  }

  InitKwargs k("wandb", kwargs);
  if (k.given("project"))
    fail(Status::InvalidArgument,
         "init_kwargs[\"wandb\"]: \"project\" is the project_name of init_trackers (Accelerate ",
         "passes it to wandb.init itself)");
  if (const auto mode = k.text("mode")) {
    s.mode = parse_mode(*mode, "init_kwargs");
    s.mode_chosen = true;
  }
  if (const auto dir = k.text("dir")) {
    require(dir->find('\0') == std::string::npos, "init_kwargs[\"wandb\"][\"dir\"] holds a NUL character");
    s.root_dir = expand_user(*dir);
  }
  if (const auto entity = k.text("entity")) s.entity = *entity;
  if (const auto id = k.text("id")) {
    check_run_id(*id, "init_kwargs");
    s.run_id = *id;
  }
  if (const auto name = k.text("name")) s.display_name = *name;
  if (const auto notes = k.text("notes")) s.notes = *notes;
  if (const auto group = k.text("group")) s.run_group = *group;
  if (const auto job_type = k.text("job_type")) s.job_type = *job_type;
  if (const auto tags = k.value("tags")) {
    s.tags.clear();
    if (tags->is_string()) {
      s.tags.push_back(tags->get<std::string>());  // a single tag, as wandb takes a str
    } else {
      require(tags->is_array(), "init_kwargs[\"wandb\"][\"tags\"] is a list of strings, not ", tags->type_name());
      for (const auto& tag : *tags) {
        require(tag.is_string(), "init_kwargs[\"wandb\"][\"tags\"] holds strings, not ", tag.type_name());
        s.tags.push_back(tag.get<std::string>());
      }
    }
    check_tags(s.tags, "init_kwargs");
  }
  if (const auto config = k.value("config")) {
    if (config->is_string())
      fail(Status::Unsupported, "init_kwargs[\"wandb\"][\"config\"]: a configuration file's path is not built (give ",
           "the configuration as a JSON object)");
    require(config->is_object(), "init_kwargs[\"wandb\"][\"config\"] is a JSON object, not ", config->type_name());
    s.config = config_update(nlohmann::ordered_json::parse(config->dump()));
  }
  filter_config(s.config, k.value("config_include_keys"), k.value("config_exclude_keys"));
  k.boolean("allow_val_change");                // the configuration is only ever added to here
  if (const auto reinit = k.value("reinit")) {  // one run at a time: init_trackers ends the last one
    const bool known =
        reinit->is_boolean() || (reinit->is_string() && (*reinit == "default" || *reinit == "return_previous" ||
                                                         *reinit == "finish_previous" || *reinit == "create_new"));
    require(known, "init_kwargs[\"wandb\"][\"reinit\"] is a boolean, \"default\", \"return_previous\", ",
            "\"finish_previous\" or \"create_new\"");
  }
  if (const auto resume = k.value("resume")) {
    const bool known =
        resume->is_boolean() ||
        (resume->is_string() && (*resume == "allow" || *resume == "never" || *resume == "must" || *resume == "auto"));
    require(known, "init_kwargs[\"wandb\"][\"resume\"] is a boolean, \"allow\", \"never\", \"must\" or \"auto\"");
    if (*resume != false && *resume != "never" && s.mode == Mode::Offline)  // as wandb.init warns
      std::fprintf(stderr, "accelerate: wandb: `resume` will be ignored since W&B syncing is set to `offline`\n");
  }
  for (const char* key : {"resume_from", "fork_from"})
    k.refuse(key, "rewinding or forking a run on the W&B server is not built (the run is written offline)");
  if (k.boolean("force").value_or(false))
    fail(Status::Unsupported, "init_kwargs[\"wandb\"][\"force\"]: logging in to W&B is not built (the run is ",
         "written offline)");
  for (const char* key : {"tensorboard", "sync_tensorboard"})
    if (k.boolean(key).value_or(false))
      fail(Status::Unsupported, "init_kwargs[\"wandb\"][\"", key,
           "\"]: syncing TensorBoard's files is not built (log with both trackers instead)");
  if (k.boolean("save_code").value_or(false))
    fail(Status::Unsupported, "init_kwargs[\"wandb\"][\"save_code\"]: saving the program's code is not built");
  if (k.boolean("monitor_gym").value_or(false))
    fail(Status::Unsupported, "init_kwargs[\"wandb\"][\"monitor_gym\"]: Gym's videos are not built");
  if (const auto settings = k.value("settings"))
    if (!(settings->is_object() && settings->empty()))
      fail(Status::Unsupported,
           "init_kwargs[\"wandb\"][\"settings\"]: wandb.Settings are not built (set the run's "
           "folder with \"dir\", its mode with \"mode\")");
  k.refuse("anonymous", "anonymous runs are not built (wandb itself no longer takes it)");
  k.refuse_the_rest();
  return s;
}

nlohmann::ordered_json config_update(const nlohmann::ordered_json& values) {
  nlohmann::ordered_json update = nlohmann::ordered_json::object();
  for (const auto& item : values.items()) {
    const std::string& key = item.key();
    const size_t first = key.find_first_not_of('-');
    update[first == std::string::npos ? "" : key.substr(first, key.find_last_not_of('-') - first + 1)] = item.value();
  }
  return update;
}

void check_project(const std::string& project) {
  require(is_utf8(project), "wandb: the project name is not valid UTF-8");
  require(code_points(project) <= 128, "wandb: the project name \"", printable_utf8(project),
          "\" has more than 128 characters");
  require(project.find_first_of("/\\#?%:") == std::string::npos, "wandb: the project name \"", printable_utf8(project),
          "\" cannot contain any of the characters / \\ # ? % :");
}

std::string new_run_id() {
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string id;
  while (id.size() < 8) {
    uint64_t bits = system_random_bits();
    // 36^8 < 2^42: unbiased draws by rejecting the top of each 6-bit piece (values 36..63).
    for (int i = 0; i < 10 && id.size() < 8; ++i, bits >>= 6)
      if ((bits & 63) < 36) id.push_back(alphabet[bits & 63]);
  }
  return id;
}

}  // namespace acc::tracking::wandb
