// log_with "trackio": the project database read back as trackio reads it (tests/interop/read_trackio.py:
// Python's sqlite3 with trackio's queries, and trackio's own SQLiteStorage where it is installed); runs
// named and generated, resumed and not; databases of older trackio; mistakes refused before anything
// is written. TRACKIO_DIR points every test at a folder of its own.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "support.h"

namespace {

namespace fs = std::filesystem;

std::string reader_command(const std::string& arguments) {
  return std::string("'") + ACC_TEST_PYTHON + "' '" + ACC_TRACKIO_READER + "' " + arguments;
}

nlohmann::json read_back(const std::string& db) {
  const std::string out = db + ".read.json";
  const std::string command = reader_command("'" + db + "' > '" + out + "'");
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return nlohmann::json::parse(acc_test::read_file(out));
}

std::string kwargs(const nlohmann::json& trackio) { return nlohmann::json({{"trackio", trackio}}).dump(); }

// The steps of a run's rows, and the metrics of each.
nlohmann::json steps_of(const nlohmann::json& run) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& log : run["logs"]) steps.push_back(log["step"]);
  return steps;
}

}  // namespace

// Numbers, NaN and infinities, texts, groups and a reserved key as trackio stores them; the run's
// configuration (trackio.init's config, its own keys, then init_trackers' config) with its first rows;
// the database named after the project's letters, in WAL mode, with trackio's columns.
TEST(TrackioTracking, WritesWhatTrackioReads) {
  const std::string dir = acc_test::fresh_dir("trackio");
  acc_test::ScopedEnv env("TRACKIO_DIR", dir.c_str());
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "trackio"}});
  ACC_ASSERT_OK(
      acc_init_trackers_ex(a, "my.project", R"({"lr": 0.001, "layers": [64, 32]})",
                           kwargs({{"name", "first"}, {"group", "sweep"}, {"config", {{"seed", 1}}}}).c_str()));
  const std::string db = dir + "/myproject.db";
  EXPECT_EQ(acc_test::tracker_path(a, "trackio"), db);
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.5, 0));
  const char* names[] = {"loss", "train/acc", "grad"};
  const double values[] = {std::nan(""), 0.25, -HUGE_VAL};
  ACC_ASSERT_OK(acc_log(a, names, values, 3, -1));  // step 1
  const char* text_names[] = {"note"};
  const char* texts[] = {"\"quoted\" \xc3\xa9t\xc3\xa9"};
  ACC_ASSERT_OK(acc_log_text(a, text_names, texts, 1, -1));  // step 2
  const char* group_names[] = {"acc", "loss"};
  const double group_values[] = {0.75, HUGE_VAL};
  ACC_ASSERT_OK(acc_log_scalars(a, "eval", group_names, group_values, 2, 5));
  ACC_ASSERT_OK(acc_log_scalar(a, "step", 3.0, 6));  // trackio's own key: stored as "__step"
  ACC_EXPECT_ERROR(acc_log_ex(a, names, values, 1, 7, R"({"trackio": {"commit": true}})"), ACC_ERR_INVALID_ARGUMENT,
                   "takes no keyword argument \"commit\"");
  ACC_ASSERT_OK(acc_end_training(a));
  acc_accelerator_free(a);

  const nlohmann::json got = read_back(db);
  EXPECT_EQ(got["journal_mode"], "wal");
  for (const char* column : {"id", "run_id", "timestamp", "run_name", "step", "metrics", "log_id"})
    EXPECT_NE(std::find(got["metrics_columns"].begin(), got["metrics_columns"].end(), column),
              got["metrics_columns"].end())
        << column;
  ASSERT_EQ(got["runs"].size(), 1u);
  const nlohmann::json& run = got["runs"][0];
  EXPECT_EQ(run["name"], "first");
  EXPECT_TRUE(std::regex_match(run["id"].get<std::string>(), std::regex("[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}")))
      << run["id"];  // uuid4().hex
  EXPECT_EQ(steps_of(run), nlohmann::json::parse("[0, 1, 2, 5, 6]"));
  nlohmann::json metrics = nlohmann::json::array();
  for (const auto& log : run["logs"]) {
    metrics.push_back(log["metrics"]);
    EXPECT_TRUE(std::regex_match(log["timestamp"].get<std::string>(),
                                 std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?\+00:00)")))
        << log["timestamp"];
    EXPECT_EQ(log["log_id"].get<std::string>().size(), 32u);
  }
  EXPECT_EQ(metrics, nlohmann::json::parse(R"([{"loss": 0.5},
                                              {"loss": "NaN", "train/acc": 0.25, "grad": "-Infinity"},
                                              {"note": "\"quoted\" \u00e9t\u00e9"},
                                              {"eval": {"acc": 0.75, "loss": "Infinity"}},
                                              {"__step": 3.0}])"));
  nlohmann::json config = run["config"];
  ASSERT_TRUE(config.is_object()) << got.dump();
  EXPECT_TRUE(std::regex_match(config["_Created"].get<std::string>(), std::regex(R"(\d{4}-.*\+00:00)")));
  config.erase("_Created");
  EXPECT_EQ(config, nlohmann::json::parse(R"({"seed": 1, "_Username": null, "_Group": "sweep", "lr": 0.001,
                                             "layers": [64, 32]})"));
  if (got.contains("trackio")) {  // trackio's own reader, where the package is installed
    ASSERT_EQ(got["trackio"].size(), 1u);
    EXPECT_EQ(got["trackio"][0]["id"], run["id"]);
    EXPECT_EQ(got["trackio"][0]["steps"], steps_of(run));
    EXPECT_EQ(got["trackio"][0]["config"], run["config"]);
  }
}

