// log_with "wandb": the offline run wandb.init(mode="offline") leaves for `wandb sync`, read back by
// an independent reader of W&B's transaction log (wandb_reader.h): the records W&B's handler would
// have written (run, configuration, per step the run time, the step's summary and its history, the
// exit), log calls combined into steps as the handler combines them, media files announced by files
// records, the folder and its latest-run link; mistakes refused before anything is written.
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>

#include "support.h"
#include "wandb_reader.h"

namespace {

namespace fs = std::filesystem;

// init_kwargs for wandb: its folder and `more` keys (JSON text starting ", ").
std::string kwargs(const std::string& dir, const std::string& more = "") {
  nlohmann::json k = nlohmann::json::parse(R"({"mode": "offline")" + more + "}");
  k["dir"] = dir;
  return nlohmann::json({{"wandb", k}}).dump();
}

// The records of the run in `folder`, whose log is run-<id>.wandb.
std::vector<nlohmann::ordered_json> records_of(const std::string& folder) {
  const std::string id = folder.substr(folder.rfind('-') + 1);
  return acc_test::read_wandb_log(folder + "/run-" + id + ".wandb");
}

std::vector<nlohmann::ordered_json> of_type(const std::vector<nlohmann::ordered_json>& records, const char* type) {
  std::vector<nlohmann::ordered_json> out;
  for (const auto& r : records)
    if (r["type"] == type) out.push_back(r);
  return out;
}

std::string sha256_of(const std::string& path) {
  const std::string out = path + ".sha";
  const std::string command = "sha256sum '" + path + "' > '" + out + "'";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return acc_test::read_file(out).substr(0, 64);
}

}  // namespace

