// Experiment tracking through the C API: log_with's TensorBoard, JSONL and CSV files read back
// independently, trackers of the program, errors, and the progress display.
#include <nlohmann/json.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support.h"
#include "tracking_reader.h"

namespace {

acc_accelerator* make(const std::string& log_with, const std::string& project_dir) {
  std::vector<std::pair<std::string, std::string>> options = {{"cpu", "true"}};
  if (!log_with.empty()) options.emplace_back("log_with", log_with);
  if (!project_dir.empty()) options.emplace_back("project_dir", project_dir);
  return acc_test::make_accelerator(options);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A tracker of the program that remembers every call.
struct Recorder {
  std::vector<std::string> calls;
  std::string project, config;
  std::vector<std::map<std::string, double>> logs;
  std::vector<int64_t> steps;
  int fail_log = 0;  // non-zero: the log callback fails
  bool* freed = nullptr;
  void* text = nullptr;  // a TextRecorder, for recorder_log_text
};

int recorder_init(void* user_data, const char* project, const char* config) {
  auto* r = static_cast<Recorder*>(user_data);
  r->calls.push_back("init");
  r->project = project;
  r->config = config;
  return 0;
}
int recorder_log(void* user_data, const char* const* names, const double* values, size_t n, int64_t step) {
  auto* r = static_cast<Recorder*>(user_data);
  r->calls.push_back("log");
  if (r->fail_log) {
    acc_callback_set_error("the metrics service is down");
    return r->fail_log;
  }
  std::map<std::string, double> entry;
  for (size_t i = 0; i < n; ++i) entry[names[i]] = values[i];
  r->logs.push_back(entry);
  r->steps.push_back(step);
  return 0;
}
int recorder_finish(void* user_data) {
  static_cast<Recorder*>(user_data)->calls.push_back("finish");
  return 0;
}
void recorder_free(void* user_data) {
  auto* r = static_cast<Recorder*>(user_data);
  if (r->freed) *r->freed = true;
}

struct TextRecorder {
  std::vector<std::map<std::string, std::string>> texts;
  std::vector<int64_t> steps;
};
int recorder_log_text(void* user_data, const char* const* names, const char* const* texts, size_t n, int64_t step) {
  auto* r = static_cast<Recorder*>(user_data);
  r->calls.push_back("log_text");
  auto* t = static_cast<TextRecorder*>(r->text);
  std::map<std::string, std::string> entry;
  for (size_t i = 0; i < n; ++i) entry[names[i]] = texts[i];
  t->texts.push_back(entry);
  t->steps.push_back(step);
  return 0;
}

const char* kConfig =
    R"({"lr": 0.001, "optimizer": {"name": "adamw", "betas": [0.9, 0.999]}, "amp": true, "resume_from": null})";

}  // namespace

TEST(Tracking, TensorBoardEventFileReadsBackFromTheSpecification) {
  const std::string dir = acc_test::fresh_dir("tb");
  acc_accelerator* a = make("tensorboard", dir);
  ACC_ASSERT_OK(acc_init_trackers(a, "run1", kConfig));
  for (int i = 0; i < 5; ++i) ACC_ASSERT_OK(acc_log_scalar(a, "train/loss", 1.0 / (i + 1), -1));  // steps 0..4
  const char* names[] = {"eval/accuracy", "eval/loss"};
  const double values[] = {0.875, 0.25};
  ACC_ASSERT_OK(acc_log(a, names, values, 2, 10));
  ACC_ASSERT_OK(acc_log_scalar(a, "train/loss", 0.125, -1));  // step 11
  ACC_ASSERT_OK(acc_end_training(a));

  const std::string path = acc_test::tracker_path(a, "tensorboard");
  EXPECT_EQ(path.rfind(dir + "/run1/events.out.tfevents.", 0), 0u) << path;
  const auto events = acc_test::read_event_file(path);
  ASSERT_GE(events.size(), 9u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_GT(events[0].wall_time, 1.6e9);

  std::vector<std::pair<int64_t, float>> losses;
  std::map<std::string, float> eval;
  std::map<std::string, std::string> hparams;
  int end_status = -1;
  std::string text;
  double last_time = 0;
  for (const auto& e : events) {
    EXPECT_GE(e.wall_time, last_time);
    last_time = e.wall_time;
    for (const auto& v : e.values) {
      if (v.tag == "train/loss" && v.has_simple_value) losses.emplace_back(e.step, v.simple_value);
      if (v.tag.rfind("eval/", 0) == 0 && v.has_simple_value) {
        EXPECT_EQ(e.step, 10);
        eval[v.tag] = v.simple_value;
      }
      if (v.tag == "_hparams_/session_start_info") {
        EXPECT_EQ(v.plugin_name, "hparams");
        hparams = acc_test::decode_session_start(v.plugin_content);
      }
      if (v.tag == "_hparams_/session_end_info") end_status = acc_test::decode_session_end_status(v.plugin_content);
      if (v.plugin_name == "text" && !v.tensor_strings.empty()) text = v.tensor_strings[0];
    }
  }
  const std::vector<std::pair<int64_t, float>> expected = {{0, 1.0f}, {1, 0.5f}, {2, 1.0f / 3}, {3, 0.25f},
                                                            {4, 0.2f}, {11, 0.125f}};
  EXPECT_EQ(losses, expected);
  EXPECT_EQ(eval, (std::map<std::string, float>{{"eval/accuracy", 0.875f}, {"eval/loss", 0.25f}}));
  EXPECT_EQ(hparams["lr"], std::to_string(0.001));
  EXPECT_EQ(hparams["optimizer/name"], "adamw");
  EXPECT_EQ(hparams["optimizer/betas"], "[0.9,0.999]");
  // As torch's hparams() takes them: a bool is an int to its isinstance test (a number), None is left out.
  EXPECT_EQ(hparams["amp"], std::to_string(1.0));
  EXPECT_EQ(hparams.count("resume_from"), 0u);
  EXPECT_EQ(end_status, 1);
  EXPECT_NE(text.find("| optimizer/name | adamw |"), std::string::npos) << text;
  acc_accelerator_free(a);
}

TEST(Tracking, TensorBoardItselfReadsTheEventFile) {
  if (std::system("python3 -c 'import tensorboard' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "Python's tensorboard package is not installed: TensorBoard's EventAccumulator check skipped";
  const std::string dir = acc_test::fresh_dir("tb_accumulator");
  acc_accelerator* a = make("tensorboard", dir);
  ACC_ASSERT_OK(acc_init_trackers(a, "run", R"({"lr": 0.5})"));
  for (int i = 0; i < 3; ++i) ACC_ASSERT_OK(acc_log_scalar(a, "loss", 2.0 * i, 5 * i));
  const char* name = "sample";
  const char* text = "a line\nand \u00e9t\u00e9";
  ACC_ASSERT_OK(acc_log_text(a, &name, &text, 1, 7));
  // A batch of 3 colour images of 2x2 (values i / 40 - 0.1: some below 0), against torch's own image().
  std::vector<float> pixels(3 * 3 * 2 * 2);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i) / 40.0f - 0.1f;
  acc_tensor* batch = acc_test::floats(pixels, {3, 3, 2, 2});
  const char* image_name = "samples";
  ACC_ASSERT_OK(acc_log_images(a, &image_name, &batch, 1, 9, nullptr));
  acc_tensor_free(batch);
  ACC_ASSERT_OK(acc_end_training(a));
  const std::string script =
      "from tensorboard.backend.event_processing.event_accumulator import EventAccumulator\n"
      "from tensorboard.util import tensor_util\n"
      "ea = EventAccumulator('" +
      acc_test::tracker_path(a, "tensorboard") +
      "')\n"
      "ea.Reload()\n"
      "print(' '.join('%d:%g' % (s.step, s.value) for s in ea.Scalars('loss')))\n"
      "t = ea.Tensors('sample/text_summary')[0]\n"
      "print(t.step, repr(tensor_util.make_ndarray(t.tensor_proto)[0].decode('utf-8')))\n"
      "import importlib.util, io, torch\n"
      "if importlib.util.find_spec('PIL') is None: raise SystemExit(0)\n"
      "from PIL import Image\n"
      "from torch.utils.tensorboard.summary import image\n"
      "i = ea.Images('samples')[0]\n"
      "theirs = image('samples', torch.arange(36, dtype=torch.float32).reshape(3, 3, 2, 2) / 40 - 0.1)\n"
      "t = theirs.value[0].image\n"
      "same = Image.open(io.BytesIO(i.encoded_image_string)).tobytes() == "
      "Image.open(io.BytesIO(t.encoded_image_string)).tobytes()\n"
      "print(i.step, i.width, i.height, (t.width, t.height) == (i.width, i.height), same)\n";
  const std::string py = dir + "/read.py", out = dir + "/read.out";
  std::ofstream(py) << script;
  ASSERT_EQ(std::system(("python3 '" + py + "' > '" + out + "'").c_str()), 0);
  const bool pillow = std::system("python3 -c 'import PIL' >/dev/null 2>&1") == 0;  // torch's image() needs it
  if (!pillow) std::fprintf(stderr, "Pillow is not installed: the image is not compared with torch's\n");
  EXPECT_EQ(acc_test::read_file(out),
            std::string("0:0 5:2 10:4\n7 'a line\\nand \u00e9t\u00e9'\n") + (pillow ? "9 6 2 True True\n" : ""));
  acc_accelerator_free(a);
}

TEST(Tracking, JsonlHasOneRecordPerLogCall) {
  const std::string dir = acc_test::fresh_dir("jsonl");
  acc_accelerator* a = make("jsonl", dir);
  ACC_ASSERT_OK(acc_init_trackers(a, "run", kConfig));
  const char* names[] = {"loss", "lr"};
  const double values[] = {0.5, 1e-3};
  ACC_ASSERT_OK(acc_log(a, names, values, 2, 7));
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", NAN, -1));
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", -INFINITY, -1));
  ACC_ASSERT_OK(acc_end_training(a));
  const std::string path = acc_test::tracker_path(a, "jsonl");
  EXPECT_EQ(path, dir + "/run/metrics.jsonl");
  const auto lines = lines_of(acc_test::read_file(path));
  ASSERT_EQ(lines.size(), 3u);
  auto first = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(first["step"], 7);
  EXPECT_GT(first["wall_time"].get<double>(), 1.6e9);
  EXPECT_EQ(first["values"], nlohmann::json::parse(R"({"loss": 0.5, "lr": 0.001})"));
  EXPECT_EQ(nlohmann::json::parse(lines[1])["step"], 8);
  EXPECT_EQ(nlohmann::json::parse(lines[1])["values"]["loss"], "nan");
  EXPECT_EQ(nlohmann::json::parse(lines[2])["values"]["loss"], "-inf");
  EXPECT_EQ(nlohmann::json::parse(acc_test::read_file(dir + "/run/hparams.json")), nlohmann::json::parse(kConfig));
  acc_accelerator_free(a);
}

// A write that fails part way (a full disk; here a file-size limit, EFBIG) leaves whole records
// only: the file is cut back to its last complete line, so that json.loads and csv readers take it.
TEST(Tracking, AFailedWriteLeavesNoHalfRecord) {
  const std::string dir = acc_test::fresh_dir("torn");
  acc_accelerator* a = make("jsonl,csv", dir);
  ACC_ASSERT_OK(acc_init_trackers(a, "run", nullptr));
  const auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);  // the write fails instead of the process
  rlimit previous{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &previous), 0);
  rlimit limited = previous;
  limited.rlim_cur = 3001;  // no record ends exactly there
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);
  const char* names[] = {"loss", "lr"};
  acc_status status = ACC_OK;
  for (int64_t step = 0; step < 400 && status == ACC_OK; ++step) {
    const double values[] = {1.0 / (step + 3), 1e-3 * step};
    status = acc_log(a, names, values, 2, step);
  }
  // Every tracker ends (and writes what it still holds) under the limit, whichever failed first.
  const acc_status ended = acc_end_training(a);
  if (status == ACC_OK) status = ended;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &previous), 0);
  std::signal(SIGXFSZ, previous_handler);
  EXPECT_EQ(status, ACC_ERR_IO);
  const std::string jsonl = acc_test::read_file(dir + "/run/metrics.jsonl");
  const std::string csv = acc_test::read_file(dir + "/run/metrics.csv");
  for (const std::string* text : {&jsonl, &csv}) {
    ASSERT_FALSE(text->empty());
    EXPECT_LT(text->size(), 3001u);
    EXPECT_EQ(text->back(), '\n');
  }
  for (const auto& line : lines_of(jsonl)) EXPECT_TRUE(nlohmann::json::parse(line)["values"].contains("lr")) << line;
  for (const auto& row : lines_of(csv)) EXPECT_EQ(std::count(row.begin(), row.end(), ','), 3) << row;
  acc_accelerator_free(a);
}

