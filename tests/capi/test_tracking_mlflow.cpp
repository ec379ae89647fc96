// log_with "mlflow": MLflow's file store written by the library, read back as MLflow's FileStore
// reads it (tests/interop/read_mlflow_store.py, PyYAML; MLflow's own client too where installed).
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "support.h"

namespace {

namespace fs = std::filesystem;

// No MLFLOW_* of the machine running the tests reaches them.
struct CleanMlflowEnv {
  using ScopedEnv = acc_test::ScopedEnv;
  ScopedEnv uri{"MLFLOW_TRACKING_URI", nullptr}, experiment{"MLFLOW_EXPERIMENT_NAME", nullptr},
      run{"MLFLOW_RUN_ID", nullptr}, tags{"MLFLOW_TAGS", nullptr};
};

acc_accelerator* make(const std::string& log_with, const std::string& project_dir) {
  std::vector<std::pair<std::string, std::string>> options = {{"cpu", "true"}, {"log_with", log_with}};
  if (!project_dir.empty()) options.emplace_back("project_dir", project_dir);
  return acc_test::make_accelerator(options);
}

// The store as MLflow reads it (the reader fails on anything MLflow would refuse to read).
nlohmann::json read_store(const std::string& root) {
  const std::string out = root + ".read.json";
  const std::string command =
      std::string("'") + ACC_TEST_PYTHON + "' '" + ACC_MLFLOW_READER + "' '" + root + "' > '" + out + "'";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return nlohmann::json::parse(acc_test::read_file(out));
}

// The one experiment of `store` named `name`.
nlohmann::json experiment_named(const nlohmann::json& store, const std::string& name) {
  for (const auto& [id, experiment] : store["experiments"].items())
    if (experiment["name"] == name) return experiment;
  ADD_FAILURE() << "no experiment " << name << " in " << store.dump();
  return nlohmann::json::object();
}

// A history as MLflow's reader gives it, without the timestamps: [repr(value), step] pairs.
std::vector<std::pair<std::string, int64_t>> values_and_steps(const nlohmann::json& history) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& entry : history) out.emplace_back(entry[1].get<std::string>(), entry[2].get<int64_t>());
  return out;
}

}  // namespace

