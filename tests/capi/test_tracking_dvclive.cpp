// log_with "dvclive": DVCLive's folder and dvc.yaml, read back as DVC and DVCLive read them
// (tests/interop/read_dvclive.py: PyYAML for dvc.yaml and params.yaml, json for metrics.json, csv's
// tab-separated tables); a run's cleanup and resume; mistakes refused before anything is written.
// The tests give `dir` and `dvcyaml` (DVCLive's default is the working folder) and turn save_dvc_exp
// off where the working folder is inside a Git repository.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "support.h"

namespace {

namespace fs = std::filesystem;

nlohmann::json read_back(const std::string& dir, const std::string& dvc_yaml) {
  const std::string out = dir + ".read.json";
  const std::string command = std::string("'") + ACC_TEST_PYTHON + "' '" + ACC_DVCLIVE_READER + "' '" + dir + "' '" +
                              dvc_yaml + "' > '" + out + "'";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return nlohmann::json::parse(acc_test::read_file(out));
}

// init_kwargs for dvclive: dir, dvcyaml, save_dvc_exp off, and `more` keys (JSON text starting ", ").
std::string kwargs(const std::string& dir, const std::string& dvc_yaml, const std::string& more = "") {
  nlohmann::json k = nlohmann::json::parse(R"({"save_dvc_exp": false)" + more + "}");
  k["dir"] = dir;
  k["dvcyaml"] = dvc_yaml;
  return nlohmann::json({{"dvclive", k}}).dump();
}

// Whether the working folder is inside a Git repository (as this source tree usually is).
bool inside_git() {
  for (fs::path dir = fs::current_path();; dir = dir.parent_path()) {
    if (fs::exists(dir / ".git")) return true;
    if (dir == dir.parent_path()) return false;
  }
}

}  // namespace

