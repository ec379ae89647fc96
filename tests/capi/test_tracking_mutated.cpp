// The files trackers read back, damaged: MLflow's store (every meta.yaml, tag and parameter file,
// read when a run starts in it or resumes), DVCLive's folder (metrics.json, params.yaml and
// dvc.yaml, read when a run resumes) and trackio's project database (an SQLite file, read when a run
// starts, written as it logs). Each file is mutated many ways (bytes changed, cut, inserted,
// repeated; nesting a parser would recurse into, aliases that expand, NUL bytes, numbers out of
// range); every run started on them either works or is refused with a status and a message, never
// a crash or ACC_ERR_INTERNAL, and the next run on the repaired files works.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "support.h"

namespace {

namespace fs = std::filesystem;

std::map<std::string, std::string> regular_files(const std::string& root) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(root))
    if (entry.is_regular_file()) files[entry.path().string()] = acc_test::read_file(entry.path().string());
  return files;
}

std::set<std::string> folders(const std::string& root) {
  std::set<std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(root))
    if (entry.is_directory()) out.insert(entry.path().string());
  return out;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Puts the files back as they were and removes the files and folders that runs on the damaged ones
// added (`kept`: the files and folders that were there).
void restore(const std::string& root, const std::map<std::string, std::string>& files,
             const std::set<std::string>& kept) {
  std::vector<fs::path> added;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string path = entry.path().string();
    if (!files.count(path) && !kept.count(path)) added.push_back(entry.path());
  }
  for (const auto& path : added) fs::remove_all(path);
  for (const auto& [path, bytes] : files) write(path, bytes);
}

// Texts that parsers meet badly: deep nesting, aliases of aliases, NUL bytes, huge numbers.
std::vector<std::string> hostile_texts() {
  std::string laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'k'; ++c) {
    laughs += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 9; ++i) laughs += std::string(i ? ", " : "") + "*" + char(c - 1);
    laughs += "]\n";
  }
  return {"",
          std::string(200000, '['),
          std::string(100000, '{'),
          "a:\n" + std::string(50000, ' ') + "- " + std::string(50000, '-'),
          laughs,
          std::string("step: 1\0\0\0", 10),
          "{\"step\": 1e999999, \"loss\": -1e999999}",
          "{\"step\": 99999999999999999999999999, \"a\": {\"b\": [1, 2, {\"c\": null}]}}",
          "\xff\xfe\xfd not UTF-8 \xc3\x28",
          "[1, 2, 3]",
          "lifecycle_stage: deleted\n",
          "!!binary |\n  AAAA\n"};
}

std::string mutated(const std::string& original, std::mt19937& rng) {
  std::string s = original;
  auto at = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n)(rng); };
  switch (std::uniform_int_distribution<int>(0, 4)(rng)) {
    case 0:  // bytes changed
      for (int k = 0, n = 1 + int(at(7)); k < n && !s.empty(); ++k) s[at(s.size() - 1)] = char(rng());
      break;
    case 1:  // cut
      s.resize(at(s.size()));
      break;
    case 2: {  // bytes inserted
      std::string bytes(1 + at(15), '\0');
      for (auto& b : bytes) b = "{}[]:,\"'&*!|>-\n #0aZ\\"[at(20)];
      s.insert(at(s.size()), bytes);
      break;
    }
    case 3: {  // a slice repeated
      const size_t from = at(s.size()), length = at(s.size() - from);
      s.insert(at(s.size()), s.substr(from, length));
      break;
    }
    default: {  // a hostile text in place of the whole file
      const auto texts = hostile_texts();
      s = texts[at(texts.size() - 1)];
    }
  }
  return s;
}

// Runs `start` (which starts a run and may log and end it) on each damaged version of each file in
// `files`; the status of every call must be one a damaged file may give.
template <typename Start>
void on_damaged_files(const std::string& root, const std::map<std::string, std::string>& files, int rounds,
                      Start start) {
  std::mt19937 rng(20261205);
  const std::set<std::string> kept = [&] {
    std::set<std::string> all = folders(root);
    for (const auto& entry : regular_files(root)) all.insert(entry.first);  // files not mutated
    return all;
  }();
  std::vector<std::string> paths;
  for (const auto& entry : files) paths.push_back(entry.first);
  int refused = 0, started = 0;
  for (int r = 0; r < rounds; ++r) {
    const std::string& path = paths[size_t(r) % paths.size()];
    const auto texts = hostile_texts();
    write(path, r < int(paths.size() * texts.size()) ? texts[size_t(r) / paths.size()] : mutated(files.at(path), rng));
    const acc_status status = start();
    SCOPED_TRACE(path);
    EXPECT_NE(status, ACC_ERR_INTERNAL) << acc_last_error_message();
    if (status == ACC_OK) {
      ++started;
    } else {
      ++refused;
      EXPECT_STRNE(acc_last_error_message(), "");
    }
    restore(root, files, kept);
  }
  EXPECT_EQ(start(), ACC_OK) << "on the repaired files: " << acc_last_error_message();
  std::printf("%d damaged versions: %d runs started, %d refused\n", rounds, started, refused);
}

}  // namespace