// A run as W&B's handler writes it: the header, the run (project, entity, name, tags, group, job
// type, notes, host, init's config with "_wandb"), init_trackers' configuration as a config update;
// for each step written out, a summary of the run time, a summary of the step's values and the
// history (with _step, _runtime, _timestamp); at the end the exit (always sent) and the final record.
// Steps as run.log makes them: without a step each call is a step of wandb's own count; a larger
// step writes the current one out first; the same step adds to it; a smaller one is dropped; commit
// writes the step out at once.
TEST(WandbTracking, WritesTheRunWandbSyncUploads) {
  const std::string root = acc_test::fresh_dir("wandb");
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "wandb"}});
  const double before = static_cast<double>(std::time(nullptr));
  ACC_ASSERT_OK(acc_init_trackers_ex(
      a, "proj", R"({"lr": 0.001, "layers": [64, 32], "nested": {"a": 1}})",
      kwargs(root, R"(, "entity": "team", "name": "first run", "tags": ["a", "b"], "group": "g", "job_type": "train",
                      "notes": "why", "config": {"seed": 7}, "id": "myrun01")")
          .c_str()));
  const std::string folder = acc_test::tracker_path(a, "wandb");
  EXPECT_TRUE(std::regex_match(folder, std::regex(root + "/wandb/offline-run-[0-9]{8}_[0-9]{6}-myrun01"))) << folder;
  EXPECT_EQ(fs::read_symlink(root + "/wandb/latest-run").string(), fs::path(folder).filename().string());
  EXPECT_TRUE(fs::is_directory(folder + "/files"));

  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.5, -1));           // wandb's step 0, written out
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", std::nan(""), -1));  // step 1
  const char* names[] = {"acc"};
  const double values[] = {0.75};
  ACC_ASSERT_OK(acc_log_scalars(a, "eval", names, values, 1, 5));  // step 5, waits for more
  const char* text_names[] = {"note"};
  const char* texts[] = {"tab\there \"quoted\""};
  ACC_ASSERT_OK(acc_log_text(a, text_names, texts, 1, 5));  // joins step 5
  ACC_ASSERT_OK(acc_log_scalar(a, "late", 1.0, 3));         // below the current step: dropped
  const char* x[] = {"x"};
  const double two[] = {2.0};
  ACC_ASSERT_OK(acc_log_ex(a, x, two, 1, 6, R"({"wandb": {"commit": true}})"));  // writes 5, then 6 at once
  const double inf[] = {-INFINITY};
  ACC_ASSERT_OK(acc_log_ex(a, x, inf, 1, -1, R"({"wandb": {"commit": false}})"));  // step 7, kept back
  ACC_ASSERT_OK(acc_end_training(a));                                              // ... and written out at the end
  acc_accelerator_free(a);

  const auto records = records_of(folder);
  ASSERT_GE(records.size(), 4u);
  for (size_t i = 0; i < records.size(); ++i) EXPECT_EQ(records[i]["num"], i + 1) << records[i].dump();
  EXPECT_EQ(records[0]["type"], "header");
  const auto& run = records[1];
  EXPECT_EQ(run["type"], "run");
  EXPECT_EQ(run["run_id"], "myrun01");
  EXPECT_EQ(run["project"], "proj");
  EXPECT_EQ(run["entity"], "team");
  EXPECT_EQ(run["display_name"], "first run");
  EXPECT_EQ(run["tags"], nlohmann::ordered_json::parse(R"(["a", "b"])"));
  EXPECT_EQ(run["run_group"], "g");
  EXPECT_EQ(run["job_type"], "train");
  EXPECT_EQ(run["notes"], "why");
  EXPECT_FALSE(run["host"].get<std::string>().empty());
  EXPECT_GE(run["start_seconds"].get<double>(), before - 1);
  EXPECT_EQ(run["config"], nlohmann::ordered_json::parse(R"({"_wandb": "{}", "seed": "7"})"));
  EXPECT_EQ(records[2]["type"], "config");
  const auto& update = records[2]["update"];
  EXPECT_EQ(update["lr"], "0.001");
  EXPECT_EQ(update["layers"], "[64,32]");
  EXPECT_EQ(update["nested"], "{\"a\":1}");

  const auto histories = of_type(records, "history");
  ASSERT_EQ(histories.size(), 5u);
  const int64_t steps[] = {0, 1, 5, 6, 7};
  for (size_t i = 0; i < histories.size(); ++i) {
    const auto& items = histories[i]["items"];
    EXPECT_EQ(histories[i]["step"], steps[i]);
    EXPECT_EQ(items["_step"], std::to_string(steps[i]));
    EXPECT_GE(std::stod(items["_runtime"].get<std::string>()), 0.0);
    EXPECT_NEAR(std::stod(items["_timestamp"].get<std::string>()), before, 60.0);
    EXPECT_NE(items["_runtime"].get<std::string>().find('.'), std::string::npos) << "a float, as wandb writes it";
  }
  EXPECT_EQ(histories[0]["items"]["loss"], "0.5");
  EXPECT_EQ(histories[1]["items"]["loss"], "NaN");
  EXPECT_EQ(histories[2]["items"]["eval|acc"], "0.75");  // a dict's value under its path
  EXPECT_EQ(histories[2]["items"]["note"], "\"tab\\there \\\"quoted\\\"\"");
  EXPECT_FALSE(histories[2]["items"].contains("late"));
  EXPECT_EQ(histories[3]["items"]["x"], "2.0");
  EXPECT_EQ(histories[4]["items"]["x"], "-Infinity");
  for (const auto& h : histories) EXPECT_EQ(h["items"].size(), h["items"].contains("eval|acc") ? 5u : 4u) << h.dump();

  // Before each history: the run time, then the step's values, as the summary holds them.
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i]["type"] != "history") continue;
    ASSERT_GE(i, 2u);
    EXPECT_EQ(records[i - 1]["type"], "summary");
    EXPECT_EQ(records[i - 1]["update"], records[i]["items"]);
    EXPECT_EQ(records[i - 2]["type"], "summary");
    EXPECT_TRUE(records[i - 2]["update"].contains("_wandb|runtime"));
    EXPECT_TRUE(records[i - 2]["update"].contains("_runtime"));
  }
  const auto& exit = records[records.size() - 2];
  EXPECT_EQ(exit["type"], "exit");
  EXPECT_EQ(exit["exit_code"], 0);
  EXPECT_EQ(exit["always_send"], true);
  EXPECT_EQ(records.back()["type"], "final");
  EXPECT_EQ(of_type(records, "exit").size(), 1u);
}

