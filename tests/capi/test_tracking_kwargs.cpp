// Accelerate's init_kwargs (acc_init_trackers_ex) for the trackers other than mlflow (whose are in
// test_tracking_mlflow.cpp): SummaryWriter's arguments for tensorboard, none for jsonl, csv and the
// program's trackers, each mistake refused by name on the arguments.
// (A key given as null counts as not given to a tracker that takes it, as Python's default would.)
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "support.h"
#include "tracking_reader.h"

// filename_suffix ends each event file's name (the run's and acc_log_scalars' own, as SummaryWriter's
// add_scalars writers take it); flush_secs, max_queue and comment are taken; the events are TensorBoard's.
TEST(TrackerKwargs, TensorBoardTakesSummaryWritersArguments) {
  const std::string dir = acc_test::fresh_dir("kwargs_tensorboard");
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "tensorboard"}, {"project_dir", dir}});
  ACC_ASSERT_OK(acc_init_trackers_ex(
      a, "run", nullptr,
      R"({"tensorboard": {"filename_suffix": ".v2", "flush_secs": 30, "max_queue": 5, "comment": "ignored"}})"));
  const std::string path = acc_test::tracker_path(a, "tensorboard");
  EXPECT_EQ(path.substr(path.size() - 3), ".v2") << path;
  ACC_ASSERT_OK(acc_log_scalar(a, "loss", 0.5, 0));
  const char* names[] = {"train"};
  const double values[] = {1.5};
  ACC_ASSERT_OK(acc_log_scalars(a, "loss", names, values, 1, 1));
  ACC_ASSERT_OK(acc_end_training(a));
  const auto events = acc_test::read_event_file(path);
  bool seen = false;
  for (const auto& e : events)
    for (const auto& v : e.values) seen = seen || (v.tag == "loss" && e.step == 0 && v.simple_value == 0.5f);
  EXPECT_TRUE(seen);
  size_t group_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/run/loss_train")) {
    const std::string name = entry.path().filename();
    EXPECT_EQ(name.substr(name.size() - 3), ".v2") << name;
    ++group_files;
  }
  EXPECT_EQ(group_files, 1u);

  // A later run without init_kwargs is back to the defaults.
  ACC_ASSERT_OK(acc_init_trackers(a, "plain", nullptr));
  const std::string plain = acc_test::tracker_path(a, "tensorboard");
  EXPECT_NE(plain.substr(plain.size() - 3), ".v2") << plain;
  ACC_ASSERT_OK(acc_end_training(a));

  ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "run", nullptr, R"({"tensorboard": {"purge_step": -1}})"),
                   ACC_ERR_INVALID_ARGUMENT, "purge_step");
  ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "run", nullptr, R"({"tensorboard": {"flush_secs": 0}})"),
                   ACC_ERR_INVALID_ARGUMENT, "it must be from 1 to 86400");
  ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "run", nullptr, R"({"tensorboard": {"flush_secs": 1.5}})"),
                   ACC_ERR_INVALID_ARGUMENT, "is an integer");
  ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "run", nullptr, R"({"tensorboard": {"filename_suffix": "a/b"}})"),
                   ACC_ERR_INVALID_ARGUMENT, "without '/'");
  ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "run", nullptr, R"({"tensorboard": {"logdir": "x"}})"),
                   ACC_ERR_INVALID_ARGUMENT, "the tensorboard tracker takes no keyword argument \"logdir\"");
  acc_accelerator_free(a);
}