// A run as Accelerate's MLflowTracker leaves it: the project's experiment (its artifact location the
// logging folder) beside MLflow's Default one, the configuration's keys as parameters printed as
// Python's str() prints the values (one past MLflow's 6000 characters left out), every number at its
// step (NaN too; groups of acc_log_scalars as "<tag>/<name>"), texts skipped, and the run FINISHED.
TEST(MlflowTracking, WritesTheFileStoreAsMlflowReadsIt) {
  const CleanMlflowEnv clean;
  const std::string dir = acc_test::fresh_dir("mlflow_run");
  acc_accelerator* a = make("mlflow", dir);
  const std::string config = nlohmann::json{
      {"lr", 0.001},
      {"batch_size", 64},
      {"name", "it's \"x\""},
      {"warmup", true},
      {"seed", nullptr},
      {"betas", {0.9, 0.999}},
      {"nested", {{"b", {1, 2.5, "x"}}, {"a", 1e16}}},
      {"eps", 1e-05},
      {"long",
       std::string(6001, 'x')}}.dump();
  ACC_ASSERT_OK(acc_init_trackers(a, "proj", config.c_str()));
  const std::string run_dir = acc_test::tracker_path(a, "mlflow");
  ACC_ASSERT_OK(acc_log_scalar(a, "train/loss", 0.5, 0));
  const char* names[] = {"loss", "acc"};
  const double values[] = {0.25, std::nan("")};
  ACC_ASSERT_OK(acc_log(a, names, values, 2, 3));
  const char* splits[] = {"train", "eval"};
  const double split_values[] = {1e-7, 1e16};
  ACC_ASSERT_OK(acc_log_scalars(a, "split", splits, split_values, 2, -1));  // step 4
  const char* text_names[] = {"sample text!"};  // no metric name, but texts are not MLflow's
  const char* texts[] = {"once upon a time"};
  ACC_ASSERT_OK(acc_log_text(a, text_names, texts, 1, -1));  // step 5
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", -3.0, -1));        // step 6
  ACC_ASSERT_OK(acc_end_training(a));
  acc_accelerator_free(a);

  const nlohmann::json store = read_store(dir + "/mlruns");
  ASSERT_EQ(store["experiments"].size(), 2u) << store.dump();
  EXPECT_EQ(store["experiments"]["0"]["name"], "Default");
  const nlohmann::json experiment = experiment_named(store, "proj");
  EXPECT_EQ(experiment["lifecycle_stage"], "active");
  // MLflow's default (Accelerate passes no logging_dir to MLflowTracker): the experiment's folder.
  EXPECT_EQ(experiment["artifact_location"],
            "file://" + fs::absolute(fs::path(run_dir).parent_path()).lexically_normal().string());
  ASSERT_EQ(experiment["runs"].size(), 1u);
  const std::string run_id = experiment["runs"].begin().key();
  const nlohmann::json run = experiment["runs"].begin().value();
  EXPECT_EQ(run_dir, dir + "/mlruns/" + fs::path(run_dir).parent_path().filename().string() + "/" + run_id);
  EXPECT_EQ(run_id.size(), 32u);
  EXPECT_EQ(run["status"], "FINISHED");
  EXPECT_TRUE(run["ended"].get<bool>());
  EXPECT_EQ(run["artifact_uri"], experiment["artifact_location"].get<std::string>() + "/" + run_id + "/artifacts");
  EXPECT_EQ(run["tags"]["mlflow.runName"], run["run_name"]);
  EXPECT_EQ(run["tags"]["mlflow.source.type"], "LOCAL");
  EXPECT_EQ(run["tags"]["mlflow.user"], run["user_id"]);
  const std::map<std::string, std::string> params = run["params"];
  EXPECT_EQ(params, (std::map<std::string, std::string>{{"lr", "0.001"},
                                                        {"batch_size", "64"},
                                                        {"name", "it's \"x\""},
                                                        {"warmup", "True"},
                                                        {"seed", "None"},
                                                        {"betas", "[0.9, 0.999]"},
                                                        {"nested", "{'a': 1e+16, 'b': [1, 2.5, 'x']}"},
                                                        {"eps", "1e-05"}}));
  const auto& metrics = run["metrics"];
  EXPECT_EQ(metrics.size(), 5u) << metrics.dump();  // no text
  using History = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(values_and_steps(metrics["train/loss"]), (History{{"0.5", 0}}));
  EXPECT_EQ(values_and_steps(metrics["loss"]), (History{{"0.25", 3}, {"-3.0", 6}}));
  EXPECT_EQ(values_and_steps(metrics["acc"]), (History{{"nan", 3}}));
  EXPECT_EQ(values_and_steps(metrics["split/train"]), (History{{"1e-07", 4}}));
  EXPECT_EQ(values_and_steps(metrics["split/eval"]), (History{{"1e+16", 4}}));
  // Timestamps are the calls' wall clock in milliseconds.
  const int64_t logged = metrics["loss"][0][0].get<int64_t>();
  EXPECT_GT(logged, int64_t{1600000000000});
  EXPECT_LE(logged, metrics["loss"][1][0].get<int64_t>());
}

