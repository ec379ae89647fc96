// log_with "clearml": the offline session ClearML's SDK writes (Task.set_offline), read back as
// Task.import_offline_session reads it: task.json (the task: id, name, project_name, type, tags,
// execution, the configuration "General"), metrics.jsonl (a JSON array of events per line, each
// naming the task), debug images under data/<key>; what Accelerate's ClearMLTracker logs (scalars
// titled by the name's train_/eval_/test_ prefix, single values without a step, images; texts and
// groups dropped); mistakes refused before anything is written.
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "support.h"

namespace {

namespace fs = std::filesystem;

// metrics.jsonl's events, every line a non-empty array (the importer sends a line as one batch).
std::vector<nlohmann::json> events_of(const std::string& folder) {
  std::vector<nlohmann::json> events;
  std::istringstream lines(acc_test::read_file(folder + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    EXPECT_FALSE(line.empty()) << "a blank line (the importer would send the line before it again)";
    const nlohmann::json batch = nlohmann::json::parse(line);
    EXPECT_TRUE(batch.is_array() && !batch.empty()) << line;
    for (const auto& event : batch) events.push_back(event);
  }
  return events;
}

}  // namespace

TEST(ClearmlTracking, WritesTheSessionImportOfflineSessionReads) {
  const std::string root = acc_test::fresh_dir("clearml");
  acc_test::ScopedEnv cache("CLEARML_CACHE_DIR", root.c_str()), offline("CLEARML_OFFLINE_MODE", "1");
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "clearml"}});
  ACC_ASSERT_OK(acc_init_trackers_ex(
      a, "proj", R"({"lr": 0.001, "nested": {"a": "b c"}})",
      R"({"clearml": {"task_name": "run one", "tags": ["a", "b"], "task_type": "testing", "auto_connect_frameworks": false}})"));
  const std::string folder = acc_test::tracker_path(a, "clearml");
  ASSERT_TRUE(std::regex_match(folder, std::regex(root + "/offline/offline-[0-9a-f]{32}"))) << folder;
  const std::string id = fs::path(folder).filename().string();

  const char* names[] = {"train_loss", "eval_acc", "lr"};
  const double values[] = {0.5, 0.75, std::nan("")};
  ACC_ASSERT_OK(acc_log(a, names, values, 3, 1));
  ACC_ASSERT_OK(acc_log_scalar(a, "final_acc", 0.9, -1));  // no step: a single value
  const char* group_names[] = {"x"};
  const double group_values[] = {1.0};
  ACC_ASSERT_OK(acc_log_scalars(a, "grouped", group_names, group_values, 1, 4));  // not a number: dropped
  const char* text_names[] = {"note"};
  const char* texts[] = {"a text"};
  ACC_ASSERT_OK(acc_log_text(a, text_names, texts, 1, 5));  // dropped too
  std::vector<float> pixels(3 * 4 * 5, 0.25f);
  acc_tensor* image = acc_test::floats(pixels, {3, 4, 5});
  const char* image_names[] = {"eval_sample/a b"};
  for (int64_t step = 10; step < 16; ++step) ACC_ASSERT_OK(acc_log_images(a, image_names, &image, 1, step, "CHW"));
  ACC_ASSERT_OK(acc_end_training(a));
  acc_tensor_free(image);
  acc_accelerator_free(a);

  const nlohmann::json task = nlohmann::json::parse(acc_test::read_file(folder + "/task.json"));
  EXPECT_EQ(task["id"], id);
  EXPECT_EQ(task["name"], "run one");
  EXPECT_EQ(task["project_name"], "proj");
  EXPECT_EQ(task["type"], "testing");
  EXPECT_EQ(task["tags"], nlohmann::json::parse(R"(["a", "b"])"));
  EXPECT_EQ(task["offline_folder"], folder);
  EXPECT_EQ(task["offline_output_models"], nlohmann::json::array());
  EXPECT_EQ(task["execution"]["artifacts"], nlohmann::json::array());
  EXPECT_FALSE(task.contains("task") || task.contains("force")) << "keys that break the import's edit";
  const auto& general = task["configuration"]["General"];
  EXPECT_EQ(general["name"], "General");
  EXPECT_EQ(general["type"], "dictionary");
  EXPECT_EQ(nlohmann::json::parse(general["value"].get<std::string>()),
            nlohmann::json::parse(R"({"lr": 0.001, "nested": {"a": "b c"}})"));

  const auto events = events_of(folder);
  ASSERT_EQ(events.size(), 4u + 6u);
  for (const auto& e : events) {
    EXPECT_EQ(e["task"], id);
    EXPECT_TRUE(e["timestamp"].is_number_integer());
    EXPECT_NEAR(e["timestamp"].get<double>() / 1000, static_cast<double>(std::time(nullptr)), 120.0);
  }
  auto scalar = [](const nlohmann::json& e, int64_t iter, const char* metric, const char* variant, double value) {
    EXPECT_EQ(e["type"], "training_stats_scalar");
    EXPECT_EQ(e["iter"], iter);
    EXPECT_EQ(e["metric"], metric);
    EXPECT_EQ(e["variant"], variant);
    EXPECT_EQ(e["value"], value);
    EXPECT_TRUE(e["value"].is_number_float());
  };
  scalar(events[0], 1, "loss", "train", 0.5);
  scalar(events[1], 1, "acc", "eval", 0.75);
  scalar(events[2], 1, "lr", "train", 0.0);  // NaN as ClearML reports it
  scalar(events[3], -2147483648, "Summary", "final_acc", 0.9);
  std::vector<std::string> keys;
  for (size_t i = 4; i < events.size(); ++i) {
    const auto& e = events[i];
    EXPECT_EQ(e["type"], "training_debug_image");
    EXPECT_EQ(e["iter"], static_cast<int64_t>(6 + i));
    EXPECT_EQ(e["metric"], "sample/a b");
    EXPECT_EQ(e["variant"], "eval");
    const std::string key = e["key"];
    keys.push_back(key);
    EXPECT_EQ(e["url"], folder + "/data/" + key);
    EXPECT_TRUE(fs::is_regular_file(folder + "/data/" + key)) << key;
    EXPECT_EQ(acc_test::read_file(folder + "/data/" + key).substr(0, 4), "\x89PNG");
  }
  EXPECT_EQ(keys[0], "proj/run one." + id + "/metrics/sample.slash.a b/eval/sample.slash.a b_eval_00000000.png");
  EXPECT_EQ(keys[5].substr(keys[5].size() - 12), "00000005.png");  // ClearML keeps 100 per metric and variant

  // Task.close's zip beside the folder: the session's files at its root, as Python's zipfile reads
  // them (every CRC checked), each equal to the folder's.
  const std::string script = root + "/read_zip.py", listing = root + "/listing.json";
  std::ofstream(script) << "import json, sys, zipfile\n"
                           "z = zipfile.ZipFile(sys.argv[1])\n"
                           "assert z.testzip() is None\n"
                           "json.dump({n: z.read(n).hex() for n in z.namelist()}, open(sys.argv[2], 'w'))\n";
  const std::string command =
      std::string("'") + ACC_TEST_PYTHON + "' '" + script + "' '" + folder + ".zip' '" + listing + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const nlohmann::json zipped = nlohmann::json::parse(acc_test::read_file(listing));
  std::set<std::string> expected = {"task.json", "metrics.jsonl"};
  for (const auto& key : keys) expected.insert("data/" + key);
  std::set<std::string> zipped_names;
  for (const auto& item : zipped.items()) {
    zipped_names.insert(item.key());
    std::string bytes;
    const std::string hex = item.value();
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
      bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    EXPECT_EQ(bytes, acc_test::read_file(folder + "/" + item.key())) << item.key();
  }
  EXPECT_EQ(zipped_names, expected);
}