TEST(Tracking, TheTextTableEscapesPipesAndLineBreaks) {
  const std::string dir = acc_test::fresh_dir("tb_text");
  acc_accelerator* a = make("tensorboard", dir);
  ACC_ASSERT_OK(acc_init_trackers(a, "run", R"({"cmd": "a | b", "note": "line1\nline2", "path\\x": 1})"));
  ACC_ASSERT_OK(acc_end_training(a));
  std::string text;
  for (const auto& e : acc_test::read_event_file(acc_test::tracker_path(a, "tensorboard")))
    for (const auto& v : e.values)
      if (v.plugin_name == "text" && !v.tensor_strings.empty()) text = v.tensor_strings[0];
  const auto rows = lines_of(text);
  ASSERT_EQ(rows.size(), 5u) << text;  // header, rule, three rows: nothing split a row
  EXPECT_NE(text.find("| cmd | a \\| b |"), std::string::npos) << text;
  EXPECT_NE(text.find("| note | line1<br>line2 |"), std::string::npos) << text;
  EXPECT_NE(text.find("| path\\\\x | 1 |"), std::string::npos) << text;
  acc_accelerator_free(a);
}

TEST(Tracking, AConfigKeyThatFlattensOntoANestedOneIsRefused) {
  const std::string dir = acc_test::fresh_dir("tb_collision");
  acc_accelerator* a = make("tensorboard,jsonl", dir);
  ACC_EXPECT_ERROR(acc_init_trackers(a, "run", R"({"a/b": 1, "a": {"b": 2}})"), ACC_ERR_INVALID_ARGUMENT, "\"a/b\"");
  ACC_ASSERT_OK(acc_init_trackers(a, "run", R"({"a/c": 1, "a": {"b": 2}})"));
  ACC_ASSERT_OK(acc_end_training(a));
  acc_accelerator_free(a);
}

TEST(Tracking, ALogCallWithoutValuesIsStillALine) {
  const std::string dir = acc_test::fresh_dir("empty_log");
  acc_accelerator* a = make("jsonl,csv", dir);
  ACC_ASSERT_OK(acc_init_trackers(a, "run", ""));
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.5, 3));
  ACC_ASSERT_OK(acc_log(a, nullptr, nullptr, 0, -1));
  ACC_ASSERT_OK(acc_end_training(a));
  const auto jsonl = lines_of(acc_test::read_file(acc_test::tracker_path(a, "jsonl")));
  ASSERT_EQ(jsonl.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(jsonl[1])["step"], 4);
  EXPECT_EQ(nlohmann::json::parse(jsonl[1])["values"], nlohmann::json::object());
  const auto csv = lines_of(acc_test::read_file(acc_test::tracker_path(a, "csv")));
  ASSERT_EQ(csv.size(), 3u);  // header and two rows
  EXPECT_EQ(csv[2].rfind("4,", 0), 0u) << csv[2];
  EXPECT_EQ(csv[2].back(), ',') << "an empty loss cell: " << csv[2];
  acc_accelerator_free(a);
}