// A second run of the project goes into the same experiment; MLFLOW_EXPERIMENT_NAME names another;
// MLFLOW_RUN_ID resumes a run (RUNNING again, then FINISHED; its metrics continue, MLFLOW_TAGS set),
// and refuses a configuration that would change a parameter the run has, before anything changes.
TEST(MlflowTracking, RunsShareTheirExperimentAndOneResumes) {
  const CleanMlflowEnv clean;
  const std::string dir = acc_test::fresh_dir("mlflow_resume");
  const std::string root = dir + "/mlruns";
  acc_accelerator* a = make("mlflow", dir);
  ACC_ASSERT_OK(acc_init_trackers(a, "proj", "{\"lr\": 0.1}"));
  const std::string first_dir = acc_test::tracker_path(a, "mlflow");
  const std::string first = fs::path(first_dir).filename();
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 1.0, 0));
  ACC_ASSERT_OK(acc_init_trackers(a, "proj", "{\"lr\": 0.2}"));  // ends the first run, starts another
  const std::string second = fs::path(acc_test::tracker_path(a, "mlflow")).filename();
  EXPECT_NE(first, second);
  {
    const acc_test::ScopedEnv named("MLFLOW_EXPERIMENT_NAME", "other experiment");
    ACC_ASSERT_OK(acc_init_trackers(a, "proj", nullptr));
  }
  ACC_ASSERT_OK(acc_end_training(a));
  nlohmann::json store = read_store(root);
  EXPECT_EQ(store["experiments"].size(), 3u);
  EXPECT_EQ(experiment_named(store, "proj")["runs"].size(), 2u);
  EXPECT_EQ(experiment_named(store, "other experiment")["runs"].size(), 1u);

  // Found by a hunt: a line the run was stopped inside, which the resumed run's first line would have
  // joined (MLflow then refuses the whole metric): cut off.
  std::ofstream(first_dir + "/metrics/loss", std::ios::app) << "1796609248217 9.";
  {
    const acc_test::ScopedEnv resume("MLFLOW_RUN_ID", first.c_str());
    const acc_test::ScopedEnv tags("MLFLOW_TAGS", "{\"team\": \"vision\", \"attempt\": 2}");
    ACC_EXPECT_ERROR(acc_init_trackers(a, "proj", "{\"lr\": 0.3}"), ACC_ERR_INVALID_ARGUMENT,
                     "has the parameter 'lr' logged with the value '0.1'");
    ACC_ASSERT_OK(acc_init_trackers(a, "proj", "{\"lr\": 0.1, \"epochs\": 3}"));
    EXPECT_EQ(fs::path(acc_test::tracker_path(a, "mlflow")).filename(), first);
    store = read_store(root);
    EXPECT_EQ(experiment_named(store, "proj")["runs"][first]["status"], "RUNNING");
    ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.5, 1));
    ACC_ASSERT_OK(acc_end_training(a));
  }
  store = read_store(root);
  const auto run = experiment_named(store, "proj")["runs"][first];
  EXPECT_EQ(run["status"], "FINISHED");
  EXPECT_EQ(values_and_steps(run["metrics"]["loss"]),
            (std::vector<std::pair<std::string, int64_t>>{{"1.0", 0}, {"0.5", 1}}));
  EXPECT_EQ(run["params"], (nlohmann::json{{"lr", "0.1"}, {"epochs", "3"}}));
  EXPECT_EQ(run["tags"]["team"], "vision");
  EXPECT_EQ(run["tags"]["attempt"], "2");

  {
    const acc_test::ScopedEnv resume("MLFLOW_RUN_ID", "0123456789abcdef0123456789abcdef");
    ACC_EXPECT_ERROR(acc_init_trackers(a, "proj", nullptr), ACC_ERR_INVALID_ARGUMENT, "MLFLOW_RUN_ID: no run");
  }
  acc_accelerator_free(a);
}