// Images (acc_log_images) as trackio.Image values: a PNG per image under
// <TRACKIO_DIR>/media/<project>/<run>/<step>/, named in the step's row by its path below media/, as
// the dashboard finds it; a run whose name cannot name a folder refuses images.
TEST(TrackioTracking, ImagesAreTrackioImages) {
  if (std::system((std::string("'") + ACC_TEST_PYTHON + "' -c 'import PIL' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "Python's Pillow is not installed (python3-pil): the PNG check is skipped";
  const std::string dir = acc_test::fresh_dir("trackio_images");
  acc_test::ScopedEnv env("TRACKIO_DIR", dir.c_str());
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "trackio"}});
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "pics", nullptr, kwargs({{"name", "r"}}).c_str()));
  std::vector<float> gray(3 * 1 * 4 * 5, 0.5f);
  acc_tensor* batch = acc_test::floats(gray, {3, 1, 4, 5});  // a grid of 3 images of 4x5
  const char* names[] = {"samples"};
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 1.0, 0));
  ACC_ASSERT_OK(acc_log_images(a, names, &batch, 1, 2, nullptr));
  ACC_ASSERT_OK(acc_end_training(a));
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "pics", nullptr, kwargs({{"name", "a/b"}}).c_str()));
  ACC_EXPECT_ERROR(acc_log_images(a, names, &batch, 1, 0, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "cannot name the folder of its images");
  ACC_ASSERT_OK(acc_end_training(a));
  acc_tensor_free(batch);
  acc_accelerator_free(a);

  const nlohmann::json runs = read_back(dir + "/pics.db")["runs"];
  ASSERT_EQ(runs.size(), 1u) << runs.dump();
  ASSERT_EQ(runs[0]["logs"].size(), 2u);
  const nlohmann::json& logged = runs[0]["logs"][1];
  EXPECT_EQ(logged["step"], 2);
  const nlohmann::json& value = logged["metrics"]["samples"];
  EXPECT_EQ(value["_type"], "trackio.image");
  EXPECT_EQ(value["caption"], nullptr);
  const std::string file = value["file_path"];
  EXPECT_TRUE(std::regex_match(file, std::regex("pics/r/2/[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
                                                "[0-9a-f]{12}\\.png")))
      << file;
  const std::string out = dir + "/image.json";
  ASSERT_EQ(std::system(reader_command("--image '" + dir + "/media' '" + file + "' > '" + out + "'").c_str()), 0);
  // torch's grid of the 3 images of 4x5 side by side (add_images' make_grid): 15 wide, 4 high.
  EXPECT_EQ(nlohmann::json::parse(acc_test::read_file(out)),
            nlohmann::json::parse(R"({"format": "PNG", "size": [15, 4], "mode": "RGB"})"));
}