// Images (acc_log_images: a list of one wandb.Image per name, as Accelerate's log_images logs them)
// as "images/separated" values, each PNG under files/media/images/<name>_<step>_<sha256[:20]>.png (a
// '/' in the name a folder, a leading '/' dropped, ".." made "__"), announced by a files record
// before the history that names it; histograms as wandb.Histogram(np_histogram=...) values.
TEST(WandbTracking, ImagesAndHistogramsAreWandbMedia) {
  const std::string root = acc_test::fresh_dir("wandb_media");
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "wandb"}});
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "media", nullptr, kwargs(root).c_str()));
  const std::string folder = acc_test::tracker_path(a, "wandb");
  std::vector<float> pixels(3 * 4 * 5);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i) / pixels.size();
  acc_tensor* image = acc_test::floats(pixels, {3, 4, 5});
  acc_tensor* images[] = {image, image};
  const char* names[] = {"samples/train", "/../up"};
  ACC_ASSERT_OK(acc_log_images(a, names, images, 2, 2, "CHW"));
  acc_tensor* w = acc_test::floats({0.5f, -1.0f, 2.0f, 2.0f}, {2, 2});
  ACC_ASSERT_OK(acc_log_histogram(a, "layer/w", w, 2, "4", 0));
  // A batch is a list of its images; names without a step are a step each, as log_images logs them
  // (the first joins step 2, which waits for more, and writes it out, as run.log without a step does).
  std::vector<float> batch_pixels(3 * 1 * 4 * 5);
  for (size_t i = 0; i < batch_pixels.size(); ++i) batch_pixels[i] = static_cast<float>(i % 20) / 20 + (i / 20) * 0.01f;
  acc_tensor* batch = acc_test::floats(batch_pixels, {3, 1, 4, 5});
  acc_tensor* single = acc_test::floats(pixels, {1, 3, 4, 5});
  acc_tensor* batches[] = {batch, single};
  const char* batch_names[] = {"batch", "single"};
  ACC_ASSERT_OK(acc_log_images(a, batch_names, batches, 2, -1, "NCHW"));
  // wandb.Histogram keeps at most 512 bins: TensorBoard's bins from 1e-6 to 1e6 on both sides are more.
  acc_tensor* wide = acc_test::floats({-1e6f, -1e-6f, 1e-6f, 1e6f}, {4});
  ACC_EXPECT_ERROR(acc_log_histogram(a, "wide", wide, 9, nullptr, 0), ACC_ERR_INVALID_ARGUMENT, "at most 512");
  ACC_ASSERT_OK(acc_log_histogram(a, "wide", wide, 9, nullptr, 512));
  ACC_ASSERT_OK(acc_end_training(a));
  acc_tensor_free(wide);
  acc_tensor_free(batch);
  acc_tensor_free(single);
  acc_tensor_free(w);
  acc_tensor_free(image);
  acc_accelerator_free(a);

  const auto records = records_of(folder);
  const auto files = of_type(records, "files");
  ASSERT_EQ(files.size(), 2u + 3u + 1u);
  const auto histories = of_type(records, "history");
  ASSERT_EQ(histories.size(), 3u);
  const auto& items = histories[0]["items"];
  EXPECT_EQ(histories[0]["step"], 2);
  const std::string prefixes[] = {"media/images/samples/train_2_", "media/images/__/up_2_"};
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(files[i]["paths"].size(), 1u);
    const std::string path = files[i]["paths"][0];
    EXPECT_EQ(path.rfind(prefixes[i], 0), 0u) << path;
    const std::string file = folder + "/files/" + path;
    ASSERT_TRUE(fs::is_regular_file(file)) << file;
    EXPECT_EQ(acc_test::read_file(file).substr(0, 8), "\x89PNG\r\n\x1a\n");
    EXPECT_EQ(path, prefixes[i] + sha256_of(file).substr(0, 20) + ".png");
    const std::string key = names[i];
    EXPECT_EQ(items[key + "|_type"], "\"images/separated\"");
    EXPECT_EQ(items[key + "|width"], "5");
    EXPECT_EQ(items[key + "|height"], "4");
    EXPECT_EQ(items[key + "|format"], "\"png\"");
    EXPECT_EQ(items[key + "|count"], "1");
    EXPECT_EQ(items[key + "|filenames"], "[\"" + path + "\"]");
  }
  // np.histogram([0.5, -1, 2, 2], bins=4): edges -1, -0.25, 0.5, 1.25, 2; counts 1, 0, 1, 2.
  EXPECT_EQ(items["layer/w|_type"], "\"histogram\"");
  EXPECT_EQ(items["layer/w|values"], "[1,0,1,2]");
  EXPECT_EQ(items["layer/w|bins"], "[-1.0,-0.25,0.5,1.25,2.0]");

  // The batch: three files of 5x4 (each its own PNG, told apart by its digest) in step 2; then "single".
  const auto& batch_items = histories[0]["items"];
  EXPECT_EQ(batch_items["batch|count"], "3");
  EXPECT_EQ(batch_items["batch|width"], "5");
  EXPECT_EQ(batch_items["batch|height"], "4");
  const auto filenames = nlohmann::json::parse(batch_items["batch|filenames"].get<std::string>());
  ASSERT_EQ(filenames.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(files[2 + i]["paths"][0].get<std::string>(), filenames[i].get<std::string>());
    EXPECT_TRUE(fs::is_regular_file(folder + "/files/" + filenames[i].get<std::string>()));
  }
  EXPECT_NE(filenames[0], filenames[1]);
  EXPECT_FALSE(batch_items.contains("single|count"));
  EXPECT_EQ(histories[1]["step"], 3);
  EXPECT_EQ(histories[1]["items"]["single|count"], "1");
  EXPECT_EQ(histories[2]["step"], 9);
  const auto wide_bins = nlohmann::json::parse(histories[2]["items"]["wide|values"].get<std::string>());
  EXPECT_LE(wide_bins.size(), 512u);
}

