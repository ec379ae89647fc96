#include "tracking/trackio_tracker.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "common/environment.h"
#include "common/error.h"
#include "common/files.h"
#include "common/system_random.h"
#include "common/text.h"
#include "common/utf8.h"
#include "tracking/init_kwargs.h"
#include "tracking/trackio_store.h"

namespace acc::tracking {
namespace {

using trackio::MetricRow;
using trackio::ProjectDatabase;

// Keys trackio keeps for a row's own fields: a value logged under one is stored as "__<key>".
const char* const kReservedKeys[] = {"project", "run", "timestamp", "step", "time", "metrics"};

bool is_reserved(const std::string& key) {
  if (key.rfind("__", 0) == 0) return true;
  for (const char* reserved : kReservedKeys)
    if (key == reserved) return true;
  return false;
}

std::string stored_name(const std::string& key) { return is_reserved(key) ? "__" + key : key; }

// trackio's serialize_values: JSON has no NaN or infinities, so they are stored as these strings
// (which trackio's readers turn back into numbers).
nlohmann::ordered_json json_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Readable names for runs without one: "<adjective>-<noun>-<n>", n the first number no run of the
// project has taken (trackio draws its own words the same way).
std::string readable_run_name(const std::vector<std::string>& taken) {
  static const char* const adjectives[] = {"amber", "bold",   "brisk", "calm",  "clear", "deft",  "eager", "fair",
                                           "fleet", "fresh",  "glad",  "keen",  "lucid", "merry", "neat",  "quiet",
                                           "sharp", "steady", "sunny", "swift", "tidy",  "vivid", "warm",  "wise"};
  static const char* const nouns[] = {"anchor", "beacon", "brook",  "canyon", "cedar",  "comet",   "delta",
                                      "ember",  "fjord",  "grove",  "harbor", "island", "lantern", "meadow",
                                      "nebula", "orchid", "pebble", "quartz", "ridge",  "summit",  "tide",
                                      "valley", "willow", "zephyr", "meteor"};
  const std::set<std::string> used(taken.begin(), taken.end());
  for (size_t n = 0;; ++n) {
    const std::string name = std::string(adjectives[n % std::size(adjectives)]) + "-" + nouns[n % std::size(nouns)] +
                             "-" + std::to_string(n);
    if (!used.count(name)) return name;
  }
}

// Whether `dir` is on a network file system, where trackio (TRACKIO_STORAGE_MODE "auto") logs to
// files of JSON lines instead of SQLite, whose locks are unsafe there.
bool on_network_filesystem(const std::string& dir) {
  std::ifstream mounts("/proc/mounts");
  std::string line, best_type;
  size_t best = 0;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string device, mount_point, type;
    if (!(fields >> device >> mount_point >> type)) continue;
    const std::string prefix = mount_point == "/" ? "/" : mount_point + "/";
    if ((dir == mount_point || dir.rfind(prefix, 0) == 0) && mount_point.size() >= best) {
      best = mount_point.size();
      best_type = lowercase(type);
    }
  }
  if (best_type.rfind("fuse.", 0) == 0) best_type = best_type.substr(5);
  static const std::set<std::string> network = {"nfs",       "nfs4",  "lustre", "gpfs", "cephfs", "beegfs", "fhgfs",
                                                "glusterfs", "ocfs2", "panfs",  "cifs", "smbfs",  "wekafs"};
  if (network.count(best_type)) return true;
  for (const char* part : {"nfs", "lustre", "weka", "gpfs", "beegfs", "ceph"})
    if (best_type.find(part) != std::string::npos) return true;
  return false;
}

// Refuses a storage mode other than SQLite (trackio's TRACKIO_STORAGE_MODE), before anything is written.
void check_storage_mode(const std::string& dir) {
  std::string mode = "auto";
  if (const char* value = nonempty_env("TRACKIO_STORAGE_MODE")) mode = lowercase(trimmed(value));
  if (mode == "sqlite") return;
  if (mode == "jsonl")
    fail(Status::Unsupported,
         "trackio: TRACKIO_STORAGE_MODE=jsonl (trackio's files of JSON lines for network file "
         "systems) is not built; unset it to write the project's SQLite database");
  if (mode != "auto")
    std::fprintf(stderr, "accelerate: trackio: TRACKIO_STORAGE_MODE=%s is not auto, sqlite or jsonl: taken as auto\n",
                 mode.c_str());
  if (on_network_filesystem(dir))
    fail(Status::Unsupported, "trackio: ", dir, " is on a network file system, where trackio logs to files of JSON ",
         "lines (not built here) because SQLite's locks are unsafe there; set TRACKIO_DIR to a local folder, or ",
         "TRACKIO_STORAGE_MODE=sqlite to write the database there anyway");
}

}  // namespace