TEST(MutatedTrackerFiles, MlflowStoreNeverCrashes) {
  const std::string dir = acc_test::fresh_dir("mutated_mlflow");
  const std::string root = dir + "/mlruns";
  const acc_test::ScopedEnv uri("MLFLOW_TRACKING_URI", root.c_str()), experiment("MLFLOW_EXPERIMENT_NAME", nullptr),
      run_id("MLFLOW_RUN_ID", nullptr), tags("MLFLOW_TAGS", nullptr);
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "mlflow"}});
  ACC_ASSERT_OK(acc_init_trackers(a, "project", R"({"lr": 0.1, "name": "x"})"));
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.5, 0));
  ACC_ASSERT_OK(acc_end_training(a));
  const std::string run = fs::path(acc_test::tracker_path(a, "mlflow")).filename();
  std::map<std::string, std::string> files;
  for (const auto& [path, bytes] : regular_files(root))
    if (path.find("/metrics/") == std::string::npos) files[path] = bytes;  // metric files are written, not read
  ASSERT_GE(files.size(), 6u);
  int round = 0;
  on_damaged_files(root, files, 600, [&] {
    // Half the rounds start a new run in the experiment, half resume the run.
    const acc_test::ScopedEnv resume("MLFLOW_RUN_ID", round++ % 2 ? run.c_str() : nullptr);
    acc_status status = acc_init_trackers(a, "project", R"({"lr": 0.1, "name": "x"})");
    if (status != ACC_OK) return status;
    status = acc_log_scalar(a, "loss", 0.25, 1);
    const acc_status ended = acc_end_training(a);
    return status != ACC_OK ? status : ended;
  });
  acc_accelerator_free(a);
}

TEST(MutatedTrackerFiles, DvcliveResumeNeverCrashes) {
  const std::string dir = acc_test::fresh_dir("mutated_dvclive");
  const std::string live = dir + "/live", dvc_yaml = dir + "/dvc.yaml";
  const std::string kwargs = "{\"dvclive\": {\"dir\": \"" + live + "\", \"dvcyaml\": \"" + dvc_yaml +
                             "\", \"save_dvc_exp\": false, \"resume\": true}}";
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "dvclive"}});
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "run", R"({"lr": 0.1, "layers": [1, 2]})", kwargs.c_str()));
  ACC_ASSERT_OK(acc_log_scalar(a, "train/loss", 0.5, 0));
  ACC_ASSERT_OK(acc_end_training(a));
  std::map<std::string, std::string> files;
  for (const auto& [path, bytes] : regular_files(dir))
    if (path.find("/plots/") == std::string::npos) files[path] = bytes;  // the tables are appended to, not read
  ASSERT_EQ(files.size(), 3u);
  on_damaged_files(dir, files, 300, [&] {
    acc_status status = acc_init_trackers_ex(a, "run", R"({"lr": 0.1})", kwargs.c_str());
    if (status != ACC_OK) return status;
    status = acc_log_scalar(a, "train/loss", 0.25, 1);
    const acc_status ended = acc_end_training(a);
    return status != ACC_OK ? status : ended;
  });
  acc_accelerator_free(a);
}

TEST(MutatedTrackerFiles, TrackioDatabaseNeverCrashes) {
  const std::string dir = acc_test::fresh_dir("mutated_trackio");
  const acc_test::ScopedEnv trackio_dir("TRACKIO_DIR", dir.c_str());
  const std::string kwargs = R"({"trackio": {"name": "r", "resume": "allow"}})";
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "trackio"}});
  for (int step = 0; step < 20; ++step) {  // a few pages of rows, in two runs
    ACC_ASSERT_OK(acc_init_trackers_ex(a, "project", R"({"lr": 0.1})", step % 2 ? kwargs.c_str() : nullptr));
    ACC_ASSERT_OK(acc_log_scalar(a, "train/loss", 0.5 / (step + 1), step));
    ACC_ASSERT_OK(acc_end_training(a));
  }
  const std::string db = dir + "/project.db";
  const std::map<std::string, std::string> files = {{db, acc_test::read_file(db)}};
  on_damaged_files(dir, files, 300, [&] {
    acc_status status = acc_init_trackers_ex(a, "project", R"({"lr": 0.1})", kwargs.c_str());
    if (status != ACC_OK) return status;
    status = acc_log_scalar(a, "train/loss", 0.25, 100);
    const acc_status ended = acc_end_training(a);
    return status != ACC_OK ? status : ended;
  });
  acc_accelerator_free(a);
}