// Records longer than a block and records that meet a block's end in every way (no room for a
// chunk header, exactly room for one) are framed as wandb's reader takes them.
TEST(WandbTracking, LongRecordsSpanBlocks) {
  const std::string root = acc_test::fresh_dir("wandb_blocks");
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "wandb"}});
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "blocks", nullptr, kwargs(root).c_str()));
  const std::string folder = acc_test::tracker_path(a, "wandb");
  const char* names[] = {"text"};
  std::vector<std::string> logged;
  for (int i = 0; i < 60; ++i) {  // lengths that walk the records' ends across the blocks' ends
    logged.push_back(std::string(static_cast<size_t>(i == 7 ? 70000 : 900 + 37 * i), static_cast<char>('a' + i % 26)));
    const char* texts[] = {logged.back().c_str()};
    ACC_ASSERT_OK(acc_log_text(a, names, texts, 1, -1));
  }
  ACC_ASSERT_OK(acc_end_training(a));
  acc_accelerator_free(a);
  const auto histories = of_type(records_of(folder), "history");
  ASSERT_EQ(histories.size(), logged.size());
  for (size_t i = 0; i < logged.size(); ++i) EXPECT_EQ(histories[i]["items"]["text"], "\"" + logged[i] + "\"");
}

// mode "disabled" writes nothing and takes every call; WANDB_MODE, WANDB_DIR and the run's other
// variables are read as wandb reads them, init_kwargs over them.
TEST(WandbTracking, ModesAndEnvironment) {
  const std::string root = acc_test::fresh_dir("wandb_env");
  {
    acc_test::ScopedEnv mode("WANDB_MODE", "disabled"), dir("WANDB_DIR", root.c_str());
    acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "wandb"}});
    ACC_ASSERT_OK(acc_init_trackers(a, "quiet", nullptr));
    ACC_ASSERT_OK(acc_log_scalar(a, "loss", 1.0, -1));
    EXPECT_EQ(acc_test::tracker_path(a, "wandb"), "");
    ACC_ASSERT_OK(acc_end_training(a));
    acc_accelerator_free(a);
    EXPECT_FALSE(fs::exists(root + "/wandb"));
  }
  acc_test::ScopedEnv mode("WANDB_MODE", "dryrun"), dir("WANDB_DIR", root.c_str()), id("WANDB_RUN_ID", "envid"),
      tags("WANDB_TAGS", "x,y"), name("WANDB_NAME", "from env"), group("WANDB_RUN_GROUP", "eg");
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "wandb"}});
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "env", nullptr, R"({"wandb": {"name": "from kwargs"}})"));
  const std::string folder = acc_test::tracker_path(a, "wandb");
  EXPECT_EQ(fs::path(folder).parent_path().string(), root + "/wandb");
  ACC_ASSERT_OK(acc_end_training(a));
  acc_accelerator_free(a);
  const auto run = records_of(folder)[1];
  EXPECT_EQ(run["run_id"], "envid");
  EXPECT_EQ(run["tags"], nlohmann::ordered_json::parse(R"(["x", "y"])"));
  EXPECT_EQ(run["display_name"], "from kwargs");
  EXPECT_EQ(run["run_group"], "eg");
}