// Events go in lines of at most 100 (each line one request of the importer), a line written at least
// every second and when the run ends; image keys as ClearML makes them of any name ('\\' a '/', the
// '/' at a title's ends dropped, an empty title's part left out); a project or task name that would
// make a part of the keys longer than ClearML takes unshortened is refused at the start.
TEST(ClearmlTracking, BatchesAndKeys) {
  const std::string root = acc_test::fresh_dir("clearml_batches");
  acc_test::ScopedEnv cache("CLEARML_CACHE_DIR", root.c_str()), offline("CLEARML_OFFLINE_MODE", "1");
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "clearml"}});
  ACC_ASSERT_OK(acc_init_trackers(a, "p", nullptr));
  const std::string folder = acc_test::tracker_path(a, "clearml");
  for (int64_t step = 0; step < 250; ++step) ACC_ASSERT_OK(acc_log_scalar(a, "loss", 1.0, step));
  acc_tensor* image = acc_test::floats({0.5f}, {1, 1});
  const char* names[] = {"back\\slash", "train_", "eval_/lead"};
  acc_tensor* images[] = {image, image, image};
  ACC_ASSERT_OK(acc_log_images(a, names, images, 3, 300, "HW"));
  ACC_ASSERT_OK(acc_end_training(a));
  std::istringstream lines(acc_test::read_file(folder + "/metrics.jsonl"));
  std::vector<size_t> sizes;
  for (std::string line; std::getline(lines, line);) sizes.push_back(nlohmann::json::parse(line).size());
  EXPECT_EQ(sizes, (std::vector<size_t>{100, 100, 53}));
  const auto events = events_of(folder);
  const std::string prefix = "p/p." + fs::path(folder).filename().string() + "/metrics/";
  EXPECT_EQ(events[250]["key"], prefix + "back.slash.slash/train/back.slash.slash_train_00000000.png");
  EXPECT_EQ(events[251]["key"], prefix + "train/_train_00000000.png");
  EXPECT_EQ(events[251]["metric"], "");
  EXPECT_EQ(events[252]["key"], prefix + "lead/eval/lead_eval_00000000.png");
  for (size_t i = 250; i < 253; ++i)
    EXPECT_TRUE(fs::is_regular_file(folder + "/data/" + events[i]["key"].get<std::string>()));

  const char* many_names[250];
  double many_values[250];
  std::vector<std::string> many;
  for (int i = 0; i < 250; ++i) many.push_back("v" + std::to_string(i));
  for (int i = 0; i < 250; ++i) many_names[i] = many[i].c_str(), many_values[i] = i;
  ACC_ASSERT_OK(acc_init_trackers(a, "p", nullptr));
  const std::string wide = acc_test::tracker_path(a, "clearml");
  ACC_ASSERT_OK(acc_log(a, many_names, many_values, 250, 0));  // one call, lines of at most 100 still
  ACC_ASSERT_OK(acc_end_training(a));
  std::istringstream wide_lines(acc_test::read_file(wide + "/metrics.jsonl"));
  sizes.clear();
  for (std::string line; std::getline(wide_lines, line);) sizes.push_back(nlohmann::json::parse(line).size());
  EXPECT_EQ(sizes, (std::vector<size_t>{100, 100, 50}));

  // Names that would file images outside the session's folder are refused.
  ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "p", nullptr, R"({"clearml": {"project_name": "../../out"}})"),
                   ACC_ERR_INVALID_ARGUMENT, "lead out of the session's folder");
  ACC_ASSERT_OK(acc_init_trackers(a, "p", nullptr));
  const char* dots[] = {".."};
  ACC_EXPECT_ERROR(acc_log_images(a, dots, &image, 1, 0, "HW"), ACC_ERR_INVALID_ARGUMENT, "lead out of");
  // A session folder removed while the run goes on is an error, not lines written into nothing.
  fs::remove_all(acc_test::tracker_path(a, "clearml"));
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 1.0, 0));
  ACC_EXPECT_ERROR(acc_end_training(a), ACC_ERR_IO, "metrics.jsonl");

  std::string long_name;
  for (int i = 0; i < 13; ++i) long_name += "\u8bad\u7ec3";  // 26 characters, 234 bytes URL-quoted
  ACC_EXPECT_ERROR(
      acc_init_trackers_ex(a, "p", nullptr, (R"({"clearml": {"task_name": ")" + long_name + "\"}}").c_str()),
      ACC_ERR_INVALID_ARGUMENT, "longer than 250 bytes");
  acc_tensor_free(image);
  acc_accelerator_free(a);
}