// Histograms (acc_log_histogram) as trackio.Histogram values: np.histogram's edges and counts over the
// bins from the first to the last that hold values, as TensorBoard's histogram has them.
TEST(TrackioTracking, HistogramsAreTrackioHistograms) {
  const std::string dir = acc_test::fresh_dir("trackio_histograms");
  acc_test::ScopedEnv env("TRACKIO_DIR", dir.c_str());
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "trackio"}});
  ACC_ASSERT_OK(acc_init_trackers(a, "hist", nullptr));
  acc_tensor* w = acc_test::floats({0.5f, -1.0f, 2.0f, 2.0f}, {2, 2});
  ACC_ASSERT_OK(acc_log_histogram(a, "layer/w", w, 3, "4", 0));
  ACC_ASSERT_OK(acc_log_histogram(a, "time", w, -1, nullptr, 0));  // step 4; a reserved key: "__time"
  ACC_ASSERT_OK(acc_end_training(a));
  acc_tensor_free(w);
  acc_accelerator_free(a);
  const nlohmann::json runs = read_back(dir + "/hist.db")["runs"];
  ASSERT_EQ(runs.size(), 1u);
  ASSERT_EQ(runs[0]["logs"].size(), 2u);
  // np.histogram([0.5, -1, 2, 2], bins=4): edges -1, -0.25, 0.5, 1.25, 2; counts 1, 0, 1, 2.
  EXPECT_EQ(runs[0]["logs"][0]["metrics"],
            nlohmann::json::parse(R"({"layer/w": {"_type": "trackio.histogram", "bins": [-1.0, -0.25, 0.5, 1.25, 2.0],
                                                  "values": [1, 0, 1, 2]}})"));
  // SummaryWriter's default bins: the edges around each value (0 and +-1e-12 * 1.1^k), a count per bin.
  const nlohmann::json& fine = runs[0]["logs"][1]["metrics"]["__time"];
  EXPECT_EQ(fine["_type"], "trackio.histogram");
  ASSERT_EQ(fine["bins"].size(), fine["values"].size() + 1);
  int64_t total = 0;
  for (const auto& count : fine["values"]) total += count.get<int64_t>();
  EXPECT_EQ(total, 4);
  EXPECT_LE(fine["bins"].front().get<double>(), -1.0);
  EXPECT_GE(fine["bins"].back().get<double>(), 2.0);
}

// resume "allow" and "must" go on with the newest run of that name (its id; rows added), "never"
// starts another run of the same name; runs without a name get a readable one no run has; "must"
// with a name no run has is refused, and so is "must" without a name.
TEST(TrackioTracking, ResumesAndNamesRuns) {
  const std::string dir = acc_test::fresh_dir("trackio_resume");
  acc_test::ScopedEnv env("TRACKIO_DIR", dir.c_str());
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "trackio"}});
  auto run_once = [&](const nlohmann::json& trackio, int64_t step) {
    ACC_ASSERT_OK(acc_init_trackers_ex(a, "proj", R"({"round": 1})", kwargs(trackio).c_str()));
    ACC_ASSERT_OK(acc_log_scalar(a, "loss", static_cast<double>(step), step));
    ACC_ASSERT_OK(acc_end_training(a));
  };
  run_once({{"name", "r"}}, 0);
  run_once({{"name", "r"}, {"resume", "allow"}}, 1);
  run_once({{"name", "r"}, {"resume", "must"}}, 2);
  run_once({{"name", "r"}}, 10);  // "never": a new run named "r"
  run_once(nlohmann::json::object(), 0);
  run_once(nlohmann::json::object(), 0);
  ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "proj", nullptr, kwargs({{"name", "gone"}, {"resume", "must"}}).c_str()),
                   ACC_ERR_INVALID_ARGUMENT, "does not exist in the project \"proj\"");
  ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "proj", nullptr, kwargs({{"resume", "must"}}).c_str()),
                   ACC_ERR_INVALID_ARGUMENT, "needs the run's \"name\"");
  acc_accelerator_free(a);

  const nlohmann::json runs = read_back(dir + "/proj.db")["runs"];
  ASSERT_EQ(runs.size(), 4u) << runs.dump();
  EXPECT_EQ(runs[0]["name"], "r");
  EXPECT_EQ(steps_of(runs[0]), nlohmann::json::parse("[0, 1, 2]"));
  EXPECT_EQ(runs[1]["name"], "r");
  EXPECT_NE(runs[1]["id"], runs[0]["id"]);
  EXPECT_EQ(steps_of(runs[1]), nlohmann::json::parse("[10]"));
  EXPECT_NE(runs[2]["name"], runs[3]["name"]);
  for (const auto& run : {runs[2], runs[3]})
    EXPECT_TRUE(std::regex_match(run["name"].get<std::string>(), std::regex("[a-z]+-[a-z]+-[0-9]+"))) << run["name"];
}