// purge_step, a run resumed in the folder of one that crashed: the new file starts as SummaryWriter's
// does (the version, the version again at that step, a session start there), and TensorBoard (where
// its Python package is installed) then shows the first run's values before that step only.
TEST(TrackerKwargs, TensorBoardPurgesFromTheResumedStep) {
  const std::string dir = acc_test::fresh_dir("kwargs_purge");
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "tensorboard"}, {"project_dir", dir}});
  ACC_ASSERT_OK(acc_init_trackers(a, "run", nullptr));
  for (int step = 0; step < 5; ++step) ACC_ASSERT_OK(acc_log_scalar(a, "loss", 10.0 + step, step));
  ACC_ASSERT_OK(acc_end_training(a));  // as if it had crashed after step 4
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "run", nullptr, R"({"tensorboard": {"purge_step": 3}})"));
  const std::string resumed = acc_test::tracker_path(a, "tensorboard");
  for (int step = 3; step < 6; ++step) ACC_ASSERT_OK(acc_log_scalar(a, "loss", 20.0 + step, step));
  ACC_ASSERT_OK(acc_end_training(a));
  acc_accelerator_free(a);

  const auto events = acc_test::read_event_file(resumed);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_EQ(events[0].step, 0);
  EXPECT_EQ(events[1].file_version, "brain.Event:2");
  EXPECT_EQ(events[1].step, 3);
  EXPECT_EQ(events[2].session_status, 1);  // START
  EXPECT_EQ(events[2].step, 3);
  EXPECT_GT(events[2].wall_time, 0);

  if (std::system("python3 -c 'import tensorboard' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "Python's tensorboard package is not installed: TensorBoard's purge not checked";
  const std::string script = dir + "/steps.py", out = dir + "/steps.txt";
  std::ofstream(script) << "from tensorboard.backend.event_processing.event_accumulator import EventAccumulator\n"
                           "ea = EventAccumulator('"
                        << dir << "/run'); ea.Reload()\n"
                        << "print(' '.join('%d:%g' % (e.step, e.value) for e in ea.Scalars('loss')))\n";
  ASSERT_EQ(std::system(("python3 '" + script + "' > '" + out + "'").c_str()), 0);
  EXPECT_EQ(acc_test::read_file(out), "0:10 1:11 2:12 3:23 4:24 5:25\n");
}

// jsonl, csv and a program's tracker take no keyword arguments: any is refused, naming it, on the
// arguments (nothing starts); init_kwargs of null, {} or "" is none.
TEST(TrackerKwargs, TrackersWithoutArgumentsRefuseAny) {
  const std::string dir = acc_test::fresh_dir("kwargs_none");
  acc_accelerator* a = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "jsonl,csv"}, {"project_dir", dir}});
  ACC_ASSERT_OK(acc_add_tracker(a, "mine", nullptr, nullptr, nullptr, nullptr, nullptr));
  for (const char* kwargs :
       {R"({"jsonl": {"flush_secs": 1}})", R"({"csv": {"x": null, "y": 1}})", R"({"mine": {"anything": 1}})"})
    ACC_EXPECT_ERROR(acc_init_trackers_ex(a, "run", nullptr, kwargs), ACC_ERR_INVALID_ARGUMENT,
                     "takes no keyword argument");
  EXPECT_FALSE(std::filesystem::exists(dir + "/run"));
  for (const char* none : {"", "{}", R"({"jsonl": {}, "csv": null, "mine": {}})"})
    ACC_ASSERT_OK(acc_init_trackers_ex(a, "run", nullptr, none));
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "run", nullptr, nullptr));
  ACC_EXPECT_ERROR(acc_init_trackers_ex(nullptr, "run", nullptr, nullptr), ACC_ERR_INVALID_HANDLE, "acc");
  ACC_EXPECT_ERROR(acc_init_trackers_ex(a, nullptr, nullptr, nullptr), ACC_ERR_INVALID_ARGUMENT, "project_name");
  ACC_ASSERT_OK(acc_end_training(a));
  acc_accelerator_free(a);
}

namespace {

// init_kwargs putting DVCLive's folder at `live`, without dvc.yaml or a DVC experiment.
std::string dvclive_in(const std::string& live) {
  return R"({"dvclive": {"dir": ")" + live + R"(", "dvcyaml": false, "save_dvc_exp": false}})";
}

}  // namespace