// The run being written: the database (opened by start, then used by the writer thread alone), the
// rows waiting, and the configuration until the first rows take it along (as trackio stores it).
// Rows the database refused (a full disk: their transaction rolled back) wait for the next write, up
// to kMaxWaitingBytes of them; past it new rows are dropped, and the next error counts them.
struct TrackioTracker::RunState {
  std::unique_ptr<ProjectDatabase> db;
  std::string run_id, run_name;
  std::string media_root, media_folder;  // <TRACKIO_DIR>/media, and the run's "<project>/<run>" in it
  std::vector<MetricRow> waiting;
  size_t waiting_bytes = 0;
  uint64_t dropped = 0;  // rows dropped since the last error was reported
  std::optional<std::string> config;

  void add(const Record& record) {
    nlohmann::ordered_json values = nlohmann::ordered_json::object();
    if (record.of_images) {
      // trackio.Image's file: <media>/<project>/<run>/<step>/<uuid4>.png, named in the row by its path
      // below <media>, with the image's caption (none here).
      const std::string folder = media_folder + "/" + std::to_string(record.step);
      make_folders(media_root + "/" + folder, "trackio's media folder");
      for (size_t i = 0; i < record.images.size(); ++i) {
        const std::string file = folder + "/" + uuid4_text() + ".png";
        write_file_atomically(media_root + "/" + file, record.images[i].png);  // never half a PNG
        values[stored_name(record.image_names[i])] = {
            {"_type", "trackio.image"}, {"file_path", file}, {"caption", nullptr}};
      }
    } else if (record.of_histogram) {
      const NumpyHistogram numpy = numpy_histogram(record.histogram);  // trackio.Histogram(np_histogram=...)
      values[stored_name(record.histogram_name)] = {
          {"_type", "trackio.histogram"}, {"bins", numpy.edges}, {"values", numpy.counts}};
    } else if (!record.group.empty()) {
      nlohmann::ordered_json& group = values[stored_name(record.group)];
      group = nlohmann::ordered_json::object();
      for (size_t i = 0; i < record.group_names.size(); ++i)
        group[record.group_names[i]] = json_number(record.values[i]);
    } else {
      for (size_t i = 0; i < record.names.size(); ++i)
        values[stored_name(record.names[i])] = json_number(record.values[i]);
    }
    for (size_t i = 0; i < record.text_names.size(); ++i) values[stored_name(record.text_names[i])] = record.texts[i];
    std::string metrics = values.dump();
    if (waiting_bytes + metrics.size() > kMaxWaitingBytes) {
      ++dropped;
      return;
    }
    waiting_bytes += metrics.size();
    waiting.push_back(MetricRow{trackio::iso_timestamp(record.wall_time), record.step, std::move(metrics), uuid4_hex()});
  }

  void write_out() {
    if (waiting.empty()) return;  // the configuration goes with the first rows
    try {
      db->add_rows(run_id, run_name, waiting, config);
    } catch (const Error& e) {
      fail(e.status(), e.what(), " (", waiting.size(), " rows kept, to be written once the database takes them)",
           lost_so_far(dropped, "row"));
    }
    waiting.clear();
    waiting_bytes = 0;
    config.reset();
  }
};

TrackioTracker::~TrackioTracker() {
  try {
    finish();
  } catch (...) {
  }
}

void TrackioTracker::set_init_kwargs(const nlohmann::json& kwargs) {
  InitKwargs k("trackio", kwargs);
  const std::optional<std::string> name = k.text("name");
  const std::optional<std::string> group = k.text("group");
  nlohmann::json config = k.value("config").value_or(nlohmann::json::object());
  require(config.is_object(), "init_kwargs[\"trackio\"][\"config\"] is a JSON object, not ", config.type_name());
  for (const auto& item : config.items())
    require(item.key().rfind('_', 0) != 0, "init_kwargs[\"trackio\"][\"config\"]: the key \"",
            printable_utf8(item.key()), "\" is reserved (trackio keeps keys starting with '_' for itself)");
  const std::string resume = k.text("resume").value_or("never");
  require(resume == "never" || resume == "allow" || resume == "must",
          "init_kwargs[\"trackio\"][\"resume\"] is \"never\", \"allow\" or \"must\", not \"", printable_utf8(resume),
          "\"");
  require(resume != "must" || name, "init_kwargs[\"trackio\"]: resume \"must\" needs the run's \"name\"");
  for (const char* key : {"space_id", "server_url", "dataset_id", "bucket_id", "space_storage"})
    k.refuse(key,
             "logging to a Hugging Face Space or a trackio server is not built (the run is written to the "
             "local project database, which `trackio sync` can upload)");
  for (const char* variable : {"TRACKIO_SPACE_ID", "TRACKIO_SERVER_URL"})
    if (nonempty_env(variable))
      fail(Status::Unsupported, "trackio: ", variable, " is set, but logging to a Hugging Face Space or a trackio ",
           "server is not built: unset it to log to the local project database");
  for (const char* key : {"auto_log_gpu", "auto_log_cpu"})
    if (k.boolean(key).value_or(false))
      fail(Status::Unsupported, "init_kwargs[\"trackio\"][\"", key,
           "\"]: trackio's automatic system metrics are not built");
  k.number("gpu_log_interval", 1e-9, 1e300);
  k.number("cpu_log_interval", 1e-9, 1e300);
  k.boolean("private");     // a new Space's visibility
  k.boolean("embed");       // a notebook's embedded dashboard
  if (k.value("settings"))  // as trackio: accepted for wandb's sake, unused
    std::fprintf(stderr,
                 "accelerate: trackio: init_kwargs \"settings\" is not used (trackio takes it for "
                 "compatibility with wandb.init() and ignores it)\n");
  k.text("webhook_url");  // where trackio.alert posts: no alerts are sent here
  if (const auto level = k.text("webhook_min_level"))
    require(*level == "info" || *level == "warn" || *level == "error",
            "init_kwargs[\"trackio\"][\"webhook_min_level\"] is \"info\", \"warn\" or \"error\", not \"",
            printable_utf8(*level), "\"");
  k.refuse_the_rest();
  check_storage_mode(trackio::storage_dir());  // here, on every process alike
  named_ = name.has_value();
  run_name_setting_ = name.value_or("");
  grouped_ = group.has_value();
  group_ = group.value_or("");
  resume_ = resume;
  init_config_ = std::move(config);
}