TEST(Tracking, CsvHeaderIsTheUnionOfNamesInOrderOfAppearance) {
  const std::string dir = acc_test::fresh_dir("csv");
  acc_accelerator* a = make("csv", dir);
  ACC_ASSERT_OK(acc_init_trackers(a, "run", nullptr));
  // The file's own columns cannot be a value's: a second "step" column would hide the step from
  // readers (csv.DictReader keeps the last of two). Refused before anything is logged.
  for (const char* own : {"step", "wall_time"})
    ACC_EXPECT_ERROR(acc_log_scalar(a, own, 7.0, 0), ACC_ERR_INVALID_ARGUMENT, "is a column of the csv tracker's own");
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.5, 0));
  const char* names[] = {"loss", "acc, top-1"};
  const double values[] = {0.25, 0.75};
  ACC_ASSERT_OK(acc_log(a, names, values, 2, 1));
  ACC_ASSERT_OK(acc_log_scalar(a, "acc, top-1", 1.0, 2));
  ACC_ASSERT_OK(acc_end_training(a));
  const std::string path = acc_test::tracker_path(a, "csv");
  auto rows = lines_of(acc_test::read_file(path));
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0], "step,wall_time,loss,\"acc, top-1\"");
  auto cells = [](const std::string& row) {
    std::vector<std::string> out(1);
    for (char c : row)
      if (c == ',') out.emplace_back();
      else out.back().push_back(c);
    return out;
  };
  const std::vector<std::vector<std::string>> expected = {{"0", "", "0.5", ""}, {"1", "", "0.25", "0.75"},
                                                          {"2", "", "", "1"}};
  for (size_t r = 0; r < expected.size(); ++r) {
    auto c = cells(rows[r + 1]);
    ASSERT_EQ(c.size(), 4u) << rows[r + 1];
    EXPECT_GT(std::atof(c[1].c_str()), 1.6e9);
    c[1] = "";
    EXPECT_EQ(c, expected[r]) << rows[r + 1];
  }
  // A second run on the same project continues the table with its columns, and widens it again.
  ACC_ASSERT_OK(acc_init_trackers(a, "run", nullptr));
  ACC_ASSERT_OK(acc_log_scalar(a, "lr", 0.01, 3));
  ACC_ASSERT_OK(acc_end_training(a));
  rows = lines_of(acc_test::read_file(path));
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0], "step,wall_time,loss,\"acc, top-1\",lr");
  EXPECT_EQ(cells(rows[1]).size(), 5u);
  EXPECT_EQ(cells(rows[4])[4], "0.01");
  acc_accelerator_free(a);
}

TEST(Tracking, AllWritesEveryBuiltInTrackerAndProgramTrackersGetEveryCall) {
  const std::string dir = acc_test::fresh_dir("all");
  acc_accelerator* a = make("all", dir);
  Recorder r;
  bool freed = false;
  r.freed = &freed;
  ACC_ASSERT_OK(acc_add_tracker(a, "mine", recorder_init, recorder_log, recorder_finish, &r, recorder_free));
  acc_string_list* names = nullptr;
  ACC_ASSERT_OK(acc_tracker_names(a, &names));
  size_t count = 0;
  ACC_ASSERT_OK(acc_string_list_size(names, &count));
  std::vector<std::string> got;
  for (size_t i = 0; i < count; ++i) {
    const char* n = nullptr;
    ACC_ASSERT_OK(acc_string_list_get(names, i, &n));
    got.push_back(n);
  }
  acc_string_list_free(names);
  EXPECT_EQ(got, (std::vector<std::string>{"tensorboard", "jsonl", "csv", "mlflow", "mine"}));
  EXPECT_EQ(acc_test::tracker_path(a, "mine"), "");
  EXPECT_EQ(acc_test::tracker_path(a, "jsonl"), "");  // before the first run

  ACC_ASSERT_OK(acc_init_trackers(a, "run", R"({"batch_size": 64})"));
  const char* keys[] = {"loss", "lr"};
  const double values[] = {0.5, 0.1};
  ACC_ASSERT_OK(acc_log(a, keys, values, 2, -1));
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.25, 5));
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.125, -1));
  ACC_ASSERT_OK(acc_end_training(a));
  ACC_ASSERT_OK(acc_end_training(a));  // nothing open: nothing happens

  EXPECT_EQ(r.calls, (std::vector<std::string>{"init", "log", "log", "log", "finish"}));
  EXPECT_EQ(r.project, "run");
  EXPECT_EQ(nlohmann::json::parse(r.config), nlohmann::json::parse(R"({"batch_size": 64})"));
  EXPECT_EQ(r.steps, (std::vector<int64_t>{0, 5, 6}));
  ASSERT_EQ(r.logs.size(), 3u);
  EXPECT_EQ(r.logs[0], (std::map<std::string, double>{{"loss", 0.5}, {"lr", 0.1}}));
  EXPECT_EQ(r.logs[2], (std::map<std::string, double>{{"loss", 0.125}}));
  EXPECT_EQ(lines_of(acc_test::read_file(acc_test::tracker_path(a, "jsonl"))).size(), 3u);
  EXPECT_EQ(lines_of(acc_test::read_file(acc_test::tracker_path(a, "csv"))).size(), 4u);
  EXPECT_EQ(acc_test::read_event_file(acc_test::tracker_path(a, "tensorboard")).size(),
            6u);  // version, hparams, 3 logs, end
  EXPECT_FALSE(freed);
  acc_accelerator_free(a);
  EXPECT_TRUE(freed);
}

TEST(Tracking, ATrackerAddedDuringARunStartsAtOnce) {
  acc_accelerator* a = make("", "");
  ACC_ASSERT_OK(acc_init_trackers(a, "p", nullptr));
  Recorder r;
  ACC_ASSERT_OK(acc_add_tracker(a, "late", recorder_init, recorder_log, nullptr, &r, nullptr));
  ACC_ASSERT_OK(acc_log_scalar(a, "x", 1.0, -1));
  EXPECT_EQ(r.calls, (std::vector<std::string>{"init", "log"}));
  EXPECT_EQ(r.config, "{}");
  acc_accelerator_free(a);
}