// MLFLOW_TRACKING_URI: a file: URI or a folder is the store (no project_dir needed); a server or a
// database is refused when the accelerator is made. Names MLflow would refuse, or fail to read back,
// are refused before anything is written; a configuration key among them too.
TEST(MlflowTracking, TrackingUriAndNamesMlflowRefuses) {
  const CleanMlflowEnv clean;
  const std::string dir = acc_test::fresh_dir("mlflow_uri");
  acc_accelerator* refused = nullptr;
  ACC_EXPECT_ERROR(acc_test::create_accelerator({{"cpu", "true"}, {"log_with", "mlflow"}}, &refused),
                   ACC_ERR_INVALID_ARGUMENT, "set project_dir or logging_dir, or MLFLOW_TRACKING_URI");
  for (const char* uri : {"http://localhost:5000", "sqlite:///mlflow.db", "databricks"}) {
    const acc_test::ScopedEnv server("MLFLOW_TRACKING_URI", uri);
    const acc_status status = acc_test::create_accelerator({{"cpu", "true"}, {"log_with", "mlflow"}}, &refused);
    if (std::string(uri) == "databricks") {  // no scheme: a folder named so
      ASSERT_EQ(status, ACC_OK) << acc_last_error_message();
      acc_accelerator_free(refused);
      refused = nullptr;
      continue;
    }
    EXPECT_EQ(status, ACC_ERR_UNSUPPORTED) << uri;
    EXPECT_NE(std::string(acc_last_error_message()).find("a tracking server or database is not reached"),
              std::string::npos)
        << acc_last_error_message();
  }
  const std::string store = dir + "/my store";
  const acc_test::ScopedEnv file_uri("MLFLOW_TRACKING_URI",
                                     ("file://" + fs::absolute(dir).string() + "/my%20store").c_str());
  acc_accelerator* a = make("mlflow", "");
  ACC_EXPECT_ERROR(acc_init_trackers(a, "proj", "{\"bad key!\": 1}"), ACC_ERR_INVALID_ARGUMENT,
                   "the parameter 'bad key!' has a character MLflow refuses");
  EXPECT_FALSE(fs::exists(store)) << "a refused start changed nothing";
  {
    const acc_test::ScopedEnv tags("MLFLOW_TAGS", "[1, 2]");
    ACC_EXPECT_ERROR(acc_init_trackers(a, "proj", nullptr), ACC_ERR_INVALID_ARGUMENT, "MLFLOW_TAGS is a JSON object");
  }
  {
    const acc_test::ScopedEnv tags("MLFLOW_TAGS", ("{\"note\": \"" + std::string(5001, 'n') + "\"}").c_str());
    ACC_EXPECT_ERROR(acc_init_trackers(a, "proj", nullptr), ACC_ERR_INVALID_ARGUMENT,
                     "the tag 'note' is not UTF-8 of at most 5000 characters");
  }
  {
    const acc_test::ScopedEnv tags("MLFLOW_TAGS", "{\"a tag?\": 1}");
    ACC_EXPECT_ERROR(acc_init_trackers(a, "proj", nullptr), ACC_ERR_INVALID_ARGUMENT,
                     "the tag 'a tag?' has a character MLflow refuses");
  }
  for (const std::string& name : {std::string(501, 'e'), std::string("caf\xe9")}) {
    const acc_test::ScopedEnv experiment("MLFLOW_EXPERIMENT_NAME", name.c_str());
    ACC_EXPECT_ERROR(acc_init_trackers(a, "proj", nullptr), ACC_ERR_INVALID_ARGUMENT,
                     "an experiment name is UTF-8 of 1 to 500 characters");
  }
  EXPECT_FALSE(fs::exists(store));
  ACC_ASSERT_OK(acc_init_trackers(a, "proj", "{\"ok key/with.parts-1 2\": 1}"));
  for (const std::string& name : std::vector<std::string>{"a//b", "/a", "a/", "a/../b", "./a", "..", "caf\u00e9",
                                                          "tab\there", std::string(251, 'm')}) {
    ACC_EXPECT_ERROR(acc_log_scalar(a, name.c_str(), 1.0, 0), ACC_ERR_INVALID_ARGUMENT, "mlflow: the metric");
  }
  ACC_ASSERT_OK(acc_log_scalar(a, std::string(250, 'm').c_str(), 1.0, 0));
  ACC_ASSERT_OK(acc_end_training(a));
  const nlohmann::json read = read_store(store);
  const auto run = experiment_named(read, "proj")["runs"].begin().value();
  EXPECT_EQ(run["metrics"].size(), 1u) << run["metrics"].dump();
  EXPECT_EQ(run["params"]["ok key/with.parts-1 2"], "1");
  acc_accelerator_free(a);
}