// A database of trackio before run ids is written as that trackio wrote it (by run name), and the
// columns added since (log_id) are added; a writer holding trackio's project lock is waited for.
TEST(TrackioTracking, WritesOlderDatabasesAndWaitsForTheLock) {
  const std::string dir = acc_test::fresh_dir("trackio_legacy");
  fs::create_directories(dir);
  acc_test::ScopedEnv env("TRACKIO_DIR", dir.c_str());
  const std::string db = dir + "/old.db";
  ASSERT_EQ(std::system(reader_command("--make-legacy '" + db + "'").c_str()), 0);
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "trackio"}});
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "old", nullptr, kwargs({{"name", "legacy"}}).c_str()));
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 1.5, 0));
  // Another process takes the project's lock for a second while this run's rows wait to be written.
  FILE* holder = ::popen(reader_command("--hold-lock '" + dir + "/old.lock' 1").c_str(), "r");
  ASSERT_NE(holder, nullptr);
  char line[16] = {};
  ASSERT_NE(std::fgets(line, sizeof line, holder), nullptr);  // "locked"
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 2.5, 1));
  ACC_ASSERT_OK(acc_end_training(a));
  EXPECT_EQ(::pclose(holder), 0);
  acc_accelerator_free(a);
  const nlohmann::json got = read_back(db);
  EXPECT_EQ(std::count(got["metrics_columns"].begin(), got["metrics_columns"].end(), "run_id"), 0);
  ASSERT_EQ(got["runs"].size(), 1u);
  EXPECT_EQ(got["runs"][0]["id"], "legacy");
  EXPECT_EQ(steps_of(got["runs"][0]), nlohmann::json::parse("[0, 1]"));
  EXPECT_EQ(got["runs"][0]["config"]["_Group"], nullptr);
}