TEST(Tracking, ErrorsAreReported) {
  acc_accelerator* bad = nullptr;
  ACC_EXPECT_ERROR(acc_test::create_accelerator({{"log_with", "tensorboard,comet_ml"}, {"project_dir", "/tmp"}}, &bad),
                   ACC_ERR_INVALID_ARGUMENT, "unknown tracker \"comet_ml\"");
  EXPECT_EQ(bad, nullptr);
  ACC_EXPECT_ERROR(acc_test::create_accelerator({{"log_with", "jsonl"}}, &bad), ACC_ERR_INVALID_ARGUMENT,
                   "needs project_dir or logging_dir");

  const std::string dir = acc_test::fresh_dir("errors");
  acc_accelerator* a = make("jsonl", dir);
  ACC_EXPECT_ERROR(acc_log_scalar(a, "loss", 1.0, -1), ACC_ERR_NOT_INITIALIZED, "init_trackers");
  ACC_EXPECT_ERROR(acc_init_trackers(a, "run", "{\"lr\": "), ACC_ERR_INVALID_ARGUMENT, "not valid JSON");
  ACC_EXPECT_ERROR(acc_init_trackers(a, "run", "[1, 2]"), ACC_ERR_INVALID_ARGUMENT, "JSON object");
  ACC_EXPECT_ERROR(acc_init_trackers(a, "../escape", nullptr), ACC_ERR_INVALID_ARGUMENT, "inside the logging folder");
  ACC_EXPECT_ERROR(acc_init_trackers(a, nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT, "project_name");
  ACC_EXPECT_ERROR(acc_init_trackers(nullptr, "run", nullptr), ACC_ERR_INVALID_HANDLE, "acc");

  Recorder failing;
  failing.fail_log = 7;
  bool freed = false;
  failing.freed = &freed;
  ACC_ASSERT_OK(acc_add_tracker(a, "service", nullptr, recorder_log, nullptr, &failing, recorder_free));
  Recorder other;
  ACC_EXPECT_ERROR(acc_add_tracker(a, "service", nullptr, recorder_log, nullptr, &other, nullptr),
                   ACC_ERR_INVALID_ARGUMENT, "already there");
  ACC_EXPECT_ERROR(acc_add_tracker(a, nullptr, nullptr, nullptr, nullptr, &other, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "name");
  ACC_ASSERT_OK(acc_init_trackers(a, "run", nullptr));
  // The failing callback's status and message come back; the jsonl tracker still got the values.
  ACC_EXPECT_ERROR(acc_log_scalar(a, "loss", 1.0, -1), ACC_ERR_IO, "the metrics service is down");
  EXPECT_NE(std::string(acc_last_error_message()).find("code 7"), std::string::npos);
  const char* dup[] = {"a", "a"};
  const double two[] = {1, 2};
  ACC_EXPECT_ERROR(acc_log(a, dup, two, 2, -1), ACC_ERR_INVALID_ARGUMENT, "appears twice");
  const char* not_utf8[] = {"loss\xff"};
  ACC_EXPECT_ERROR(acc_log(a, not_utf8, two, 1, -1), ACC_ERR_INVALID_ARGUMENT, "not valid UTF-8");
  const char* empty[] = {""};
  ACC_EXPECT_ERROR(acc_log(a, empty, two, 1, -1), ACC_ERR_INVALID_ARGUMENT, "empty");
  ACC_EXPECT_ERROR(acc_log(a, nullptr, two, 1, -1), ACC_ERR_INVALID_ARGUMENT, "names");
  // The last step has no next one for a call without a step: refused, not wrapped to a negative step.
  ACC_EXPECT_ERROR(acc_log_scalar(a, "loss", 1.0, INT64_MAX), ACC_ERR_INVALID_ARGUMENT, "below 2^63 - 1");
  ACC_EXPECT_ERROR(acc_log(a, dup, nullptr, 1, -1), ACC_ERR_INVALID_ARGUMENT, "values");
  // A call without values reaches every tracker too (the failing one fails again).
  ACC_EXPECT_ERROR(acc_log(a, nullptr, nullptr, 0, -1), ACC_ERR_IO, "the metrics service is down");
  ACC_ASSERT_OK(acc_end_training(a));
  EXPECT_EQ(lines_of(acc_test::read_file(acc_test::tracker_path(a, "jsonl"))).size(), 2u);
  ACC_EXPECT_ERROR(acc_log_scalar(a, "loss", 1.0, -1), ACC_ERR_NOT_INITIALIZED, "init_trackers");
  char* path = nullptr;
  ACC_EXPECT_ERROR(acc_tracker_path(a, "comet_ml", &path), ACC_ERR_INVALID_ARGUMENT, "no tracker named \"comet_ml\"");
  ACC_EXPECT_ERROR(acc_tracker_path(a, "jsonl", nullptr), ACC_ERR_INVALID_ARGUMENT, "out");
  acc_accelerator_free(a);
  EXPECT_TRUE(freed);

  // A file that cannot be created is an IO error naming it.
  acc_accelerator* blocked = make("csv", "/proc/acc_no_such_dir");
  ACC_EXPECT_ERROR(acc_init_trackers(blocked, "run", nullptr), ACC_ERR_IO, "/proc/acc_no_such_dir");
  ACC_EXPECT_ERROR(acc_log_scalar(blocked, "loss", 1.0, -1), ACC_ERR_NOT_INITIALIZED, "init_trackers");
  acc_accelerator_free(blocked);
}

TEST(Progress, PlainLinesWhenStdoutIsNotATerminal) {
  acc_accelerator* a = make("", "");
  const int64_t before = acc_debug_live_handles(ACC_HANDLE_PROGRESS);
  acc_progress* p = nullptr;
  testing::internal::CaptureStdout();
  ACC_ASSERT_OK(acc_progress_create(a, 20, "epoch 1", &p));
  EXPECT_EQ(acc_debug_live_handles(ACC_HANDLE_PROGRESS), before + 1);
  for (int i = 0; i < 20; ++i) {
    ACC_ASSERT_OK(acc_progress_set_postfix(p, ("loss " + std::to_string(i)).c_str()));
    ACC_ASSERT_OK(acc_progress_update(p, 1));
  }
  ACC_ASSERT_OK(acc_progress_close(p));
  ACC_ASSERT_OK(acc_progress_update(p, 1));  // ignored after close
  const auto lines = lines_of(testing::internal::GetCapturedStdout());
  acc_progress_free(p);
  EXPECT_EQ(acc_debug_live_handles(ACC_HANDLE_PROGRESS), before);
  ASSERT_EQ(lines.size(), 10u);  // 2, 4, ..., 18 and the last one at close
  EXPECT_EQ(lines[0].rfind("epoch 1: 2/20 (10%), ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("it/s"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("ETA "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(", loss 1"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[9].rfind("epoch 1: 20/20 (100%), ", 0), 0u) << lines[9];
  EXPECT_NE(lines[9].find("loss 19"), std::string::npos) << lines[9];

  ACC_EXPECT_ERROR(acc_progress_create(nullptr, 1, "x", &p), ACC_ERR_INVALID_HANDLE, "acc");
  ACC_EXPECT_ERROR(acc_progress_create(a, 1, "x", nullptr), ACC_ERR_INVALID_ARGUMENT, "out");
  ACC_ASSERT_OK(acc_progress_create(a, 0, nullptr, &p));
  ACC_EXPECT_ERROR(acc_progress_update(p, -1), ACC_ERR_INVALID_ARGUMENT, ">= 0");
  ACC_EXPECT_ERROR(acc_progress_set_postfix(p, nullptr), ACC_ERR_INVALID_ARGUMENT, "text");
  testing::internal::CaptureStdout();
  acc_progress_free(p);  // closes: one final line with the count and no total
  EXPECT_EQ(testing::internal::GetCapturedStdout().rfind("0, ? it/s, elapsed 00:00", 0), 0u);
  ACC_EXPECT_ERROR(acc_progress_update(p, 1), ACC_ERR_INVALID_HANDLE, "p");
  acc_progress_free(nullptr);
  // Counts at the edge of int64 neither loop for ever nor wrap: the count stops at the largest.
  testing::internal::CaptureStdout();
  ACC_ASSERT_OK(acc_progress_create(a, INT64_MAX, "huge", &p));
  ACC_ASSERT_OK(acc_progress_update(p, INT64_MAX - 1));
  ACC_ASSERT_OK(acc_progress_update(p, INT64_MAX));
  acc_progress_free(p);
  const std::string huge = testing::internal::GetCapturedStdout();
  EXPECT_EQ(huge.find('-'), std::string::npos) << huge;
  acc_accelerator_free(a);
}

// A table of thousands of columns (a header past any fixed read) is continued by the next run.
TEST(Tracking, AWideCsvTableIsContinuedByTheNextRun) {
  const std::string dir = acc_test::fresh_dir("wide_csv");
  acc_accelerator* a = make("csv", dir);
  ACC_ASSERT_OK(acc_init_trackers(a, "run", nullptr));
  const std::string long_name(70000, 'm');
  ACC_ASSERT_OK(acc_log_scalar(a, long_name.c_str(), 1.0, 0));
  ACC_ASSERT_OK(acc_end_training(a));
  ACC_ASSERT_OK(acc_init_trackers(a, "run", nullptr));
  ACC_ASSERT_OK(acc_log_scalar(a, long_name.c_str(), 2.0, 1));
  ACC_ASSERT_OK(acc_end_training(a));
  const auto rows = lines_of(acc_test::read_file(acc_test::tracker_path(a, "csv")));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], "step,wall_time," + long_name);
  acc_accelerator_free(a);
}

// Found by a hunt: two runs writing one table at the same time cut rows out of each other's (each
// widening rewrites the file). The second is refused at its start until the first ends.
TEST(Tracking, ASecondRunOnATableInUseIsRefused) {
  const std::string dir = acc_test::fresh_dir("csv_in_use");
  acc_accelerator* first = make("csv", dir);
  acc_accelerator* second = make("csv", dir);
  ACC_ASSERT_OK(acc_init_trackers(first, "run", nullptr));
  ACC_ASSERT_OK(acc_log_scalar(first, "a", 1.0, 0));
  ACC_EXPECT_ERROR(acc_init_trackers(second, "run", nullptr), ACC_ERR_TIMEOUT, "another run is writing this table");
  ACC_ASSERT_OK(acc_init_trackers(second, "other", nullptr));  // another table: no wait
  ACC_ASSERT_OK(acc_end_training(second));
  ACC_ASSERT_OK(acc_end_training(first));
  ACC_ASSERT_OK(acc_init_trackers(second, "run", nullptr));
  ACC_ASSERT_OK(acc_log_scalar(second, "b", 2.0, 1));
  ACC_ASSERT_OK(acc_end_training(second));
  const auto rows = lines_of(acc_test::read_file(dir + "/run/metrics.csv"));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], "step,wall_time,a,b");
  acc_accelerator_free(first);
  acc_accelerator_free(second);
}

