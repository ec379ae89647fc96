#include "tracking/clearml_tracker.h"

#include <cstdio>
#include <limits>

#include "common/environment.h"
#include "common/error.h"
#include "common/text.h"
#include "common/utf8.h"
#include "common/zip_folder.h"
#include "tracking/clearml_events.h"
#include "tracking/init_kwargs.h"

namespace acc::tracking {
namespace {

const char* const kTaskTypes[] = {"training",    "testing", "inference",  "data_processing",
                                  "application", "monitor", "controller", "optimizer",
                                  "service",     "qc",      "custom"};

// The first of the variables that is set (ClearML's name, then its older TRAINS_ one).
const char* env_of(const char* name, const char* old_name) {
  const char* value = nonempty_env(name);
  return value ? value : nonempty_env(old_name);
}

// CLEARML_OFFLINE_MODE as ClearML reads it (safe_text_to_bool, strtobool's false words): false for
// "0", "n", "no", "f", "false", "off", true for any other text; unset is nullopt.
std::optional<bool> offline_mode() {
  const char* value = env_of("CLEARML_OFFLINE_MODE", "TRAINS_OFFLINE_MODE");
  if (!value) return std::nullopt;
  const std::string text = lowercase(trimmed(value));
  for (const char* no : {"0", "n", "no", "f", "false", "off"})
    if (text == no) return false;
  return true;
}

// ClearML's cache folder: CLEARML_CACHE_DIR (trimmed, $VARIABLES and "~" expanded, as ClearML reads
// it), else ~/.clearml/cache.
std::string cache_dir() {
  const char* cache = env_of("CLEARML_CACHE_DIR", "TRAINS_CACHE_DIR");
  const std::string dir = cache ? trimmed(cache) : "~/.clearml/cache";
  require(is_utf8(dir), "clearml: CLEARML_CACHE_DIR is not valid UTF-8");
  return expand_user(expand_variables(dir));
}

clearml::TaskSettings task_settings(const nlohmann::json& kwargs, const std::string& project_name) {
  InitKwargs k("clearml", kwargs);
  clearml::TaskSettings task;
  const char* project = nonempty_env("CLEARML_PROJECT");
  const char* name = nonempty_env("CLEARML_TASK");
  task.project = k.text("project_name").value_or(project ? project : project_name);
  task.name = k.text("task_name").value_or(name ? name : project_name);
  for (const auto* text : {&task.project, &task.name})
    require(is_utf8(*text) && !text->empty(), "clearml: the project and task names must be non-empty UTF-8");
  if (const auto type = k.text("task_type")) {
    bool known = false;
    for (const char* t : kTaskTypes) known = known || *type == t;
    require(known, "init_kwargs[\"clearml\"][\"task_type\"] is one of ClearML's TaskTypes (training, testing, ",
            "inference, data_processing, application, monitor, controller, optimizer, service, qc, custom), not \"",
            printable_utf8(*type), "\"");
    task.type = *type;
  }
  if (const auto tags = k.value("tags")) {
    require(tags->is_array(), "init_kwargs[\"clearml\"][\"tags\"] is a list of strings, not ", tags->type_name());
    for (const auto& tag : *tags) {
      require(tag.is_string(), "init_kwargs[\"clearml\"][\"tags\"] holds strings, not ", tag.type_name());
      task.tags.push_back(tag.get<std::string>());
    }
  }
  if (const auto reuse = k.value("reuse_last_task_id"))  // an offline session is always a new task
    require(reuse->is_boolean() || reuse->is_string(), "init_kwargs[\"clearml\"][\"reuse_last_task_id\"] is a ",
            "boolean or a task id");
  if (const auto resume = k.value("continue_last_task"))
    if (*resume != false && *resume != 0)
      fail(Status::Unsupported, "init_kwargs[\"clearml\"][\"continue_last_task\"]: continuing a task of the ClearML ",
           "server is not built (an offline session is a new task)");
  if (const auto output = k.value("output_uri"))
    if (*output != false)
      fail(Status::Unsupported, "init_kwargs[\"clearml\"][\"output_uri\"]: uploading models is not built");
  for (const char* key :
       {"auto_connect_arg_parser", "auto_connect_frameworks", "auto_resource_monitoring", "auto_connect_streams"})
    if (const auto value = k.value(key))
      require(value->is_boolean() || value->is_object(), "init_kwargs[\"clearml\"][\"", key,
              "\"] is a boolean or an object");
  k.boolean("deferred_init");
  k.refuse_the_rest();
  return task;
}

}  // namespace

ClearmlTracker::~ClearmlTracker() {
  try {
    finish();
  } catch (...) {
  }
}

void ClearmlTracker::set_init_kwargs(const nlohmann::json& kwargs) {
  static_cast<void>(task_settings(kwargs, "checked"));  // checked on every process
  init_kwargs_ = kwargs.is_null() ? nlohmann::json::object() : kwargs;
}

void ClearmlTracker::check_image_name(const std::string& name) const {
  const auto [metric, variant] = clearml::title_series(name);
  clearml::check_image_key(clearml::image_key("p", "t", "offline-0", metric, variant, 0, ".png"),
                           "the image name \"" + printable_utf8(name) + "\"");
}

void ClearmlTracker::start(const std::string& project_name, const nlohmann::json& config) {
  finish();
  folder_.clear();
  const clearml::TaskSettings task = task_settings(init_kwargs_, project_name);
  const std::optional<bool> offline = offline_mode();
  if (offline == false)
    fail(Status::Unsupported, "clearml: CLEARML_OFFLINE_MODE is off, and reporting to a ClearML server while ",
         "training is not built: the session is written offline (Task.import_offline_session sends it)");
  auto session = std::make_shared<clearml::OfflineSession>(cache_dir(), task, config);
  std::fprintf(stderr,
               "accelerate: clearml: offline session stored in %s%s; send it with "
               "Task.import_offline_session('%s')\n",
               session->folder().c_str(),
               offline ? "" : " (CLEARML_OFFLINE_MODE is not set, and reporting to a server is not built)",
               session->folder().c_str());
  writer_ = std::make_unique<AsyncFile>(
      AsyncFile::TasksOwnFiles{}, session->folder(), [session] { session->flush(); },
      AsyncFile::AfterAnError::Retry);  // the session keeps what the disk refused
  folder_ = session->folder();
  session_ = std::move(session);
}

void ClearmlTracker::log(const std::shared_ptr<const Record>& record) {
  if (!writer_) fail(Status::NotInitialized, "the clearml tracker has not started");
  writer_->post([record, session = session_](std::FILE*&, const std::string&) { session->log(*record); });
}

void ClearmlTracker::finish() {
  if (!writer_) return;
  std::unique_ptr<AsyncFile> writer = std::move(writer_);
  session_.reset();
  writer->close();
  // Task.close: the session's files zipped beside its folder. Either one imports, so a zip that
  // cannot be made costs only itself.
  try {
    zip_folder(folder_, folder_ + ".zip");
    std::fprintf(stderr, "accelerate: clearml: offline session stored in %s.zip\n", folder_.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "accelerate: clearml: no zip of the session (%s): import the folder %s\n", e.what(),
                 folder_.c_str());
  }
}

}  // namespace acc::tracking