// CLEARML_PROJECT and CLEARML_TASK name the task where init_kwargs do not; mistakes are refused
// before anything is written, what is not built is Unsupported.
TEST(ClearmlTracking, NamesFromTheEnvironmentAndRefusals) {
  const std::string root = acc_test::fresh_dir("clearml_refused");
  // CLEARML_CACHE_DIR trimmed and its variables expanded, as ClearML reads it.
  const std::string cache_setting = " ${ACC_TEST_CLEARML_ROOT} ";
  acc_test::ScopedEnv variable("ACC_TEST_CLEARML_ROOT", root.c_str()),
      cache("CLEARML_CACHE_DIR", cache_setting.c_str()), offline("CLEARML_OFFLINE_MODE", "true"),
      project("CLEARML_PROJECT", "team/project"), task_name("CLEARML_TASK", "from env");
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "clearml"}});
  const std::pair<const char*, std::pair<acc_status, const char*>> cases[] = {
      {R"({"clearml": {"task_type": "bogus"}})", {ACC_ERR_INVALID_ARGUMENT, "TaskTypes"}},
      {R"({"clearml": {"tags": "a"}})", {ACC_ERR_INVALID_ARGUMENT, "list of strings"}},
      {R"({"clearml": {"colour": 1}})", {ACC_ERR_INVALID_ARGUMENT, "colour"}},
      {R"({"clearml": {"continue_last_task": true}})", {ACC_ERR_UNSUPPORTED, "continuing a task"}},
      {R"({"clearml": {"output_uri": "s3://bucket"}})", {ACC_ERR_UNSUPPORTED, "uploading models"}},
  };
  for (const auto& [kwargs, expected] : cases)
    ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "p", nullptr, kwargs), expected.first, expected.second);
  for (const char* off : {"0", "n", "F", " off "}) {
    acc_test::ScopedEnv online("CLEARML_OFFLINE_MODE", off);
    ACC_EXPECT_ERROR(acc_init_trackers(a, "p", nullptr), ACC_ERR_UNSUPPORTED, "CLEARML_OFFLINE_MODE is off");
  }
  EXPECT_FALSE(fs::exists(root + "/offline"));

  ACC_ASSERT_OK(acc_init_trackers(a, "p", nullptr));
  const std::string folder = acc_test::tracker_path(a, "clearml");
  ACC_EXPECT_ERROR(acc_log_ex(a, nullptr, nullptr, 0, 0, R"({"clearml": {"iteration": 1}})"), ACC_ERR_INVALID_ARGUMENT,
                   "iteration");
  acc_tensor* image = acc_test::floats({0.5f}, {1, 1});
  const std::string long_name(260, 'x');
  const char* names[] = {long_name.c_str()};
  ACC_EXPECT_ERROR(acc_log_images(a, names, &image, 1, 0, "HW"), ACC_ERR_INVALID_ARGUMENT, "longer than 250 bytes");
  acc_tensor_free(image);
  ACC_ASSERT_OK(acc_end_training(a));
  acc_accelerator_free(a);
  EXPECT_EQ(fs::path(folder).parent_path().string(), root + "/offline");
  const nlohmann::json task = nlohmann::json::parse(acc_test::read_file(folder + "/task.json"));
  EXPECT_EQ(task["project_name"], "team/project");
  EXPECT_EQ(task["name"], "from env");
  EXPECT_EQ(task["type"], "training");
  EXPECT_FALSE(task.contains("configuration"));
  EXPECT_TRUE(events_of(folder).empty());
}