void TrackioTracker::check_project_name(const std::string& project_name) const {
  trackio::check_project_name(project_name);
}

void TrackioTracker::start(const std::string& project_name, const nlohmann::json& config) {
  finish();
  const std::string dir = trackio::storage_dir();
  auto run = std::make_shared<RunState>();
  run->db = std::make_unique<ProjectDatabase>(dir, project_name);
  std::optional<std::string> existing;
  if (named_ && resume_ != "never") existing = run->db->latest_run_id(run_name_setting_);
  require(existing || resume_ != "must", "trackio: the run \"", printable_utf8(run_name_setting_),
          "\" does not exist in the project \"", printable_utf8(project_name), "\" (init_kwargs resume \"must\")");
  run->run_id = existing ? *existing : uuid4_hex();
  run->run_name = named_ ? run_name_setting_ : readable_run_name(run->db->run_names());
  // trackio.init's config, the run's own keys, then Accelerate's store_init_configuration (an update).
  nlohmann::ordered_json stored = nlohmann::ordered_json::object();
  for (const auto& item : init_config_.items()) stored[item.key()] = item.value();
  stored["_Username"] = nullptr;  // the Hugging Face user (whoami over the network): none here
  stored["_Created"] = trackio::iso_timestamp(seconds_now());
  stored["_Group"] = grouped_ ? nlohmann::ordered_json(group_) : nlohmann::ordered_json(nullptr);
  for (const auto& item : config.items()) stored[item.key()] = item.value();
  run->config = stored.dump();

  run->media_root = dir + "/media";
  run->media_folder = trackio::canonical_project_name(project_name) + "/" + run->run_name;
  path_ = run->db->path();
  writer_ = std::make_unique<AsyncFile>(AsyncFile::TasksOwnFiles{}, path_, [run] { run->write_out(); },
                                        AsyncFile::AfterAnError::Retry);
  run_ = std::move(run);
  warned_keys_.clear();
}

void TrackioTracker::warn_if_reserved(const std::string& key) {
  if (!is_reserved(key)) return;
  if (warned_keys_.insert(key).second)
    std::fprintf(stderr, "accelerate: trackio: the key \"%s\" is reserved: stored as \"__%s\"\n",
                 printable_utf8(key).c_str(), printable_utf8(key).c_str());
}

void TrackioTracker::log(const std::shared_ptr<const Record>& record) {
  if (!writer_) fail(Status::NotInitialized, "the trackio tracker has not started");
  if (record->of_histogram) {
    warn_if_reserved(record->histogram_name);
  } else if (record->of_images) {
    // trackio files a run's images in a folder named after the run (fixed once the run starts).
    const std::string& run_name = run_->run_name;
    require(run_name != "." && run_name != ".." && run_name.find('/') == std::string::npos &&
                run_name.size() <= kFileNameMax,
            "trackio: the run name \"", printable_utf8(run_name), "\" cannot name the folder of its images");
    for (const auto& name : record->image_names) warn_if_reserved(name);
  } else if (!record->group.empty()) {
    warn_if_reserved(record->group);
  } else {
    for (const auto& name : record->names) warn_if_reserved(name);
  }
  for (const auto& name : record->text_names) warn_if_reserved(name);
  writer_->post([record, run = run_](std::FILE*&, const std::string&) { run->add(*record); });
}

void TrackioTracker::finish() {
  if (!writer_) return;
  std::unique_ptr<AsyncFile> writer = std::move(writer_);
  run_.reset();  // the writer's tasks hold it until they are done
  writer->close();
}

}  // namespace acc::tracking