// Python's csv module's rows of a file: what a user's own tool reads.
std::vector<std::vector<std::string>> python_csv_rows(const std::string& path, const std::string& scratch) {
  const std::string out = scratch + "/rows.json";
  const std::string command =
      "python3 -c 'import csv, json, sys; json.dump(list(csv.reader(open(sys.argv[1], "
      "newline=\"\"))), open(sys.argv[2], \"w\"))' '" +
      path + "' '" + out + "'";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return nlohmann::json::parse(acc_test::read_file(out)).get<std::vector<std::vector<std::string>>>();
}

// acc_log_text: TensorBoard's text summaries as torch's add_text writes them (which Accelerate's
// tracker calls for a str value), a "texts" object in JSONL, RFC 4180 cells in CSV (read back by
// Python's csv module, also after a later column widens the table), and the program's text callback.
TEST(Tracking, TextsReachEveryTracker) {
  const std::string dir = acc_test::fresh_dir("texts");
  acc_accelerator* a = make("all", dir);
  Recorder r;
  TextRecorder t;
  r.text = &t;
  ACC_ASSERT_OK(acc_add_tracker(a, "mine", nullptr, recorder_log, nullptr, &r, nullptr));
  ACC_EXPECT_ERROR(acc_tracker_set_log_text(a, "jsonl", recorder_log_text), ACC_ERR_INVALID_ARGUMENT,
                   "only a tracker added with acc_add_tracker");
  ACC_EXPECT_ERROR(acc_tracker_set_log_text(a, "nobody", recorder_log_text), ACC_ERR_INVALID_ARGUMENT,
                   "no tracker named \"nobody\"");
  ACC_ASSERT_OK(acc_tracker_set_log_text(a, "mine", recorder_log_text));
  ACC_ASSERT_OK(acc_init_trackers(a, "run", nullptr));
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.5, -1));  // step 0
  const std::string sample = "Once upon a time,\nthere was a \"quoted\" | piped line\r\nand \u00e9t\u00e9.";
  const char* names[] = {"sample", "empty"};
  const char* texts[] = {sample.c_str(), ""};
  ACC_ASSERT_OK(acc_log_text(a, names, texts, 2, -1));  // step 1
  const char* bad[] = {"\xff\xfe"};
  ACC_EXPECT_ERROR(acc_log_text(a, names, bad, 1, -1), ACC_ERR_INVALID_ARGUMENT, "is not valid UTF-8");
  ACC_EXPECT_ERROR(acc_log_text(a, names, nullptr, 1, -1), ACC_ERR_INVALID_ARGUMENT, "texts is NULL");
  ACC_ASSERT_OK(acc_log_scalar(a, "accuracy", 0.75, -1));  // step 2: a new csv column after the texts
  ACC_ASSERT_OK(acc_end_training(a));

  EXPECT_EQ(r.calls, (std::vector<std::string>{"log", "log_text", "log"}));
  EXPECT_EQ(t.steps, (std::vector<int64_t>{1}));
  ASSERT_EQ(t.texts.size(), 1u);
  EXPECT_EQ(t.texts[0], (std::map<std::string, std::string>{{"sample", sample}, {"empty", ""}}));

  std::map<std::string, acc_test::TbValue> text_values;
  for (const auto& e : acc_test::read_event_file(acc_test::tracker_path(a, "tensorboard")))
    for (const auto& v : e.values)
      if (v.plugin_name == "text" && v.tag != "hparams/text_summary") {
        EXPECT_EQ(e.step, 1) << v.tag;
        text_values[v.tag] = v;
      }
  ASSERT_EQ(text_values.size(), 2u);
  const acc_test::TbValue& tb = text_values["sample/text_summary"];
  EXPECT_EQ(tb.tensor_dtype, 7) << "DT_STRING";
  EXPECT_EQ(tb.tensor_dims, (std::vector<int64_t>{1}));
  EXPECT_EQ(tb.tensor_strings, (std::vector<std::string>{sample}));
  EXPECT_EQ(text_values["empty/text_summary"].tensor_strings, (std::vector<std::string>{""}));

  const auto lines = lines_of(acc_test::read_file(acc_test::tracker_path(a, "jsonl")));
  ASSERT_EQ(lines.size(), 3u);
  const auto line = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(line["step"], 1);
  EXPECT_EQ(line["values"], nlohmann::json::object());
  EXPECT_EQ(line["texts"], (nlohmann::json{{"sample", sample}, {"empty", ""}}));
  EXPECT_FALSE(nlohmann::json::parse(lines[0]).contains("texts"));

  const auto rows = python_csv_rows(acc_test::tracker_path(a, "csv"), dir);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"step", "wall_time", "loss", "sample", "empty", "accuracy"}));
  for (const auto& row : rows) EXPECT_EQ(row.size(), 6u);
  EXPECT_EQ(rows[2][0], "1");
  EXPECT_EQ(rows[2][3], sample);
  EXPECT_EQ(rows[2][4], "");
  EXPECT_EQ(rows[3][5], "0.75");
  acc_accelerator_free(a);
}

// A run's file that is not a regular file is refused at once (a FIFO would block the open for ever
// waiting for a reader; a device is no log), naming it; the run does not start.
TEST(Tracking, ARunFileThatIsNotARegularFileIsRefused) {
  for (const char* tracker : {"jsonl", "csv"}) {
    const std::string dir = acc_test::fresh_dir(std::string("special_") + tracker);
    const std::string file = dir + "/run/" + (std::string(tracker) == "csv" ? "metrics.csv" : "metrics.jsonl");
    ASSERT_EQ(std::system(("mkdir -p '" + dir + "/run' && mkfifo '" + file + "'").c_str()), 0);
    acc_accelerator* a = make(tracker, dir);
    ACC_EXPECT_ERROR(acc_init_trackers(a, "run", nullptr), ACC_ERR_IO, "'" + file + "' is not a regular file");
    ACC_EXPECT_ERROR(acc_log_scalar(a, "loss", 1.0, -1), ACC_ERR_NOT_INITIALIZED, "init_trackers");
    std::remove(file.c_str());
    ASSERT_EQ(::symlink("/dev/null", file.c_str()), 0);
    ACC_EXPECT_ERROR(acc_init_trackers(a, "run", nullptr), ACC_ERR_IO, "is not a regular file");
    std::remove(file.c_str());
    ACC_ASSERT_OK(acc_init_trackers(a, "run", nullptr));  // a regular file again: the run starts
    ACC_ASSERT_OK(acc_log_scalar(a, "loss", 1.0, -1));
    ACC_ASSERT_OK(acc_end_training(a));
    acc_accelerator_free(a);
  }
}

// A run killed while writing leaves a record cut anywhere (stdio writes its buffer out where it fills):
// the next run on the project drops that torn record and appends after the last whole one, so the
// files stay readable as a whole; a file whose tail is no record of the tracker is refused, unchanged.
TEST(Tracking, ARunAfterAKillDropsTheTornRecord) {
  const std::string dir = acc_test::fresh_dir("torn_tail");
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "/run'").c_str()), 0);
  const std::string jsonl = dir + "/run/metrics.jsonl", csv = dir + "/run/metrics.csv";
  std::ofstream(jsonl) << "{\"step\":0,\"wall_time\":1.5,\"values\":{\"loss\":0.5}}\n{\"step\":1,\"wall_ti";
  std::ofstream(csv) << "step,wall_time,loss,sample\n0,1.500000,0.5,\n1,1.600000,,\"a text\nacross lines, cut";
  acc_accelerator* a = make("jsonl,csv", dir);
  ACC_ASSERT_OK(acc_init_trackers(a, "run", nullptr));
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.25, 1));
  ACC_ASSERT_OK(acc_end_training(a));
  const auto lines = lines_of(acc_test::read_file(jsonl));
  ASSERT_EQ(lines.size(), 2u);
  for (const auto& line : lines) EXPECT_TRUE(nlohmann::json::accept(line)) << line;
  EXPECT_EQ(nlohmann::json::parse(lines[1])["values"]["loss"], 0.25);
  const auto rows = python_csv_rows(csv, dir);
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& row : rows) EXPECT_EQ(row.size(), 4u);
  EXPECT_EQ(rows[2][0], "1");
  EXPECT_EQ(rows[2][2], "0.25");

  const std::string foreign = "not a record of ours";
  std::ofstream(jsonl, std::ios::trunc) << foreign;
  ACC_EXPECT_ERROR(acc_init_trackers(a, "run", nullptr), ACC_ERR_IO, "not one of this tracker's records");
  EXPECT_EQ(acc_test::read_file(jsonl), foreign);
  acc_accelerator_free(a);
}