// Accelerate's log_kwargs (acc_log_ex): each tracker's log takes its own. TensorBoard's walltime sets
// the event's time and new_style writes the value as the scalars plugin's tensor (double with
// double_precision); MLflow's timestamp is the line's; DVCLive's plot false keeps the value out of
// the tables (metrics.json has it). Mistakes are refused on the arguments, and the call takes no step.
TEST(TrackerKwargs, LogKwargsReachEachTracker) {
  const std::string dir = acc_test::fresh_dir("log_kwargs");
  const acc_test::ScopedEnv uri("MLFLOW_TRACKING_URI", (dir + "/mlruns").c_str()),
      experiment("MLFLOW_EXPERIMENT_NAME", nullptr), run_id("MLFLOW_RUN_ID", nullptr), tags("MLFLOW_TAGS", nullptr);
  acc_accelerator* a = acc_test::make_accelerator(
      {{"cpu", "true"}, {"log_with", "tensorboard,mlflow,dvclive,jsonl"}, {"project_dir", dir}});
  const std::string live = dir + "/live";
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "run", nullptr, dvclive_in(live).c_str()));
  const char* loss[] = {"loss"};
  const char* acc_name[] = {"acc"};
  const double half[] = {0.5}, quarter[] = {0.25};
  ACC_ASSERT_OK(acc_log_ex(a, loss, half, 1, 3,
                           R"({"tensorboard": {"walltime": 1234.5, "new_style": true, "double_precision": true},
                               "mlflow": {"timestamp": 42, "synchronous": true}, "dvclive": {"plot": false}})"));
  ACC_ASSERT_OK(acc_log_ex(a, acc_name, quarter, 1, 4,
                           R"({"tensorboard": {"new_style": true}, "dvclive": {"timestamp": true}})"));
  ACC_ASSERT_OK(acc_log_ex(a, acc_name, quarter, 1, -1, nullptr));  // step 5, as acc_log
  const std::vector<std::pair<std::string, std::pair<acc_status, const char*>>> mistakes = {
      {R"({"jsonl": {"x": 1}})", {ACC_ERR_INVALID_ARGUMENT, "the jsonl tracker takes no keyword argument \"x\""}},
      {R"({"comet_ml": {}})", {ACC_ERR_INVALID_ARGUMENT, "log_kwargs names \"comet_ml\", which is no tracker"}},
      {R"({"tensorboard": {"walltime": "now"}})", {ACC_ERR_INVALID_ARGUMENT, "is a number"}},
      {R"({"tensorboard": {"walltime": -1}})", {ACC_ERR_INVALID_ARGUMENT, "it must be from 0"}},
      {R"({"mlflow": {"run_id": "abc"}})", {ACC_ERR_UNSUPPORTED, "log_kwargs[\"mlflow\"][\"run_id\"]"}},
      {R"({"dvclive": {"timestamp": 1}})", {ACC_ERR_INVALID_ARGUMENT, "timestamp"}},
      {R"([1])", {ACC_ERR_INVALID_ARGUMENT, "log_kwargs is a JSON object"}},
      {R"({)", {ACC_ERR_INVALID_ARGUMENT, "log_kwargs"}}};
  for (const auto& [kwargs, expected] : mistakes)
    ACC_EXPECT_ERROR(acc_log_ex(a, loss, half, 1, -1, kwargs.c_str()), expected.first, expected.second);
  ACC_ASSERT_OK(acc_log_ex(a, loss, quarter, 1, -1, ""));  // step 6: the refused calls took none
  // None, as Python's `if plot:` reads it: false (no row), and no timestamp.
  ACC_ASSERT_OK(acc_log_ex(a, acc_name, half, 1, -1, R"({"dvclive": {"plot": null, "timestamp": null}})"));
  const std::string events = acc_test::tracker_path(a, "tensorboard");
  const std::string mlflow_run = acc_test::tracker_path(a, "mlflow");
  const std::string jsonl = acc_test::tracker_path(a, "jsonl");
  ACC_ASSERT_OK(acc_end_training(a));
  acc_accelerator_free(a);

  std::map<int64_t, acc_test::TbEvent> by_step;
  for (const auto& e : acc_test::read_event_file(events))
    if (e.has_summary && !e.values.empty() && e.values[0].tag != "_hparams_/session_start_info") by_step[e.step] = e;
  ASSERT_TRUE(by_step.count(3) && by_step.count(4) && by_step.count(5) && by_step.count(6));
  EXPECT_EQ(by_step[3].wall_time, 1234.5);
  const auto& in_double = by_step[3].values[0];
  EXPECT_EQ(in_double.tag, "loss");
  EXPECT_FALSE(in_double.has_simple_value);
  EXPECT_EQ(in_double.tensor_dtype, 2);  // DT_DOUBLE
  EXPECT_EQ(in_double.tensor_numbers, std::vector<double>{0.5});
  EXPECT_EQ(in_double.plugin_name, "scalars");
  EXPECT_EQ(by_step[4].values[0].tensor_dtype, 1);  // DT_FLOAT
  EXPECT_EQ(by_step[4].values[0].tensor_numbers, std::vector<double>{0.25});
  EXPECT_GT(by_step[4].wall_time, 1e9);
  EXPECT_TRUE(by_step[5].values[0].has_simple_value);
  EXPECT_EQ(acc_test::read_file(mlflow_run + "/metrics/loss").substr(0, 9), "42 0.5 3\n");
  EXPECT_EQ(acc_test::read_file(live + "/plots/metrics/loss.tsv"), "step\tloss\n6\t0.25\n") << "plot false: no row";
  // timestamp: Metric.dump's column of int(time.time() * 1000), in the rows that asked for it; the
  // header is the first row's.
  const std::string table = acc_test::read_file(live + "/plots/metrics/acc.tsv");
  const std::string first_row =
      table.substr(table.find('\n') + 1, table.find('\n', table.find('\n') + 1) - table.find('\n'));
  EXPECT_EQ(table.substr(0, table.find('\n') + 1), "timestamp\tstep\tacc\n") << table;
  const int64_t ms = std::stoll(first_row.substr(0, first_row.find('\t')));
  EXPECT_GT(ms, int64_t{1700000000000}) << table;
  EXPECT_EQ(first_row.substr(first_row.find('\t')), "\t4\t0.25\n") << table;
  EXPECT_EQ(table.substr(table.size() - 7), "5\t0.25\n") << table;
  const auto summary = acc_test::read_file(live + "/metrics.json");
  EXPECT_NE(summary.find("\"loss\": 0.25"), std::string::npos) << summary;
  size_t lines = 0;
  for (char c : acc_test::read_file(jsonl)) lines += c == '\n';
  EXPECT_EQ(lines, 5u) << "steps 3, 4, 5, 6 and 7";
}

