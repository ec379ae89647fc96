// Trackers on several processes, run by CTest through accelerate-launch: every process makes the
// same calls, only the main one writes files or calls the program's trackers.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sqlite3.h>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "accelerate.h"
#include "../capi/support.h"
#include "../capi/tracking_reader.h"

namespace {

struct Counter {
  int calls = 0;
};
int count_init(void* c, const char*, const char*) { return ++static_cast<Counter*>(c)->calls, 0; }
int count_log(void* c, const char* const*, const double*, size_t, int64_t) { return ++static_cast<Counter*>(c)->calls, 0; }
int count_finish(void* c) { return ++static_cast<Counter*>(c)->calls, 0; }

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

// The rows of trackio's metrics table in the database at `path`, and their runs.
std::pair<int64_t, int64_t> trackio_rows_and_runs(const std::string& path) {
  sqlite3* db = nullptr;
  std::pair<int64_t, int64_t> counts{-1, -1};
  // Read-only, waiting out the lock another process reading it at the same moment may hold.
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 10000);
    sqlite3_stmt* query = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT COUNT(*), COUNT(DISTINCT run_id) FROM metrics", -1, &query, nullptr) ==
            SQLITE_OK &&
        sqlite3_step(query) == SQLITE_ROW)
      counts = {sqlite3_column_int64(query, 0), sqlite3_column_int64(query, 1)};
    sqlite3_finalize(query);
  }
  sqlite3_close(db);
  return counts;
}

size_t line_count(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

}  // namespace

TEST(DistTracking, OnlyTheMainProcessWrites) {
  const char* base = std::getenv("ACC_TEST_TRACK_DIR");
  ASSERT_NE(base, nullptr) << "ACC_TEST_TRACK_DIR is not set";
  const std::string dir = base;
  // trackio's projects' folder: set alike on every process, as a launcher's environment would be.
  acc_test::ScopedEnv trackio_dir("TRACKIO_DIR", (dir + "/trackio").c_str());
  acc_accelerator* a = acc_test::make_accelerator({{"log_with", "all,dvclive,trackio"}, {"project_dir", dir}});
  ASSERT_NE(a, nullptr);
  int64_t rank = -1, world = 0;
  ACC_ASSERT_OK(acc_accelerator_process_index(a, &rank));
  ACC_ASSERT_OK(acc_accelerator_num_processes(a, &world));
  ASSERT_GE(world, 2);
  if (rank == 0) ASSERT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
  ACC_ASSERT_OK(acc_wait_for_everyone(a));

  Counter counter;
  ACC_ASSERT_OK(acc_add_tracker(a, "counter", count_init, count_log, count_finish, &counter, nullptr));
  // Mistakes are reported on every process, not only where the files are.
  EXPECT_EQ(acc_log_scalar(a, "loss", 1.0, -1), ACC_ERR_NOT_INITIALIZED);
  // DVCLive's folder is the working folder's unless init_kwargs say where.
  const std::string dvclive = R"({"dvclive": {"dir": ")" + dir + R"(/dvclive", "dvcyaml": ")" + dir +
                              R"(/dvc.yaml", "save_dvc_exp": false}})";
  // trackio's registries' names, refused on every process.
  EXPECT_EQ(acc_init_trackers_ex(a, "registry-models", nullptr, dvclive.c_str()), ACC_ERR_INVALID_ARGUMENT);
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "run", R"({"world_size": 2})", dvclive.c_str()));
  for (int step = 0; step < 5; ++step) ACC_ASSERT_OK(acc_log_scalar(a, "loss", 1.0 + step + rank * 100, -1));
  ACC_ASSERT_OK(acc_end_training(a));

  char* path = nullptr;
  ACC_ASSERT_OK(acc_tracker_path(a, "jsonl", &path));
  EXPECT_EQ(std::string(path).empty(), rank != 0) << path;
  acc_string_free(path);
  ACC_ASSERT_OK(acc_tracker_path(a, "dvclive", &path));
  EXPECT_EQ(std::string(path), rank == 0 ? dir + "/dvclive" : "");
  acc_string_free(path);
  ACC_ASSERT_OK(acc_tracker_path(a, "trackio", &path));
  EXPECT_EQ(std::string(path), rank == 0 ? dir + "/trackio/run.db" : "");
  acc_string_free(path);
  EXPECT_EQ(counter.calls, rank == 0 ? 7 : 0);  // init, 5 logs, finish

  // Every process looks at the files once all are done.
  ACC_ASSERT_OK(acc_wait_for_everyone(a));
  const std::string run = dir + "/run";
  std::vector<std::string> events;
  for (const auto& name : files_in(run))
    if (name.find("tfevents") != std::string::npos) events.push_back(name);
  ASSERT_EQ(events.size(), 1u) << "one event file, by the main process";
  EXPECT_EQ(line_count(run + "/metrics.jsonl"), 5u);
  EXPECT_EQ(line_count(run + "/metrics.csv"), 6u);
  // MLflow's store: one run's file for "loss" (not one per process), the main process's 5 lines.
  std::vector<std::string> loss_files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir + "/mlruns"))
    if (entry.path().filename() == "loss") loss_files.push_back(entry.path().string());
  ASSERT_EQ(loss_files.size(), 1u);
  EXPECT_EQ(line_count(loss_files[0]), 5u);
  // DVCLive's table: the header and the main process's 5 rows.
  EXPECT_EQ(line_count(dir + "/dvclive/plots/metrics/loss.tsv"), 6u);
  EXPECT_TRUE(std::filesystem::exists(dir + "/dvc.yaml"));
  // trackio's database: one run, the main process's 5 rows.
  EXPECT_EQ(trackio_rows_and_runs(dir + "/trackio/run.db"), std::make_pair(int64_t{5}, int64_t{1}));
  float first_loss = -1;
  for (const auto& e : acc_test::read_event_file(run + "/" + events[0]))
    for (const auto& v : e.values)
      if (v.tag == "loss" && e.step == 0) first_loss = v.simple_value;
  EXPECT_EQ(first_loss, 1.0f) << "the main process's values";
  ACC_ASSERT_OK(acc_wait_for_everyone(a));
  acc_accelerator_free(a);
}