// Mistakes and what is not built, refused before the database changes: logging to a Space or a server
// (arguments or environment), system monitors, keys trackio reserves, project names trackio refuses,
// trackio's files of JSON lines; a file in the database's place that is not a database, or not
// trackio's, is named and left as it is.
TEST(TrackioTracking, RefusesWhatItDoesNotBuild) {
  const std::string dir = acc_test::fresh_dir("trackio_refusals");
  fs::create_directories(dir);
  acc_test::ScopedEnv env("TRACKIO_DIR", dir.c_str());
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "trackio"}});
  auto refused = [&](const char* project, const nlohmann::json& trackio, acc_status status, const char* message) {
    ACC_EXPECT_ERROR(acc_init_trackers_ex(a, project, nullptr, kwargs(trackio).c_str()), status, message);
  };
  refused("p", {{"space_id", "me/space"}}, ACC_ERR_UNSUPPORTED, "Hugging Face Space");
  refused("p", {{"server_url", "http://localhost:7860"}}, ACC_ERR_UNSUPPORTED, "trackio server");
  refused("p", {{"auto_log_gpu", true}}, ACC_ERR_UNSUPPORTED, "system metrics");
  refused("p", {{"config", {{"_private", 1}}}}, ACC_ERR_INVALID_ARGUMENT, "is reserved");
  refused("p", {{"resume", "sometimes"}}, ACC_ERR_INVALID_ARGUMENT, "\"never\", \"allow\" or \"must\"");
  refused("p", {{"webhook_min_level", "loud"}}, ACC_ERR_INVALID_ARGUMENT, "webhook_min_level");
  refused("p", {{"projekt", "x"}}, ACC_ERR_INVALID_ARGUMENT, "takes no keyword argument \"projekt\"");
  refused("registry-models", nlohmann::json::object(), ACC_ERR_INVALID_ARGUMENT, "trackio's registries");
  refused("model_system", nlohmann::json::object(), ACC_ERR_INVALID_ARGUMENT, "ends with \"_system\"");
  {
    acc_test::ScopedEnv space("TRACKIO_SPACE_ID", "me/space");
    refused("p", nlohmann::json::object(), ACC_ERR_UNSUPPORTED, "TRACKIO_SPACE_ID");
  }
  {
    acc_test::ScopedEnv mode("TRACKIO_STORAGE_MODE", "jsonl");
    refused("p", nlohmann::json::object(), ACC_ERR_UNSUPPORTED, "TRACKIO_STORAGE_MODE=jsonl");
  }
  EXPECT_FALSE(fs::exists(dir + "/p.db"));
  // Not a database, a database of something else, a folder: named, and left as they are.
  const std::string junk = "not a database, but a user's file\n";
  std::ofstream(dir + "/junk.db") << junk;
  refused("junk", nlohmann::json::object(), ACC_ERR_IO, (dir + "/junk.db").c_str());
  EXPECT_EQ(acc_test::read_file(dir + "/junk.db"), junk);
  ASSERT_EQ(std::system(std::string("'" ACC_TEST_PYTHON "' -c \"import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); "
                                    "c.execute('CREATE TABLE metrics (x TEXT)'); c.commit()\" '" +
                                    dir + "/other.db'")
                            .c_str()),
            0);
  refused("other", nlohmann::json::object(), ACC_ERR_IO, "is not a trackio database");
  fs::create_directories(dir + "/folder.db");
  refused("folder", nlohmann::json::object(), ACC_ERR_IO, "is not a regular file");
  acc_accelerator_free(a);
  // "all" leaves trackio out: it writes outside the logging folder.
  acc_accelerator* all = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "all"}, {"project_dir", dir}});
  EXPECT_EQ(acc_test::tracker_names(all), (std::vector<std::string>{"tensorboard", "jsonl", "csv", "mlflow"}));
  acc_accelerator_free(all);
}

namespace {
constexpr const char* kLoopDirVariable = "ACC_TEST_TRACKIO_LOOP_DIR";
}  // namespace

// Not a test by itself: the child process of the next test, logging a step a millisecond into the
// same run until it is killed.
TEST(TrackioChild, LogsUntilKilled) {
  const char* dir = std::getenv(kLoopDirVariable);
  if (!dir) GTEST_SKIP() << "runs as the child of KilledRunLeavesTheDatabaseReadable";
  acc_test::ScopedEnv env("TRACKIO_DIR", dir);
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "trackio"}});
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "killed", nullptr, kwargs({{"name", "r"}, {"resume", "allow"}}).c_str()));
  for (int64_t step = 0;; ++step) {
    ACC_ASSERT_OK(acc_log_scalar(a, "loss", 1.0 / static_cast<double>(step + 1), -1));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// A run killed (SIGKILL) at any moment of its writes leaves a database that trackio reads, with every
// row whole, and that the next run goes on in.
TEST(TrackioTracking, KilledRunLeavesTheDatabaseReadable) {
  const std::string dir = acc_test::fresh_dir("trackio_killed");
  size_t rows_before = 0;
  std::mt19937 random(20261205);
  for (int round = 0; round < 4; ++round) {
    const pid_t child =
        acc_test::spawn_self("TrackioChild.LogsUntilKilled", {std::string(kLoopDirVariable) + "=" + dir});
    ASSERT_GT(child, 0);
    // Killed once it has written rows (its write-ahead log has grown), at a moment that varies by round.
    const std::string wal = dir + "/killed.db-wal";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (std::error_code ec; !(fs::exists(wal, ec) && fs::file_size(wal, ec) > 0);) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the child wrote no row";
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 1500)(random)));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the child stopped by itself (status " << status << ")";
    const nlohmann::json runs = read_back(dir + "/killed.db")["runs"];
    ASSERT_EQ(runs.size(), 1u) << runs.dump();
    const size_t rows = runs[0]["logs"].size();
    EXPECT_GE(rows, rows_before) << "round " << round << " lost rows";
    for (const auto& log : runs[0]["logs"]) ASSERT_TRUE(log["metrics"]["loss"].is_number()) << log.dump();
    rows_before = rows;
  }
}
