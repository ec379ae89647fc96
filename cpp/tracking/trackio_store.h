// Trackio's local storage, as trackio.init() / Run.log() keep it without a Space or a server: one
// SQLite database per project, <storage_dir>/<project>.db, whose `metrics` table holds a row per
// logged step (the run's id and name, the step, an ISO time, the values as a JSON object) and whose
// `configs` table holds each run's configuration (a JSON object). The Trackio dashboard
// (`trackio show`) and its API read these tables. Writers take trackio's own lock first
// (<project>.lock, flock), so that a Python trackio process logging to the same project waits its
// turn; the database runs in WAL mode as trackio sets it, so readers never block a write.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

struct sqlite3;

namespace acc::tracking::trackio {

// Where trackio keeps its projects: $TRACKIO_DIR, else huggingface_hub's HF_HOME/trackio ($HF_HOME,
// else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface), made absolute.
std::string storage_dir();
// The name a project's files take: its letters, digits, '-' and '_' ("default" where none is left).
std::string canonical_project_name(const std::string& project);
// InvalidArgument for a project name trackio refuses ("registry-" names, names whose files would be
// another project's parquet exports) or whose files' names would be too long.
void check_project_name(const std::string& project);
// Python's datetime.fromtimestamp(seconds, timezone.utc).isoformat(): "2026-12-05T17:40:12.250000+00:00"
// (no fraction where the microseconds are 0), as trackio stamps rows and configurations.
std::string iso_timestamp(double seconds);

struct MetricRow {
  std::string timestamp;  // iso_timestamp
  int64_t step = 0;
  std::string metrics;  // a JSON object
  std::string log_id;   // unique: a row written twice is kept once
};

class ProjectDatabase {
 public:
  // Opens <dir>/<canonical project name>.db, creating it and the tables trackio writes where they are
  // missing. A file that is not a database, or not one of trackio's, is refused (Io, naming it)
  // before anything is written to it. Databases of trackio before run ids (no run_id columns) are
  // written as trackio writes them, by run name.
  ProjectDatabase(const std::string& dir, const std::string& project);
  ~ProjectDatabase();
  ProjectDatabase(const ProjectDatabase&) = delete;
  ProjectDatabase& operator=(const ProjectDatabase&) = delete;

  const std::string& path() const { return path_; }
  // The names of the runs with logged rows.
  std::vector<std::string> run_names();
  // The id of the newest run named `name` (by its first row's time; its name where the database has
  // no run ids), or none if no run has that name.
  std::optional<std::string> latest_run_id(const std::string& name);
  // The largest step logged by the run, or none.
  std::optional<int64_t> last_step(const std::string& run_id);
  // Adds the rows (a row whose log_id is there already is skipped) and, where `config` is given,
  // sets the run's configuration, in one transaction under trackio's project lock.
  void add_rows(const std::string& run_id, const std::string& run_name, const std::vector<MetricRow>& rows,
                const std::optional<std::string>& config);

 private:
  class Statement;
  void execute(const char* sql);
  // Fails with Io naming the database and what was being done, where `code` is an SQLite error.
  void check(int code, const char* doing) const;
  void check_tables();
  void create_tables();

  std::string path_, lock_path_;
  sqlite3* db_ = nullptr;
  bool metrics_have_run_ids_ = true, configs_have_run_ids_ = true;
};

}  // namespace acc::tracking::trackio