// A metric file that cannot be written (a FIFO put in its place) fails the run: the error comes back
// from acc_end_training naming the file, and the run is marked FAILED; nothing blocks.
TEST(MlflowTracking, AWriteThatFailsMarksTheRunFailed) {
  const CleanMlflowEnv clean;
  const std::string dir = acc_test::fresh_dir("mlflow_fail");
  acc_accelerator* a = make("mlflow", dir);
  ACC_ASSERT_OK(acc_init_trackers(a, "proj", nullptr));
  const std::string run_dir = acc_test::tracker_path(a, "mlflow");
  ASSERT_EQ(::mkfifo((run_dir + "/metrics/loss").c_str(), 0600), 0);
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 1.0, 0));
  ACC_EXPECT_ERROR(acc_end_training(a), ACC_ERR_IO, "is not a regular file");
  fs::remove(run_dir + "/metrics/loss");
  const nlohmann::json read = read_store(dir + "/mlruns");
  EXPECT_EQ(experiment_named(read, "proj")["runs"].begin().value()["status"], "FAILED");
  acc_accelerator_free(a);
}

// Accelerate's init_kwargs["mlflow"]: the run's name, tags (an object, or its JSON text; on a new
// experiment too), description (mlflow.note.content), the artifact location of a new experiment
// (logging_dir), nested_run taken; MLFLOW_TAGS wins over tags, as in Accelerate; run_id resumes. A
// misspelt or mistyped argument, or a tracker not in use, is refused before anything changes, and the
// run already open goes on.
TEST(MlflowTracking, InitKwargsNameTagAndDescribeTheRun) {
  const CleanMlflowEnv clean;
  const std::string dir = acc_test::fresh_dir("mlflow_kwargs");
  acc_accelerator* a = make("mlflow", dir);
  const std::string kwargs = nlohmann::json{{"mlflow",
                                             {{"run_name", "baseline run"},
                                              {"tags", {{"team", "vision"}, {"round", 2}}},
                                              {"description", "first try"},
                                              {"nested_run", true},
                                              {"logging_dir", dir + "/artifacts"}}}}
                                 .dump();
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "proj", "{\"lr\": 0.1}", kwargs.c_str()));
  const std::string first = fs::path(acc_test::tracker_path(a, "mlflow")).filename();
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 1.0, 0));

  for (const auto& [bad, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"mlfow": {}})",
            "init_kwargs names \"mlfow\", which is no tracker of this accelerator (its trackers: mlflow)"},
           {R"({"mlflow": {"run_nme": "x"}})", "the mlflow tracker takes no keyword argument \"run_nme\""},
           {R"({"mlflow": {"experiment_name": "x"}})", "takes no keyword argument \"experiment_name\""},
           {R"({"mlflow": {"run_name": 3}})", "init_kwargs[\"mlflow\"][\"run_name\"] is a string"},
           {R"({"mlflow": {"tags": "[1]"}})", "init_kwargs[\"mlflow\"][\"tags\"] is a JSON object"},
           {R"({"mlflow": {"nested_run": "yes"}})", "is true or false"},
           {R"({"mlflow": []})", "init_kwargs[\"mlflow\"] is a JSON object"},
           {R"([1])", "init_kwargs is a JSON object"},
           {R"({"mlflow": )", "init_kwargs"}}) {
    ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "proj", nullptr, bad.c_str()), ACC_ERR_INVALID_ARGUMENT, message);
  }
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.5, 1));  // the first run goes on
  EXPECT_EQ(fs::path(acc_test::tracker_path(a, "mlflow")).filename(), first);
  {
    const acc_test::ScopedEnv tags("MLFLOW_TAGS", "{\"team\": \"audio\"}");  // wins over init_kwargs' tags
    ACC_ASSERT_OK(acc_init_trackers_ex(a, "proj", nullptr, R"({"mlflow": {"tags": "{\"team\": \"text\"}"}})"));
  }
  const std::string second = fs::path(acc_test::tracker_path(a, "mlflow")).filename();
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "proj", nullptr, ("{\"mlflow\": {\"run_id\": \"" + first + "\"}}").c_str()));
  EXPECT_EQ(fs::path(acc_test::tracker_path(a, "mlflow")).filename(), first);
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.25, 2));
  ACC_ASSERT_OK(acc_end_training(a));
  acc_accelerator_free(a);

  const nlohmann::json store = read_store(dir + "/mlruns");
  const nlohmann::json experiment = experiment_named(store, "proj");
  EXPECT_EQ(experiment["artifact_location"], "file://" + fs::absolute(dir).lexically_normal().string() + "/artifacts");
  EXPECT_EQ(experiment["tags"], (nlohmann::json{{"team", "vision"}, {"round", "2"}}));
  ASSERT_EQ(experiment["runs"].size(), 2u);
  const auto run = experiment["runs"][first];
  EXPECT_EQ(run["run_name"], "baseline run");
  EXPECT_EQ(run["tags"]["mlflow.runName"], "baseline run");
  EXPECT_EQ(run["tags"]["team"], "vision");
  EXPECT_EQ(run["tags"]["round"], "2");
  EXPECT_EQ(run["tags"]["mlflow.note.content"], "first try");
  EXPECT_EQ(run["status"], "FINISHED");
  EXPECT_EQ(values_and_steps(run["metrics"]["loss"]),
            (std::vector<std::pair<std::string, int64_t>>{{"1.0", 0}, {"0.5", 1}, {"0.25", 2}}));
  const auto other = experiment["runs"][second];
  EXPECT_EQ(other["tags"]["team"], "audio");
  EXPECT_FALSE(other["tags"].contains("mlflow.note.content"));
  EXPECT_EQ(other["run_name"].get<std::string>().rfind("proj-", 0), 0u);
}