namespace {

// An image's pixels as torch's SummaryWriter.add_images makes them, written out loop by loop: the
// batch (N, C, H, W) in a grid of min(N, 8) columns, gray as RGB, scaled by 255 unless uint8 (NaN: 0).
struct Pixels {
  int64_t height = 0, width = 0, channels = 3;
  std::vector<uint8_t> bytes;  // rows of width * channels
};

uint8_t to_byte(double value, bool is_uint8) {
  const float scaled = static_cast<float>(value) * (is_uint8 ? 1.0f : 255.0f);
  if (std::isnan(scaled) || scaled <= 0) return 0;
  return scaled >= 255 ? 255 : static_cast<uint8_t>(scaled);
}

// `at(n, c, y, x)` is image n's value at channel c (0 for gray), row y, column x.
template <typename At>
Pixels grid_pixels(int64_t n, int64_t channels, int64_t h, int64_t w, bool is_uint8, At at) {
  const int64_t columns = std::min<int64_t>(n, 8), rows = (n + columns - 1) / columns;
  Pixels p{h * rows, w * columns, 3, {}};
  for (int64_t y = 0; y < p.height; ++y)
    for (int64_t x = 0; x < p.width; ++x)
      for (int64_t c = 0; c < 3; ++c) {
        const int64_t i = (y / h) * columns + x / w;
        p.bytes.push_back(i < n ? to_byte(at(i, channels == 1 ? 0 : c, y % h, x % w), is_uint8) : 0);
      }
  return p;
}

// Each PNG decoded by Python's Pillow (an independent reader): mode, width, height and the pixels.
std::vector<std::string> decoded_by_pillow(const std::vector<std::string>& pngs, const std::string& dir) {
  std::string files;
  for (size_t i = 0; i < pngs.size(); ++i) {
    const std::string path = dir + "/image" + std::to_string(i) + ".png";
    std::ofstream(path, std::ios::binary) << pngs[i];
    files += " '" + path + "'";
  }
  const std::string out = dir + "/pillow.out";
  const std::string command =
      "python3 -c 'import sys\nfrom PIL import Image\nfor p in sys.argv[1:]:\n"
      "  i = Image.open(p); i.load(); print(i.mode, i.size[0], i.size[1], i.tobytes().hex())'" +
      files + " > '" + out + "'";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return lines_of(acc_test::read_file(out));
}

// Whether each PNG holds the pixels torch's own convert_to_HWC (torch/utils/tensorboard/_utils.py of
// the python3 torch, loaded alone: its package needs Python's tensorboard) and image()'s scaling give
// for the input (raw bytes, dtype, shape, dataformats): one "True"/"False" line per image.
std::vector<std::string> matching_torch(const std::vector<std::string>& inputs, const std::string& dir) {
  const std::string script = dir + "/torch_check.py", out = dir + "/torch_check.out";
  std::ofstream(script) << "import importlib.util, json, sys, numpy as np, torch\n"
                           "from PIL import Image\n"
                           "path = torch.__path__[0] + '/utils/tensorboard/_utils.py'\n"
                           "spec = importlib.util.spec_from_file_location('tb_utils', path)\n"
                           "utils = importlib.util.module_from_spec(spec); spec.loader.exec_module(utils)\n"
                           "for case in json.load(open(sys.argv[1])):\n"
                           "  x = np.fromfile(case['data'], dtype=case['dtype']).reshape(case['shape'])\n"
                           "  hwc = utils.convert_to_HWC(x, case['dataformats'])\n"
                           "  scale = 1 if hwc.dtype == np.uint8 else 255\n"
                           "  with np.errstate(invalid='ignore'):\n"
                           "    want = (hwc.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)\n"
                           "  got = np.asarray(Image.open(case['png']))\n"
                           "  print(got.shape == want.shape and bool((got == want).all()))\n";
  std::ofstream(dir + "/cases.json") << "[" << [&] {
    std::string joined;
    for (const auto& c : inputs) joined += (joined.empty() ? "" : ",") + c;
    return joined;
  }() << "]";
  const std::string command = "python3 '" + script + "' '" + dir + "/cases.json' > '" + out + "'";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return lines_of(acc_test::read_file(out));
}

std::string described(const Pixels& p) {
  static const char* hex = "0123456789abcdef";
  std::string out = std::string(p.channels == 4 ? "RGBA" : "RGB") + " " + std::to_string(p.width) + " " +
                    std::to_string(p.height) + " ";
  for (uint8_t b : p.bytes) out += {hex[b >> 4], hex[b & 15]};
  return out;
}

struct ImageRecorder {
  std::vector<std::string> calls;  // "<step> <name>" per image
  std::map<std::string, std::string> pngs;
};
int recorder_log_images(void* user_data, const char* const* names, const unsigned char* const* pngs,
                        const size_t* sizes, size_t n, int64_t step) {
  auto* r = static_cast<ImageRecorder*>(user_data);
  for (size_t i = 0; i < n; ++i) {
    r->calls.push_back(std::to_string(step) + " " + names[i]);
    r->pngs[names[i]] = std::string(reinterpret_cast<const char*>(pngs[i]), sizes[i]);
  }
  return 0;
}

acc_tensor* uint8s(const std::vector<uint8_t>& values, const std::vector<int64_t>& dims) {
  acc_tensor* t = nullptr;
  EXPECT_EQ(acc_tensor_from_host(values.data(), values.size(), dims.data(), dims.size(), ACC_DTYPE_UINT8, &t), ACC_OK)
      << acc_last_error_message();
  return t;
}

}  // namespace

