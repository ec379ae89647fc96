#include "tracking/trackio_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <set>
#include <thread>

#include "common/environment.h"
#include "common/error.h"
#include "common/file_lock.h"
#include "common/files.h"
#include "common/text.h"

namespace acc::tracking::trackio {
namespace fs = std::filesystem;
namespace {

// Suffixes of the parquet files trackio exports a project's other tables to: a project whose name
// ends in one would share those files with the project named by the rest.
const char* const kReservedSuffixes[] = {
    "_system", "_configs", "_traces", "_artifacts", "_artifact_versions", "_artifact_aliases", "_run_artifact_links"};
constexpr const char* kRegistryPrefix = "registry-";  // trackio's registries of artifacts

// The value of a pragma setting from the environment where it is one of `allowed` (trackio's
// TRACKIO_SQLITE_* overrides), else `fallback`.
std::string pragma_setting(const char* variable, const std::set<std::string>& allowed, const char* fallback) {
  if (const char* value = nonempty_env(variable)) {
    const std::string setting = lowercase(trimmed(value));
    if (allowed.count(setting)) return setting;
  }
  return fallback;
}

}  // namespace

std::string storage_dir() {
  const char* trackio_dir = nonempty_env("TRACKIO_DIR");
  const std::string dir = trackio_dir ? std::string(trackio_dir) : huggingface_home() + "/trackio";
  return fs::absolute(fs::path(dir)).lexically_normal().string();
}

std::string canonical_project_name(const std::string& project) {
  std::string name;
  for (const char c : project)
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') name += c;
  return name.empty() ? "default" : name;
}

void check_project_name(const std::string& project) {
  const std::string canonical = canonical_project_name(project);
  require(canonical.rfind(kRegistryPrefix, 0) != 0, "trackio: the project name \"", project,
          "\" is not allowed: names beginning with \"", kRegistryPrefix, "\" are trackio's registries");
  for (const std::string suffix : kReservedSuffixes)
    require(canonical.size() <= suffix.size() ||
                canonical.compare(canonical.size() - suffix.size(), suffix.size(), suffix) != 0,
            "trackio: the project name \"", project, "\" is not allowed: its file name \"", canonical,
            "\" ends with \"", suffix, "\", which trackio's exports of the project \"",
            canonical.substr(0, canonical.size() - suffix.size()), "\" use");
  require(canonical.size() + std::strlen(".lock") <= kFileNameMax, "trackio: the project name \"", project,
          "\" is too long for its database's file name (", canonical.size(), " letters, at most ",
          kFileNameMax - std::strlen(".lock"), ")");
}

std::string iso_timestamp(double seconds) {
  using namespace std::chrono;
  const int64_t micros = std::llround(seconds * 1e6);
  int64_t whole = micros / 1000000, fraction = micros % 1000000;
  if (fraction < 0) fraction += 1000000, whole -= 1;
  const std::time_t time = static_cast<std::time_t>(whole);
  std::tm utc{};
  gmtime_r(&time, &utc);
  char text[48];
  size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  if (fraction != 0) n += std::snprintf(text + n, sizeof text - n, ".%06lld", static_cast<long long>(fraction));
  std::snprintf(text + n, sizeof text - n, "+00:00");
  return text;
}

// ---- the database ----

class ProjectDatabase::Statement {
 public:
  Statement(const ProjectDatabase& owner, const char* sql) : owner_(owner) {
    owner.check(sqlite3_prepare_v2(owner.db_, sql, -1, &statement_, nullptr), sql);
  }
  ~Statement() { sqlite3_finalize(statement_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement& bind(int index, const std::string& text) {
    owner_.check(sqlite3_bind_text(statement_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT),
                 "binding a value");
    return *this;
  }
  Statement& bind(int index, int64_t number) {
    owner_.check(sqlite3_bind_int64(statement_, index, number), "binding a value");
    return *this;
  }
  // Whether a row came (false: the statement is done).
  bool next() {
    const int code = sqlite3_step(statement_);
    if (code == SQLITE_ROW) return true;
    owner_.check(code == SQLITE_DONE ? SQLITE_OK : code, sqlite3_sql(statement_));
    return false;
  }
  // Runs a statement that returns no rows again with new values.
  void run() {
    while (next()) {
    }
    sqlite3_reset(statement_);
    sqlite3_clear_bindings(statement_);
  }
  bool is_null(int column) const { return sqlite3_column_type(statement_, column) == SQLITE_NULL; }
  int64_t integer(int column) const { return sqlite3_column_int64(statement_, column); }
  std::string text(int column) const {
    const auto* bytes = reinterpret_cast<const char*>(sqlite3_column_text(statement_, column));
    return bytes ? std::string(bytes, static_cast<size_t>(sqlite3_column_bytes(statement_, column))) : std::string();
  }

 private:
  const ProjectDatabase& owner_;
  sqlite3_stmt* statement_ = nullptr;
};

ProjectDatabase::ProjectDatabase(const std::string& dir, const std::string& project) {
  check_project_name(project);
  const std::string canonical = canonical_project_name(project);
  path_ = dir + "/" + canonical + ".db";
  lock_path_ = dir + "/" + canonical + ".lock";
  make_folders(dir, "trackio's folder");
  std::error_code ec;
  const auto status = fs::status(path_, ec);
  if (!ec && fs::exists(status) && !fs::is_regular_file(status))
    fail(Status::Io, "trackio: the project's database ", path_, " is not a regular file");
  // trackio's ProcessLock: an exclusive flock on <project>.lock, tried every 0.1 s for 10 s.
  const FileLock lock(lock_path_, "trackio: the project's lock file", std::chrono::seconds(10));
  const int opened = sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (opened != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(opened);
    sqlite3_close(db_);
    db_ = nullptr;
    fail(Status::Io, "trackio: cannot open the project's database ", path_, ": ", why);
  }
  try {
    sqlite3_busy_timeout(db_, 30000);  // trackio's connections wait 30 s for another writer
    check_tables();
    static const std::set<std::string> journal_modes = {"wal", "delete", "truncate", "persist", "memory", "off"};
    static const std::set<std::string> synchronous = {"off", "normal", "full", "extra"};
    execute(("PRAGMA journal_mode = " + pragma_setting("TRACKIO_SQLITE_JOURNAL_MODE", journal_modes, "wal")).c_str());
    execute(("PRAGMA synchronous = " + pragma_setting("TRACKIO_SQLITE_SYNCHRONOUS", synchronous, "normal")).c_str());
    // trackio's: 20 MB of page cache (the default 2 MB rereads the indexes' pages at every batch).
    execute("PRAGMA cache_size = -20000");
    execute("PRAGMA temp_store = MEMORY");
    create_tables();
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

ProjectDatabase::~ProjectDatabase() { sqlite3_close(db_); }

void ProjectDatabase::check(int code, const char* doing) const {
  if (code == SQLITE_OK) return;
  fail(code == SQLITE_BUSY || code == SQLITE_LOCKED ? Status::Timeout : Status::Io, "trackio: the project's database ",
       path_, ": ", sqlite3_errmsg(db_), " (", doing, ")");
}

void ProjectDatabase::execute(const char* sql) {
  char* message = nullptr;
  const int code = sqlite3_exec(db_, sql, nullptr, nullptr, &message);
  if (code == SQLITE_OK) return;
  const std::string why = message ? message : sqlite3_errstr(code);
  sqlite3_free(message);
  fail(code == SQLITE_BUSY ? Status::Timeout : Status::Io, "trackio: the project's database ", path_, ": ", why, " (",
       sql, ")");
}

// Refuses a database whose metrics or configs table lacks a column trackio reads.
void ProjectDatabase::check_tables() {
  auto columns_of = [&](const char* table) {
    std::set<std::string> columns;
    Statement info(*this, (std::string("PRAGMA table_info(") + table + ")").c_str());
    while (info.next()) columns.insert(info.text(1));
    return columns;
  };
  auto require_columns = [&](const char* table, const std::set<std::string>& columns,
                             std::initializer_list<const char*> needed) {
    for (const char* column : needed)
      if (!columns.count(column))
        fail(Status::Io, "trackio: ", path_, " is not a trackio database: its table \"", table, "\" has no column \"",
             column, "\"");
  };
  const auto metrics = columns_of("metrics"), configs = columns_of("configs");
  if (!metrics.empty()) {
    require_columns("metrics", metrics, {"id", "timestamp", "run_name", "step", "metrics"});
    metrics_have_run_ids_ = metrics.count("run_id") > 0;
  }
  if (!configs.empty()) {
    require_columns("configs", configs, {"run_name", "config", "created_at"});
    configs_have_run_ids_ = configs.count("run_id") > 0;
  }
}

void ProjectDatabase::create_tables() {
  // Only the tables written here; trackio adds its others when it opens the database to write.
  execute(R"(CREATE TABLE IF NOT EXISTS metrics (
      id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, timestamp TEXT NOT NULL, run_name TEXT NOT NULL,
      step INTEGER NOT NULL, metrics TEXT NOT NULL, log_id TEXT, space_id TEXT))");
  execute(R"(CREATE TABLE IF NOT EXISTS configs (
      id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, run_name TEXT NOT NULL, config TEXT NOT NULL,
      created_at TEXT NOT NULL, UNIQUE(run_id)))");
  for (const char* column : {"log_id", "space_id"}) {  // added by trackio after its first versions
    Statement has(*this, "SELECT 1 FROM pragma_table_info('metrics') WHERE name = ?");
    if (!has.bind(1, std::string(column)).next())
      execute((std::string("ALTER TABLE metrics ADD COLUMN ") + column + " TEXT").c_str());
  }
  const std::string run_key = metrics_have_run_ids_ ? "run_id" : "run_name";
  execute(("CREATE INDEX IF NOT EXISTS idx_metrics_run_step ON metrics(" + run_key + ", step)").c_str());
  execute(("CREATE INDEX IF NOT EXISTS idx_metrics_run_timestamp ON metrics(" + run_key + ", timestamp)").c_str());
  execute("CREATE INDEX IF NOT EXISTS idx_configs_run_name ON configs(run_name)");
  execute("CREATE UNIQUE INDEX IF NOT EXISTS idx_metrics_log_id ON metrics(log_id) WHERE log_id IS NOT NULL");
  execute("CREATE INDEX IF NOT EXISTS idx_metrics_pending ON metrics(space_id) WHERE space_id IS NOT NULL");
}

std::vector<std::string> ProjectDatabase::run_names() {
  std::vector<std::string> names;
  Statement query(*this, "SELECT DISTINCT run_name FROM metrics");
  while (query.next()) names.push_back(query.text(0));
  return names;
}

std::optional<std::string> ProjectDatabase::latest_run_id(const std::string& name) {
  Statement query(*this, metrics_have_run_ids_
                             ? "SELECT run_id, MIN(timestamp) AS created_at FROM metrics WHERE run_name = ? "
                               "GROUP BY run_id ORDER BY created_at DESC LIMIT 1"
                             : "SELECT run_name FROM metrics WHERE run_name = ? LIMIT 1");
  if (!query.bind(1, name).next()) return std::nullopt;
  return query.text(0);
}

std::optional<int64_t> ProjectDatabase::last_step(const std::string& run_id) {
  Statement query(*this, metrics_have_run_ids_ ? "SELECT MAX(step) FROM metrics WHERE run_id = ?"
                                               : "SELECT MAX(step) FROM metrics WHERE run_name = ?");
  if (!query.bind(1, run_id).next() || query.is_null(0)) return std::nullopt;
  return query.integer(0);
}

void ProjectDatabase::add_rows(const std::string& run_id, const std::string& run_name,
                               const std::vector<MetricRow>& rows, const std::optional<std::string>& config) {
  if (rows.empty() && !config) return;
  const FileLock lock(lock_path_, "trackio: the project's lock file", std::chrono::seconds(10));
  execute("BEGIN IMMEDIATE");
  try {
    Statement insert(*this, metrics_have_run_ids_
                                ? "INSERT OR IGNORE INTO metrics (timestamp, run_id, run_name, step, metrics, log_id) "
                                  "VALUES (?, ?, ?, ?, ?, ?)"
                                : "INSERT OR IGNORE INTO metrics (timestamp, run_name, step, metrics, log_id) "
                                  "VALUES (?, ?, ?, ?, ?)");
    for (const MetricRow& row : rows) {
      int column = 1;
      insert.bind(column++, row.timestamp);
      if (metrics_have_run_ids_) insert.bind(column++, run_id);
      insert.bind(column++, run_name).bind(column++, row.step).bind(column++, row.metrics).bind(column++, row.log_id);
      insert.run();
    }
    if (config) {
      Statement replace(*this, configs_have_run_ids_
                                   ? "INSERT OR REPLACE INTO configs (run_id, run_name, config, created_at) "
                                     "VALUES (?, ?, ?, ?)"
                                   : "INSERT OR REPLACE INTO configs (run_name, config, created_at) VALUES (?, ?, ?)");
      int column = 1;
      if (configs_have_run_ids_) replace.bind(column++, run_id);
      const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
      replace.bind(column++, run_name).bind(column++, *config).bind(column++, iso_timestamp(now));
      replace.run();
    }
    execute("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

}  // namespace acc::tracking::trackio
