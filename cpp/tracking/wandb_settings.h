// What a W&B run is started with: wandb.init's keyword arguments (Accelerate's init_kwargs["wandb"])
// over W&B's environment variables (WANDB_MODE, WANDB_DIR, WANDB_ENTITY, WANDB_RUN_ID, WANDB_NAME,
// WANDB_NOTES, WANDB_TAGS, WANDB_RUN_GROUP, WANDB_JOB_TYPE), checked as wandb checks them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace acc::tracking::wandb {

// "offline" (or its old name "dryrun"): the run is written for `wandb sync`; "disabled": nothing is
// written, as wandb makes every call a no-op. Uploading while training ("online", "shared") is not
// built.
enum class Mode { Offline, Disabled };

struct RunSettings {
  Mode mode = Mode::Offline;
  bool mode_chosen = false;  // by init_kwargs or WANDB_MODE (else the run says where it went offline)
  std::string root_dir;      // the folder holding wandb/ ("" for the working folder)
  std::string entity, run_id, display_name, notes, run_group, job_type;  // "" where not given
  std::vector<std::string> tags;
  nlohmann::ordered_json config = nlohmann::ordered_json::object();  // wandb.init's config
};

// The settings of `kwargs` (a JSON object, null for none) and the environment. InvalidArgument for
// what wandb refuses (an unknown keyword, a run id with a reserved character, a tag longer than 64
// characters, ...), Unsupported for what it takes but is not built here (uploading, resume_from,
// fork_from, syncing TensorBoard, saving code).
RunSettings run_settings(const nlohmann::json& kwargs);

// A configuration's values as wandb.config.update keeps them: each top-level key stripped of the
// '-' at its ends (wandb's Config normalises keys so).
nlohmann::ordered_json config_update(const nlohmann::ordered_json& values);

// wandb's rules for a project name (Accelerate's project_name): at most 128 characters, none of
// / \ # ? % : (InvalidArgument).
void check_project(const std::string& project);

// A new run id as wandb draws one: 8 characters of a-z and 0-9, from the system's random source.
std::string new_run_id();

}  // namespace acc::tracking::wandb