// acc_log_images: TensorBoard image summaries as torch's add_images writes them (tag, size, channels,
// a PNG that Pillow decodes to the pixels torch's rules give), for each layout torch takes; the same
// PNGs to a program's image callback; nothing in JSONL or CSV, though the step advances; mistakes
// refused on the arguments, nothing written.
TEST(Tracking, ImagesAreWrittenAsTorchsAddImagesWritesThem) {
  if (std::system("python3 -c 'import PIL' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "Python's Pillow is not installed (python3-pil): the PNG check is skipped";
  const std::string dir = acc_test::fresh_dir("images");
  acc_accelerator* a = make("all", dir);
  ImageRecorder pictures;  // a program's tracker with an image callback gets the same PNGs
  Recorder numbers;        // one without gets none
  ACC_ASSERT_OK(acc_add_tracker(a, "pictures", nullptr, nullptr, nullptr, &pictures, nullptr));
  ACC_ASSERT_OK(acc_tracker_set_log_images(a, "pictures", recorder_log_images));
  ACC_ASSERT_OK(acc_add_tracker(a, "numbers", nullptr, recorder_log, nullptr, &numbers, nullptr));
  ACC_EXPECT_ERROR(acc_tracker_set_log_images(a, "csv", recorder_log_images), ACC_ERR_INVALID_ARGUMENT,
                   "only a tracker added with acc_add_tracker");
  ACC_ASSERT_OK(acc_init_trackers(a, "run", nullptr));

  // A batch of 10 gray images of 2x3 in [0, 1], with values outside it and a NaN: two grid rows.
  std::vector<float> gray(10 * 2 * 3);
  for (size_t i = 0; i < gray.size(); ++i) gray[i] = static_cast<float>(i) / 50.0f;
  gray[1] = -0.5f, gray[2] = 1.5f, gray[3] = std::nanf(""), gray[4] = 0.999f;
  acc_tensor* batch = acc_test::floats(gray, {10, 1, 2, 3});
  // One RGBA image of 2x2 in bytes, height-width-channels.
  std::vector<uint8_t> rgba(2 * 2 * 4);
  for (size_t i = 0; i < rgba.size(); ++i) rgba[i] = static_cast<uint8_t>(i * 17);
  acc_tensor* picture = uint8s(rgba, {2, 2, 4});
  // Two colour images of 1x2 with their channels last; one gray image of integers (times 255 too).
  const std::vector<float> colours = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f, 1.0f, 0.0f, 0.25f};
  acc_tensor* nhwc = acc_test::floats(colours, {2, 1, 2, 3});
  acc_tensor* counts = acc_test::longs({0, 1, 2, 300}, {2, 2});

  const char* batch_name = "samples";
  ACC_ASSERT_OK(acc_log_images(a, &batch_name, &batch, 1, 3, nullptr));  // NCHW
  const char* names[] = {"picture", "colours", "counts"};
  for (int k = 0; k < 3; ++k) {
    static const char* layouts[] = {"HWC", "nhwc", "HW"};
    acc_tensor* images[] = {picture, nhwc, counts};
    ACC_ASSERT_OK(acc_log_images(a, &names[k], &images[k], 1, -1, layouts[k]));  // steps 4, 5, 6
  }

  // Mistakes: refused before anything is written or the step advances.
  ACC_EXPECT_ERROR(acc_log_images(a, &batch_name, &batch, 1, -1, "NCHX"), ACC_ERR_INVALID_ARGUMENT,
                   "is not an order of NCHW, CHW or HW");
  ACC_EXPECT_ERROR(acc_log_images(a, &batch_name, &batch, 1, -1, "CHW"), ACC_ERR_INVALID_ARGUMENT,
                   "has 4 dimensions, but dataformats \"CHW\" names 3");
  acc_tensor* four = acc_test::floats(std::vector<float>(8), {2, 4, 1, 1});
  ACC_EXPECT_ERROR(acc_log_images(a, &batch_name, &four, 1, -1, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "has 4 channels (a batch takes 1 or 3)");
  acc_tensor* empty = acc_test::floats({}, {0, 3, 2, 2});
  ACC_EXPECT_ERROR(acc_log_images(a, &batch_name, &empty, 1, -1, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "\"samples\" is empty (its N is 0)");
  ACC_EXPECT_ERROR(acc_log_images(a, &batch_name, nullptr, 1, -1, nullptr), ACC_ERR_INVALID_ARGUMENT, "images is NULL");
  ACC_EXPECT_ERROR(acc_log_images(a, &batch_name, &batch, 1, -1, ""), ACC_ERR_INVALID_ARGUMENT,
                   "dataformats \"\" is not an order of NCHW, CHW or HW");
  const char* two_names[] = {"first", "second"};
  acc_tensor* one_missing[] = {batch, nullptr};
  ACC_EXPECT_ERROR(acc_log_images(a, two_names, one_missing, 2, -1, nullptr), ACC_ERR_INVALID_HANDLE,
                   "images[1] is NULL");
  // A side past PNG's 2^31 - 1 pixels, refused from the shape before anything is allocated: a sparse
  // file mapped as one gray row of 2^31 pixels, and as 9 images that a grid row of 8 makes 2^31 wide.
  const std::string sparse = dir + "/sparse.bin";
  std::ofstream(sparse).close();
  ASSERT_EQ(truncate(sparse.c_str(), int64_t{1} << 32), 0);
  const int64_t row[] = {1, int64_t{1} << 31}, nine[] = {9, 1, 1, int64_t{1} << 28};
  acc_tensor *wide = nullptr, *grid = nullptr;
  ACC_ASSERT_OK(acc_tensor_from_file_mmap(sparse.c_str(), 0, ACC_DTYPE_UINT8, row, 2, &wide));
  ACC_ASSERT_OK(acc_tensor_from_file_mmap(sparse.c_str(), 0, ACC_DTYPE_UINT8, nine, 4, &grid));
  ACC_EXPECT_ERROR(acc_log_images(a, &batch_name, &wide, 1, -1, "HW"), ACC_ERR_INVALID_ARGUMENT,
                   "a PNG's sides are at most 2147483647");
  ACC_EXPECT_ERROR(acc_log_images(a, &batch_name, &grid, 1, -1, nullptr), ACC_ERR_INVALID_ARGUMENT,
                   "makes an image of 1x2 by 268435456x8 pixels");
  acc_tensor_free(wide);
  acc_tensor_free(grid);
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.5, -1));  // step 7
  ACC_ASSERT_OK(acc_end_training(a));

  std::map<std::string, acc_test::TbValue> images;
  std::map<std::string, int64_t> steps;
  for (const auto& e : acc_test::read_event_file(acc_test::tracker_path(a, "tensorboard")))
    for (const auto& v : e.values)
      if (v.has_image) {
        EXPECT_EQ(e.values.size(), 1u) << "an event per image, as add_images writes: " << v.tag;
        images[v.tag] = v, steps[v.tag] = e.step;
      }
  ASSERT_EQ(images.size(), 4u);
  EXPECT_EQ(steps, (std::map<std::string, int64_t>{{"samples", 3}, {"picture", 4}, {"colours", 5}, {"counts", 6}}));

  std::vector<Pixels> expected = {
      grid_pixels(10, 1, 2, 3, false,
                  [&](int64_t n, int64_t, int64_t y, int64_t x) { return gray[n * 6 + y * 3 + x]; }),
      Pixels{2, 2, 4, rgba},
      grid_pixels(2, 3, 1, 2, false,
                  [&](int64_t n, int64_t c, int64_t, int64_t x) { return colours[n * 6 + x * 3 + c]; }),
      grid_pixels(1, 1, 2, 2, false,
                  [](int64_t, int64_t, int64_t y, int64_t x) { return double(y * 2 + x == 3 ? 300 : y * 2 + x); }),
  };
  std::vector<std::string> pngs;
  int k = 0;
  for (const char* name : {"samples", "picture", "colours", "counts"}) {
    const acc_test::TbValue& v = images[name];
    EXPECT_EQ(v.image_height, expected[k].height) << name;
    EXPECT_EQ(v.image_width, expected[k].width) << name;
    EXPECT_EQ(v.image_colorspace, expected[k].channels) << name;
    pngs.push_back(v.image_encoded);
    ++k;
  }
  const auto decoded = decoded_by_pillow(pngs, dir);
  ASSERT_EQ(decoded.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(decoded[i], described(expected[i])) << "image " << i;
  // The same inputs through torch's own layout code.
  auto raw = [&](const std::string& file, const void* data, size_t bytes) {
    std::ofstream(dir + "/" + file, std::ios::binary).write(static_cast<const char*>(data), std::streamsize(bytes));
    return dir + "/" + file;
  };
  const std::vector<int64_t> count_values = {0, 1, 2, 300};
  const std::vector<nlohmann::json> cases = {
      {{"data", raw("gray.bin", gray.data(), gray.size() * 4)},
       {"dtype", "float32"},
       {"shape", {10, 1, 2, 3}},
       {"dataformats", "NCHW"}},
      {{"data", raw("rgba.bin", rgba.data(), rgba.size())},
       {"dtype", "uint8"},
       {"shape", {2, 2, 4}},
       {"dataformats", "HWC"}},
      {{"data", raw("colours.bin", colours.data(), colours.size() * 4)},
       {"dtype", "float32"},
       {"shape", {2, 1, 2, 3}},
       {"dataformats", "NHWC"}},
      {{"data", raw("counts.bin", count_values.data(), 32)},
       {"dtype", "int64"},
       {"shape", {2, 2}},
       {"dataformats", "HW"}},
  };
  std::vector<std::string> case_texts;
  for (size_t i = 0; i < cases.size(); ++i) {
    nlohmann::json c = cases[i];
    c["png"] = dir + "/image" + std::to_string(i) + ".png";  // written by decoded_by_pillow
    case_texts.push_back(c.dump());
  }
  EXPECT_EQ(matching_torch(case_texts, dir), (std::vector<std::string>(4, "True")));
  EXPECT_EQ(expected[0].bytes[3], 0) << "-0.5 is clipped to 0";
  EXPECT_EQ(expected[0].bytes[6], 255) << "1.5 is clipped to 255";

  EXPECT_EQ(pictures.calls, (std::vector<std::string>{"3 samples", "4 picture", "5 colours", "6 counts"}));
  for (const char* name : {"samples", "picture", "colours", "counts"})
    EXPECT_EQ(pictures.pngs[name], images[name].image_encoded) << name;
  EXPECT_EQ(numbers.steps, (std::vector<int64_t>{7}));

  // JSONL and CSV show no images: one line, the loss, at the step after the images'.
  const auto lines = lines_of(acc_test::read_file(acc_test::tracker_path(a, "jsonl")));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(lines[0])["step"], 7);
  EXPECT_EQ(lines_of(acc_test::read_file(acc_test::tracker_path(a, "csv"))).size(), 2u);
  for (acc_tensor* t : {batch, picture, nhwc, counts, four, empty}) acc_tensor_free(t);
  acc_accelerator_free(a);
}

// Larger images, smooth and random, through every PNG row filter: Pillow decodes them to what torch's
// own layout code and scaling give.
TEST(Tracking, LargerImagesDecodeToTorchsPixels) {
  if (std::system("python3 -c 'import PIL' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "Python's Pillow is not installed (python3-pil): the PNG check is skipped";
  const std::string dir = acc_test::fresh_dir("larger_images");
  acc_accelerator* a = make("tensorboard", dir);
  ACC_ASSERT_OK(acc_init_trackers(a, "run", nullptr));
  std::vector<float> gradient(3 * 40 * 56);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 40; ++y)
      for (int x = 0; x < 56; ++x) gradient[(c * 40 + y) * 56 + x] = 0.3f * c + 0.5f * y / 40 + 0.2f * x / 56;
  std::vector<uint8_t> noise(11 * 3 * 17 * 23);
  uint32_t state = 12345;
  for (auto& v : noise) v = static_cast<uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
  acc_tensor* smooth = acc_test::floats(gradient, {3, 40, 56});
  acc_tensor* random = uint8s(noise, {11, 3, 17, 23});
  const char* names[] = {"smooth", "random"};
  acc_tensor* images[] = {smooth, random};
  ACC_ASSERT_OK(acc_log_images(a, &names[0], &images[0], 1, 0, "CHW"));
  ACC_ASSERT_OK(acc_log_images(a, &names[1], &images[1], 1, 1, nullptr));
  ACC_ASSERT_OK(acc_end_training(a));
  std::map<std::string, std::string> pngs;
  for (const auto& e : acc_test::read_event_file(acc_test::tracker_path(a, "tensorboard")))
    for (const auto& v : e.values)
      if (v.has_image) pngs[v.tag] = v.image_encoded;
  ASSERT_EQ(pngs.size(), 2u);
  auto raw = [&](const std::string& file, const void* data, size_t bytes) {
    std::ofstream(dir + "/" + file, std::ios::binary).write(static_cast<const char*>(data), std::streamsize(bytes));
    return dir + "/" + file;
  };
  std::ofstream(dir + "/smooth.png", std::ios::binary) << pngs["smooth"];
  std::ofstream(dir + "/random.png", std::ios::binary) << pngs["random"];
  const std::vector<nlohmann::json> cases = {
      {{"data", raw("smooth.bin", gradient.data(), gradient.size() * 4)},
       {"dtype", "float32"},
       {"shape", {3, 40, 56}},
       {"dataformats", "CHW"},
       {"png", dir + "/smooth.png"}},
      {{"data", raw("random.bin", noise.data(), noise.size())},
       {"dtype", "uint8"},
       {"shape", {11, 3, 17, 23}},
       {"dataformats", "NCHW"},
       {"png", dir + "/random.png"}},
  };
  EXPECT_EQ(matching_torch({cases[0].dump(), cases[1].dump()}, dir), (std::vector<std::string>(2, "True")));
  acc_tensor_free(smooth);
  acc_tensor_free(random);
  acc_accelerator_free(a);
}

// A group value whose run folder cannot be made (a file in the way) fails its call; the run goes on
// and ends with every file complete (the failed folder was left as an empty entry that end_training
// then closed: a crash, and the JSONL never flushed).
TEST(Tracking, AGroupFolderThatCannotBeMadeFailsOnlyItsCall) {
  const std::string dir = acc_test::fresh_dir("scalars_blocked");
  acc_accelerator* a = make("tensorboard,jsonl", dir);
  ACC_ASSERT_OK(acc_init_trackers(a, "run", nullptr));
  std::ofstream(dir + "/run/loss_blocked") << "in the way";
  const char* names[] = {"blocked"};
  const double one[] = {1.0};
  ACC_EXPECT_ERROR(acc_log_scalars(a, "loss", names, one, 1, 0), ACC_ERR_IO, "cannot create the TensorBoard folder");
  ACC_EXPECT_ERROR(acc_log_scalars(a, "loss", names, one, 1, 1), ACC_ERR_IO, "cannot create the TensorBoard folder");
  ACC_ASSERT_OK(acc_log_scalar(a, "lr", 0.5, 2));
  ACC_ASSERT_OK(acc_end_training(a));
  const auto lines = lines_of(acc_test::read_file(acc_test::tracker_path(a, "jsonl")));
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(nlohmann::json::parse(lines.back())["values"], (nlohmann::json{{"lr", 0.5}}));
  acc_accelerator_free(a);
}

// acc_log_scalars, Accelerate's log of a dict value: TensorBoard gets torch's add_scalars layout (a
// run folder "<main>_<name>" per value, its own event file, tagged with the main tag); JSONL and the
// program's trackers get "<main>/<name>"; a name leading out of the run's folder is refused.
TEST(Tracking, AGroupOfScalarsIsWrittenAsAddScalars) {
  const std::string dir = acc_test::fresh_dir("scalars_group");
  acc_accelerator* a = make("tensorboard,jsonl", dir);
  Recorder r;
  ACC_ASSERT_OK(acc_add_tracker(a, "mine", nullptr, recorder_log, nullptr, &r, nullptr));
  ACC_ASSERT_OK(acc_init_trackers(a, "run", nullptr));
  const char* names[] = {"train", "eval"};
  for (int step = 0; step < 3; ++step) {
    const double values[] = {1.0 / (step + 1), 2.0 / (step + 1)};
    ACC_ASSERT_OK(acc_log_scalars(a, "loss/total", names, values, 2, -1));
  }
  const char* escape[] = {"../outside"};
  const double one[] = {1.0};
  ACC_EXPECT_ERROR(acc_log_scalars(a, "loss", escape, one, 1, -1), ACC_ERR_INVALID_ARGUMENT,
                   "would lead out of the run's folder");
  ACC_EXPECT_ERROR(acc_log_scalars(a, "", names, one, 1, -1), ACC_ERR_INVALID_ARGUMENT, "main tag");
  ACC_EXPECT_ERROR(acc_log_scalars(a, nullptr, names, one, 1, -1), ACC_ERR_INVALID_ARGUMENT, "main_tag");
  ACC_ASSERT_OK(acc_log_scalar(a, "lr", 0.5, -1));  // step 3: the failed calls took none
  ACC_ASSERT_OK(acc_end_training(a));

  const std::string run = dir + "/run";
  for (const char* name : {"train", "eval"}) {
    const std::string folder = run + "/loss_total_" + name;
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(folder)) files.push_back(entry.path().string());
    ASSERT_EQ(files.size(), 1u) << folder;
    EXPECT_NE(files[0].find("events.out.tfevents."), std::string::npos) << files[0];
    const auto events = acc_test::read_event_file(files[0]);
    ASSERT_EQ(events.size(), 4u) << "the file version, then a value a step";
    EXPECT_EQ(events[0].file_version, "brain.Event:2");
    for (int step = 0; step < 3; ++step) {
      ASSERT_EQ(events[step + 1].values.size(), 1u);
      EXPECT_EQ(events[step + 1].step, step);
      EXPECT_EQ(events[step + 1].values[0].tag, "loss/total");
      EXPECT_EQ(events[step + 1].values[0].simple_value,
                static_cast<float>((std::string(name) == "train" ? 1.0 : 2.0) / (step + 1)));
    }
  }
  for (const auto& e : acc_test::read_event_file(acc_test::tracker_path(a, "tensorboard")))
    for (const auto& v : e.values) EXPECT_NE(v.tag, "loss/total") << "the run's own file holds no group value";

  const auto lines = lines_of(acc_test::read_file(acc_test::tracker_path(a, "jsonl")));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(nlohmann::json::parse(lines[2])["values"],
            (nlohmann::json{{"loss/total/train", 1.0 / 3}, {"loss/total/eval", 2.0 / 3}}));
  EXPECT_EQ(nlohmann::json::parse(lines[3])["step"], 3);
  ASSERT_EQ(r.logs.size(), 4u);
  EXPECT_EQ(r.logs[0], (std::map<std::string, double>{{"loss/total/train", 1.0}, {"loss/total/eval", 2.0}}));
  acc_accelerator_free(a);
}