// log_kwargs with texts (acc_log_text_ex, TensorBoard's add_text) and a group (acc_log_scalars_ex,
// add_scalars): both take walltime alone, so add_scalar's new_style is refused for them; DVCLive's plot
// false keeps a text out of its table.
TEST(TrackerKwargs, LogKwargsWithTextsAndGroups) {
  const std::string dir = acc_test::fresh_dir("log_kwargs_texts");
  acc_accelerator* a =
      acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "tensorboard,dvclive"}, {"project_dir", dir}});
  const std::string live = dir + "/live";
  ACC_ASSERT_OK(acc_init_trackers_ex(a, "run", nullptr, dvclive_in(live).c_str()));
  const char* note[] = {"note"};
  const char* text[] = {"hello"};
  const char* splits[] = {"train", "eval"};
  const double losses[] = {0.5, 0.75};
  ACC_ASSERT_OK(
      acc_log_text_ex(a, note, text, 1, 1, R"({"tensorboard": {"walltime": 111.5}, "dvclive": {"plot": false}})"));
  ACC_ASSERT_OK(acc_log_scalars_ex(a, "loss", splits, losses, 2, 2, R"({"tensorboard": {"walltime": 222.25}})"));
  for (const char* kwargs :
       {R"({"tensorboard": {"new_style": true}})", R"({"tensorboard": {"double_precision": false}})"}) {
    ACC_EXPECT_ERROR(acc_log_text_ex(a, note, text, 1, 3, kwargs), ACC_ERR_INVALID_ARGUMENT,
                     "takes no keyword argument");
    ACC_EXPECT_ERROR(acc_log_scalars_ex(a, "loss", splits, losses, 2, 3, kwargs), ACC_ERR_INVALID_ARGUMENT,
                     "takes no keyword argument");
  }
  ACC_ASSERT_OK(acc_log_text_ex(a, note, text, 1, -1, nullptr));  // step 3: the refused calls took none
  const std::string run = acc_test::tracker_path(a, "tensorboard");
  ACC_ASSERT_OK(acc_end_training(a));
  acc_accelerator_free(a);

  std::map<int64_t, double> text_times;
  for (const auto& e : acc_test::read_event_file(run))
    if (e.has_summary && !e.values.empty() && e.values[0].tag == "note/text_summary") text_times[e.step] = e.wall_time;
  EXPECT_EQ(text_times.at(1), 111.5);
  EXPECT_GT(text_times.at(3), 1e9);
  const std::string run_dir = std::filesystem::path(run).parent_path().string();
  for (const char* split : {"loss_train", "loss_eval"}) {
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(run_dir + "/" + split)) files.push_back(entry.path());
    ASSERT_EQ(files.size(), 1u) << split;
    double time = 0;
    for (const auto& e : acc_test::read_event_file(files[0]))
      if (e.has_summary && !e.values.empty() && e.step == 2) time = e.wall_time;
    EXPECT_EQ(time, 222.25) << split;
  }
  EXPECT_EQ(acc_test::read_file(live + "/plots/metrics/note.tsv"), "step\tnote\n3\thello\n") << "plot false: no row";
}