// What wandb refuses is refused (InvalidArgument), and what it takes but is not built here
// (Unsupported), at init_trackers or the log call, before anything is written.
TEST(WandbTracking, RefusesWhatWandbRefusesAndWhatIsNotBuilt) {
  const std::string root = acc_test::fresh_dir("wandb_refused");
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "wandb"}});
  struct Case {
    const char* project;
    std::string more;
    acc_status status;
    const char* needle;
  };
  const Case cases[] = {
      {"p", R"(, "mode": "online")", ACC_ERR_UNSUPPORTED, "uploads to a W&B server"},
      {"p", R"(, "mode": "sometimes")", ACC_ERR_INVALID_ARGUMENT, "not \"sometimes\""},
      {"p", R"(, "id": "a/b")", ACC_ERR_INVALID_ARGUMENT, "cannot contain any of the characters"},
      {"p", R"(, "id": " a")", ACC_ERR_INVALID_ARGUMENT, "whitespace"},
      {"p", R"(, "tags": [""])", ACC_ERR_INVALID_ARGUMENT, "1 to 64 characters"},
      {"p", R"(, "project": "q")", ACC_ERR_INVALID_ARGUMENT, "project_name of init_trackers"},
      {"p", R"(, "colour": "red")", ACC_ERR_INVALID_ARGUMENT, "colour"},
      {"p", R"(, "config": "config.yaml")", ACC_ERR_UNSUPPORTED, "configuration file"},
      {"p", R"(, "config": {"a": 1}, "config_include_keys": ["a"], "config_exclude_keys": ["b"])",
       ACC_ERR_INVALID_ARGUMENT, "cannot both"},
      {"p", R"(, "fork_from": "abc?_step=3")", ACC_ERR_UNSUPPORTED, "fork_from"},
      {"p", R"(, "sync_tensorboard": true)", ACC_ERR_UNSUPPORTED, "TensorBoard"},
      {"p", R"(, "settings": {"x_label": "a"})", ACC_ERR_UNSUPPORTED, "wandb.Settings"},
      {"a:b", "", ACC_ERR_INVALID_ARGUMENT, "cannot contain any of the characters"},
      {"p", R"(, "save_code": true)", ACC_ERR_UNSUPPORTED, "code"},
  };
  for (const auto& c : cases)
    ACC_EXPECT_ERROR(acc_init_trackers_ex(a, c.project, nullptr, kwargs(root, c.more).c_str()), c.status, c.needle);
  {
    acc_test::ScopedEnv mode("WANDB_MODE", "online");
    ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "p", nullptr, R"({"wandb": {"dir": "/nonexistent-never"}})"),
                     ACC_ERR_UNSUPPORTED, "WANDB_MODE");
  }
  {
    acc_test::ScopedEnv name("WANDB_NAME", "caf\xe9");  // Latin-1: W&B's readers would refuse the run record
    ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "p", nullptr, kwargs(root).c_str()), ACC_ERR_INVALID_ARGUMENT,
                     "WANDB_NAME is not valid UTF-8");
  }
  ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "caf\xe9", nullptr, kwargs(root).c_str()), ACC_ERR_INVALID_ARGUMENT,
                   "not valid UTF-8");
  EXPECT_FALSE(fs::exists(root + "/wandb"));

  // config_include_keys keeps only those keys of init's config.
  ACC_ASSERT_OK(acc_init_trackers_ex(
      a, "p", nullptr, kwargs(root, R"(, "config": {"a": 1, "b": 2}, "config_include_keys": ["b"])").c_str()));
  const std::string folder = acc_test::tracker_path(a, "wandb");
  ACC_EXPECT_ERROR(acc_log_ex(a, nullptr, nullptr, 0, 0, R"({"wandb": {"step": 1}})"), ACC_ERR_INVALID_ARGUMENT,
                   "step");
  ACC_EXPECT_ERROR(acc_log_ex(a, nullptr, nullptr, 0, 0, R"({"wandb": {"commit": 1}})"), ACC_ERR_INVALID_ARGUMENT,
                   "commit");
  for (const char* own : {"_step", "_runtime", "_timestamp", "_wandb"})
    ACC_EXPECT_ERROR(acc_log_scalar(a, own, 1.0, 0), ACC_ERR_INVALID_ARGUMENT, "a key W&B writes itself");
  const char* names[] = {"a"};
  const double values[] = {1.0};
  ACC_EXPECT_ERROR(acc_log_scalars(a, "_wandb", names, values, 1, 0), ACC_ERR_INVALID_ARGUMENT,
                   "under a key W&B writes itself");
  ACC_ASSERT_OK(acc_end_training(a));
  acc_accelerator_free(a);
  const auto records = records_of(folder);
  EXPECT_EQ(records[1]["config"], nlohmann::ordered_json::parse(R"({"_wandb": "{}", "b": "2"})"));
  EXPECT_TRUE(of_type(records, "history").empty());
}