// Numbers, NaN, texts and groups as DVCLive writes them: a table per name (a '/' makes folders, the
// header names the last part), metrics.json nesting the latest values with "step", params.yaml with
// the configuration, dvc.yaml naming the three; a name metrics.json cannot hold is refused.
TEST(DvcliveTracking, WritesWhatDvcReads) {
  const std::string root = acc_test::fresh_dir("dvclive");
  const std::string dir = root + "/live", dvc_yaml = root + "/dvc.yaml";
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "dvclive"}});
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "run", R"({"lr": 0.001, "tiny": 1e-05, "name": "true", "layers": [64, 32],
                                                   "nested": {"a": 1, "flag": true}})",
                                     kwargs(dir, dvc_yaml).c_str()));
  EXPECT_EQ(acc_test::tracker_path(a, "dvclive"), dir);
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.5, 0));
  ACC_ASSERT_OK(acc_log_scalar(a, "train/acc", 0.25, 0));
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", std::nan(""), -1));  // step 1
  const char* text_names[] = {"note"};
  const char* texts[] = {"tab\there \"quoted\""};
  ACC_ASSERT_OK(acc_log_text(a, text_names, texts, 1, -1));  // step 2: DVCLive takes str values as metrics
  const char* names[] = {"acc"};
  const double values[] = {0.75};
  ACC_ASSERT_OK(acc_log_scalars(a, "eval", names, values, 1, 5));
  // "loss" holds a value: a group under it is refused (DVCLive's summary fails on it too).
  ACC_EXPECT_ERROR(acc_log_scalars(a, "loss", names, values, 1, 6), ACC_ERR_INVALID_ARGUMENT,
                   "where \"loss\" holds a value");
  for (const char* bad : {"step", "a//b", "a/../b", "./a", "a/"})
    ACC_EXPECT_ERROR(acc_log_scalar(a, bad, 1.0, 7), ACC_ERR_INVALID_ARGUMENT, "dvclive: the name");
  ACC_ASSERT_OK(acc_end_training(a));

  const nlohmann::json got = read_back(dir, dvc_yaml);
  EXPECT_EQ(got["dvc.yaml"], nlohmann::json::parse(R"({"params": ["live/params.yaml"], "metrics": ["live/metrics.json"],
                                                     "plots": [{"live/plots/metrics": {"x": "step"}}]})"));
  EXPECT_EQ(got["params"], nlohmann::json::parse(R"({"lr": 0.001, "tiny": 1e-05, "name": "true", "layers": [64, 32],
                                                   "nested": {"a": 1, "flag": true}})"));
  // (NaN as Live.log_metric keeps it, str(val): "nan", strict JSON; found by a hunt: a bare NaN)
  EXPECT_EQ(got["metrics"], nlohmann::json::parse(R"({"loss": "nan", "train": {"acc": 0.25},
                                                    "note": "tab\there \"quoted\"", "eval": {"acc": 0.75},
                                                    "step": 5})"));
  EXPECT_EQ(got["tables"], nlohmann::json::parse(R"({"loss": [[0, "0.5"], [1, "nan"]], "train/acc": [[0, "0.25"]],
                                                   "note": [[2, "tab\there \"quoted\""]],
                                                   "eval/acc": [[5, "0.75"]]})"));
  EXPECT_EQ(acc_test::read_file(dir + "/plots/metrics/loss.tsv"), "step\tloss\n0\t0.5\n1\tnan\n");

  // A new run empties the folder of the last one; a run that resumes keeps it, adds rows to the
  // tables (no second header) and updates the parameters.
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "run", R"({"lr": 0.1})", kwargs(dir, dvc_yaml).c_str()));
  ACC_ASSERT_OK(acc_log_scalar(a, "other", 2.0, 0));
  ACC_ASSERT_OK(acc_log_scalar(a, "far", -HUGE_VAL, 0));
  ACC_ASSERT_OK(acc_end_training(a));
  nlohmann::json fresh = read_back(dir, dvc_yaml);
  EXPECT_EQ(fresh["tables"], nlohmann::json::parse(R"({"other": [[0, "2.0"]], "far": [[0, "-inf"]]})"));
  EXPECT_EQ(fresh["params"], nlohmann::json::parse(R"({"lr": 0.1})"));
  ACC_ASSERT_OK(
      acc_init_trackers_ex(a, "run", R"({"epochs": 3})", kwargs(dir, dvc_yaml, R"(, "resume": true)").c_str()));
  ACC_EXPECT_ERROR(acc_log_scalar(a, "other/x", 1.0, 1), ACC_ERR_INVALID_ARGUMENT, "where \"other\" holds a value");
  ACC_ASSERT_OK(acc_log_scalar(a, "other", 3.0, 1));
  ACC_ASSERT_OK(acc_end_training(a));
  const nlohmann::json resumed = read_back(dir, dvc_yaml);
  EXPECT_EQ(resumed["tables"], nlohmann::json::parse(R"({"other": [[0, "2.0"], [1, "3.0"]], "far": [[0, "-inf"]]})"));
  EXPECT_EQ(resumed["params"], nlohmann::json::parse(R"({"lr": 0.1, "epochs": 3})"));
  // (the summary read back and written again as DVCLive keeps it: "-inf")
  EXPECT_EQ(resumed["metrics"], nlohmann::json::parse(R"({"other": 3.0, "far": "-inf", "step": 1})"));

  // A dvc.yaml inside DVCLive's folder names the folder's files by their own paths; a run that
  // resumes takes it back as DVCLive's.
  const std::string inner = dir + "/dvc.yaml";
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "run", R"({"lr": 0.1})", kwargs(dir, inner).c_str()));
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 1.0, 0));
  ACC_ASSERT_OK(acc_end_training(a));
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "run", nullptr, kwargs(dir, inner, R"(, "resume": true)").c_str()));
  ACC_ASSERT_OK(acc_end_training(a));
  EXPECT_EQ(read_back(dir, inner)["dvc.yaml"],
            nlohmann::json::parse(R"({"params": ["params.yaml"], "metrics": ["metrics.json"],
                                      "plots": [{"plots/metrics": {"x": "step"}}]})"));
  acc_accelerator_free(a);
}

// A resumed run's logs without a step go on from the step its metrics.json holds, as DVCLive's Live
// takes it back (found by a hunt: they started at 0 again, drawn back at the plots' start).
// Rows logged after the writer's first flush (once a second) are written too, short ones included
// (found reviewing: the table's header was not counted among the bytes waiting, and once written,
// the count was short by its length, so a row shorter than the header was taken for one too many).
TEST(DvcliveTracking, RowsLoggedAfterAFlushAreKept) {
  const std::string root = acc_test::fresh_dir("dvclive_flushed");
  const std::string dir = root + "/live";
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "dvclive"}});
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "run", nullptr, kwargs(dir, root + "/dvc.yaml").c_str()));
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.5, 0));
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // the writer flushes meanwhile
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.5, 1));
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.5, 2));
  ACC_ASSERT_OK(acc_end_training(a));
  EXPECT_EQ(acc_test::read_file(dir + "/plots/metrics/loss.tsv"), "step\tloss\n0\t0.5\n1\t0.5\n2\t0.5\n");
  acc_accelerator_free(a);
}