// acc_tracker_log_artifact: MLflow's log_artifact (a file, as <path>/<its name>) and log_artifacts (a
// folder's tree, merged with what is there) into the run's artifact folder; mistakes refused before
// anything is copied; only mlflow keeps artifacts, and only in a local artifact location.
TEST(MlflowTracking, ArtifactsAreCopiedIntoTheRun) {
  const CleanMlflowEnv clean;
  const std::string dir = acc_test::fresh_dir("mlflow_artifacts");
  fs::create_directories(dir + "/in/model/sub");
  std::ofstream(dir + "/in/config.yaml") << "lr: 0.1\n";
  std::ofstream(dir + "/in/model/weights.bin", std::ios::binary) << std::string("\x00\x01\x02\xff", 4);
  std::ofstream(dir + "/in/model/sub/notes.txt") << "first";
  acc_accelerator* a = make("mlflow,jsonl", dir);
  ACC_EXPECT_ERROR(acc_tracker_log_artifact(a, "mlflow", (dir + "/in/config.yaml").c_str(), nullptr),
                   ACC_ERR_NOT_INITIALIZED, "init_trackers first");
  ACC_ASSERT_OK(acc_init_trackers(a, "proj", nullptr));
  const std::string artifacts = acc_test::tracker_path(a, "mlflow") + "/artifacts";
  ACC_ASSERT_OK(acc_tracker_log_artifact(a, "mlflow", (dir + "/in/config.yaml").c_str(), nullptr));
  ACC_ASSERT_OK(acc_tracker_log_artifact(a, "mlflow", (dir + "/in/model").c_str(), "checkpoints/final"));
  std::ofstream(dir + "/in/model/sub/notes.txt") << "second";
  // A link to a folder elsewhere is copied as what it points at, in its place in the tree (as
  // shutil.copytree copies), never out of the artifacts.
  fs::create_directories(dir + "/elsewhere");
  std::ofstream(dir + "/elsewhere/linked.txt") << "linked";
  fs::create_directory_symlink(dir + "/elsewhere", dir + "/in/model/link");
  std::ofstream(dir + "/in/model/more.txt") << "more";
  ACC_ASSERT_OK(acc_tracker_log_artifact(a, "mlflow", (dir + "/in/model").c_str(), "checkpoints/final"));
  EXPECT_EQ(acc_test::read_file(artifacts + "/config.yaml"), "lr: 0.1\n");
  EXPECT_EQ(acc_test::read_file(artifacts + "/checkpoints/final/weights.bin"), std::string("\x00\x01\x02\xff", 4));
  EXPECT_EQ(acc_test::read_file(artifacts + "/checkpoints/final/sub/notes.txt"), "second");
  EXPECT_EQ(acc_test::read_file(artifacts + "/checkpoints/final/more.txt"), "more");
  EXPECT_EQ(acc_test::read_file(artifacts + "/checkpoints/final/link/linked.txt"), "linked");

  ACC_EXPECT_ERROR(acc_tracker_log_artifact(a, "jsonl", (dir + "/in/config.yaml").c_str(), nullptr),
                   ACC_ERR_UNSUPPORTED, "the jsonl tracker keeps no artifacts");
  ACC_EXPECT_ERROR(acc_tracker_log_artifact(a, "nobody", (dir + "/in/config.yaml").c_str(), nullptr),
                   ACC_ERR_INVALID_ARGUMENT, "no tracker named \"nobody\"");
  for (const char* outside : {"../x", "a/../../x", "/abs"})
    ACC_EXPECT_ERROR(acc_tracker_log_artifact(a, "mlflow", (dir + "/in/config.yaml").c_str(), outside),
                     ACC_ERR_INVALID_ARGUMENT, "log_artifact: the artifact path");
  ACC_EXPECT_ERROR(acc_tracker_log_artifact(a, "mlflow", (dir + "/in/absent").c_str(), nullptr),
                   ACC_ERR_INVALID_ARGUMENT, "is neither a file nor a folder");
  ACC_EXPECT_ERROR(acc_tracker_log_artifact(a, "mlflow", nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT, "local_path");
  ACC_EXPECT_ERROR(acc_tracker_log_artifact(a, "mlflow", "", nullptr), ACC_ERR_INVALID_ARGUMENT, "local_path");
  ASSERT_EQ(::mkfifo((dir + "/in/model/sub/pipe").c_str(), 0600), 0);
  ACC_EXPECT_ERROR(acc_tracker_log_artifact(a, "mlflow", (dir + "/in/model").c_str(), "refused"),
                   ACC_ERR_INVALID_ARGUMENT, "a FIFO or a device is no artifact");
  EXPECT_FALSE(fs::exists(artifacts + "/refused")) << "nothing copied";
  ACC_ASSERT_OK(acc_end_training(a));
  ACC_EXPECT_ERROR(acc_tracker_log_artifact(a, "mlflow", (dir + "/in/config.yaml").c_str(), nullptr),
                   ACC_ERR_NOT_INITIALIZED, "init_trackers first");
  // An experiment whose artifacts live elsewhere (s3://): not copied from here.
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "remote", nullptr, R"({"mlflow": {"logging_dir": "s3://bucket/runs"}})"));
  ACC_EXPECT_ERROR(acc_tracker_log_artifact(a, "mlflow", (dir + "/in/config.yaml").c_str(), nullptr),
                   ACC_ERR_UNSUPPORTED, "is not a local folder");
  ACC_ASSERT_OK(acc_end_training(a));
  acc_accelerator_free(a);
  const nlohmann::json store = read_store(dir + "/mlruns");  // the artifacts change nothing MLflow reads
  EXPECT_EQ(experiment_named(store, "remote")["artifact_location"], "s3://bucket/runs");
}