// Edges: an image name whose media file name would not fit a file name is refused at its call
// (later calls go on); a list keeps wandb's first 108 images; wandb's count of steps ends at 2^63 - 1
// (what comes after is dropped with a warning, never written at a smaller step); a NUL in the run
// id or folder is refused; "~" in the folder is the home folder; configuration keys lose the '-' at
// their ends (wandb's Config); a disabled run has no folder.
TEST(WandbTracking, EdgesOfNamesStepsAndSettings) {
  const std::string root = acc_test::fresh_dir("wandb_edges");
  acc_test::ScopedEnv home("HOME", root.c_str());
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "wandb"}});
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "edges", R"({"-lead-": 1, "--": 2})",
                                     R"({"wandb": {"mode": "offline", "dir": "~/runs", "config": {"-x": 3}}})"));
  const std::string folder = acc_test::tracker_path(a, "wandb");
  EXPECT_EQ(fs::path(folder).parent_path().string(), root + "/runs/wandb");

  std::vector<float> pixels(110 * 4 * 5, 0.5f);
  acc_tensor* batch = acc_test::floats(pixels, {110, 1, 4, 5});
  const std::string long_name(211, 'M');  // with "_<19 digits>_<20 hex>.png": 256 bytes
  const char* too_long[] = {long_name.c_str()};
  ACC_EXPECT_ERROR(acc_log_images(a, too_long, &batch, 1, -1, "NCHW"), ACC_ERR_INVALID_ARGUMENT,
                   "longer than 255 bytes");
  const char* names[] = {"many"};
  ACC_ASSERT_OK(acc_log_images(a, names, &batch, 1, 0, "NCHW"));
  ACC_ASSERT_OK(acc_log_scalar(a, "last", 1.0, INT64_MAX - 2));
  const char* four[] = {"a", "b", "c", "d"};
  acc_tensor* one = acc_test::floats({0.5f}, {1, 1});
  acc_tensor* ones[] = {one, one, one, one};
  // A step each without a step (wandb's count): INT64_MAX - 2 (with "last"), - 1, INT64_MAX, then none left.
  ACC_ASSERT_OK(acc_log_images(a, four, ones, 4, -1, "HW"));
  ACC_ASSERT_OK(acc_log_scalar(a, "late", 5.0, 10));
  ACC_ASSERT_OK(acc_end_training(a));
  acc_tensor_free(one);
  acc_tensor_free(batch);

  const auto records = records_of(folder);
  EXPECT_EQ(records[1]["config"], nlohmann::ordered_json::parse(R"({"_wandb": "{}", "x": "3"})"));
  EXPECT_EQ(records[2]["update"], nlohmann::ordered_json::parse(R"({"": "2", "lead": "1"})"));
  const auto histories = of_type(records, "history");
  ASSERT_EQ(histories.size(), 4u);
  EXPECT_EQ(histories[0]["items"]["many|count"], "108");
  EXPECT_EQ(of_type(records, "files").size(), 108u + 3u);
  EXPECT_EQ(histories[1]["step"], INT64_MAX - 2);
  EXPECT_TRUE(histories[1]["items"].contains("a|count"));
  EXPECT_TRUE(histories[1]["items"].contains("last"));
  EXPECT_EQ(histories[2]["step"], INT64_MAX - 1);
  EXPECT_EQ(histories[3]["step"], INT64_MAX);
  EXPECT_TRUE(histories[3]["items"].contains("c|count"));
  EXPECT_EQ(of_type(records, "exit").size(), 1u);

  ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "edges", nullptr, R"({"wandb": {"mode": "offline", "id": "a\u0000b"}})"),
                   ACC_ERR_INVALID_ARGUMENT, "NUL");
  ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "edges", nullptr, R"({"wandb": {"mode": "offline", "dir": "a\u0000b"}})"),
                   ACC_ERR_INVALID_ARGUMENT, "NUL");
  EXPECT_EQ(acc_test::tracker_path(a, "wandb"), folder);  // a refused start is no run: still the last one's
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "edges", nullptr, R"({"wandb": {"mode": "disabled"}})"));
  EXPECT_EQ(acc_test::tracker_path(a, "wandb"), "");
  acc_accelerator_free(a);
}