TEST(DvcliveTracking, AResumedRunGoesOnFromItsLastStep) {
  const std::string root = acc_test::fresh_dir("dvclive_resumed_steps");
  const std::string dir = root + "/live", dvc_yaml = root + "/dvc.yaml";
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "dvclive"}});
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "run", nullptr, kwargs(dir, dvc_yaml).c_str()));
  for (double loss : {1.0, 2.0, 3.0}) ACC_ASSERT_OK(acc_log_scalar(a, "loss", loss, -1));
  ACC_ASSERT_OK(acc_end_training(a));
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "run", nullptr, kwargs(dir, dvc_yaml, R"(, "resume": true)").c_str()));
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 4.0, -1));
  ACC_ASSERT_OK(acc_end_training(a));
  const nlohmann::json got = read_back(dir, dvc_yaml);
  EXPECT_EQ(got["tables"]["loss"], nlohmann::json::parse(R"([[0, "1.0"], [1, "2.0"], [2, "3.0"], [3, "4.0"]])"));
  EXPECT_EQ(got["metrics"]["step"], 3);
  acc_accelerator_free(a);
}

// Mistakes, each before anything is written: a dvc.yaml of the user's (stages) is left as it is; a
// report, system monitoring, a dvcyaml not named dvc.yaml, an unknown keyword; saving a DVC
// experiment from inside a Git repository.
TEST(DvcliveTracking, RefusesWhatItDoesNotBuild) {
  const std::string root = acc_test::fresh_dir("dvclive_refusals");
  const std::string dir = root + "/live", dvc_yaml = root + "/dvc.yaml";
  const std::string stages = "stages:\n  train:\n    cmd: ./train  # the user's\n";
  fs::create_directories(root);
  std::ofstream(dvc_yaml) << stages;
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "dvclive"}});
  ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "run", nullptr, kwargs(dir, dvc_yaml).c_str()), ACC_ERR_UNSUPPORTED,
                   "holds entries of its own");
  EXPECT_EQ(acc_test::read_file(dvc_yaml), stages);
  EXPECT_FALSE(fs::exists(dir));
  ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "run", nullptr, kwargs(dir, dvc_yaml, R"(, "report": "html")").c_str()),
                   ACC_ERR_UNSUPPORTED, "reports are not built");
  ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "run", nullptr, kwargs(dir, dvc_yaml, R"(, "report": "pdf")").c_str()),
                   ACC_ERR_INVALID_ARGUMENT, "\"report\"");
  ACC_EXPECT_ERROR(
      acc_init_trackers_ex(a, "run", nullptr, kwargs(dir, dvc_yaml, R"(, "monitor_system": true)").c_str()),
      ACC_ERR_UNSUPPORTED, "system metrics");
  ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "run", nullptr, kwargs(dir, root + "/pipeline.yaml").c_str()),
                   ACC_ERR_INVALID_ARGUMENT, "a file named dvc.yaml");
  ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "run", nullptr, kwargs(dir, dvc_yaml, R"(, "live": 1)").c_str()),
                   ACC_ERR_INVALID_ARGUMENT, "takes no keyword argument \"live\"");
  // dvcyaml false: no dvc.yaml at all (the user's stays as it is).
  ACC_ASSERT_OK(acc_init_trackers_ex(
      a, "run", nullptr,
      nlohmann::json({{"dvclive", {{"dir", dir}, {"dvcyaml", false}, {"save_dvc_exp", false}}}}).dump().c_str()));
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 1.0, 0));
  ACC_ASSERT_OK(acc_end_training(a));
  EXPECT_EQ(acc_test::read_file(dvc_yaml), stages);
  EXPECT_EQ(acc_test::read_file(dir + "/plots/metrics/loss.tsv"), "step\tloss\n0\t1.0\n");
  if (inside_git()) {
    const std::string defaults = nlohmann::json({{"dvclive", {{"dir", dir}, {"dvcyaml", false}}}}).dump();
    ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "run", nullptr, defaults.c_str()), ACC_ERR_UNSUPPORTED, "save_dvc_exp");
  }
  acc_accelerator_free(a);
  // "all" leaves dvclive out: it writes into the working folder.
  acc_accelerator* all = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "all"}, {"project_dir", root}});
  EXPECT_EQ(acc_test::tracker_names(all), (std::vector<std::string>{"tensorboard", "jsonl", "csv", "mlflow"}));
  acc_accelerator_free(all);
}