namespace {
constexpr const char* kExitCacheVariable = "ACC_TEST_CLEARML_EXIT_CACHE";
}  // namespace

// Not a test by itself: the child process of the next test, which logs and returns from the program
// without ending the run or freeing its accelerator.
TEST(ClearmlChild, ExitsWithoutEnding) {
  const char* cache = std::getenv(kExitCacheVariable);
  if (!cache) GTEST_SKIP() << "runs as the child of ClearmlTracking.AProgramThatExitsWithoutEndingKeepsItsEvents";
  acc_test::ScopedEnv dir("CLEARML_CACHE_DIR", cache), offline("CLEARML_OFFLINE_MODE", "1");
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "clearml"}});
  ACC_ASSERT_OK(acc_init_trackers(a, "left", nullptr));
  for (int64_t step = 0; step < 250; ++step) ACC_ASSERT_OK(acc_log_scalar(a, "loss", 1.0, step));
  std::exit(0);  // the accelerator still alive, 50 events waiting for their line
}

// A program that exits with its run open has every event it logged on disk, in whole lines.
TEST(ClearmlTracking, AProgramThatExitsWithoutEndingKeepsItsEvents) {
  const std::string cache = acc_test::fresh_dir("clearml_exit");
  const int status =
      acc_test::run_self("ClearmlChild.ExitsWithoutEnding",
                         {std::string(kExitCacheVariable) + "=" + cache, "ACC_TEST_LEAVES_ACCELERATOR_OPEN=1"});
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  std::vector<fs::path> sessions;
  for (const auto& entry : fs::directory_iterator(cache + "/offline"))
    if (entry.is_directory()) sessions.push_back(entry.path());
  ASSERT_EQ(sessions.size(), 1u);
  EXPECT_EQ(events_of(sessions[0].string()).size(), 250u);
}