namespace {
constexpr const char* kExitDirVariable = "ACC_TEST_WANDB_EXIT_DIR";
}  // namespace

// LeakSanitizer asks this at exit (in a sanitizer build): the children that leave their accelerator
// open on purpose (ACC_TEST_LEAVES_ACCELERATOR_OPEN, here and in test_tracking_clearml.cpp) turn it off.
extern "C" int __lsan_is_turned_off() { return std::getenv("ACC_TEST_LEAVES_ACCELERATOR_OPEN") != nullptr; }

// Not a test by itself: the child process of the next test, which logs and returns from the program
// without ending the run or freeing its accelerator.
TEST(WandbChild, ExitsWithoutEnding) {
  const char* dir = std::getenv(kExitDirVariable);
  if (!dir) GTEST_SKIP() << "runs as the child of AProgramThatExitsWithoutEndingKeepsItsRecords";
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "wandb"}});
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "left", nullptr, kwargs(dir).c_str()));
  for (int i = 0; i < 1000; ++i) ACC_ASSERT_OK(acc_log_scalar(a, "loss", i, -1));
  std::exit(0);  // the accelerator still alive, its writer's queue full
}

// A program that exits with its run open (no acc_end_training, the accelerator never freed) ends
// normally, with what it logged on disk: the run has no exit record, so `wandb sync` marks it
// failed, as for a Python run that died.
TEST(WandbTracking, AProgramThatExitsWithoutEndingKeepsItsRecords) {
  const std::string dir = acc_test::fresh_dir("wandb_exit");
  for (int round = 0; round < 3; ++round) {
    const int status = acc_test::run_self("WandbChild.ExitsWithoutEnding", {std::string(kExitDirVariable) + "=" + dir,
                                                                            "ACC_TEST_LEAVES_ACCELERATOR_OPEN=1"});
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    const std::string folder = fs::canonical(dir + "/wandb/latest-run").string();
    const auto records = records_of(folder);
    const auto histories = of_type(records, "history");
    ASSERT_EQ(histories.size(), 1000u);
    EXPECT_EQ(histories.back()["items"]["loss"], "999.0");
    EXPECT_TRUE(of_type(records, "exit").empty());
    fs::remove_all(folder);
  }
}
