// Accelerate's init_kwargs (acc_init_trackers_ex) for the trackers other than mlflow (whose are in
// test_tracking_mlflow.cpp): SummaryWriter's arguments for tensorboard, none for jsonl, csv and the
// program's trackers, each mistake refused by name on the arguments.
// (A key given as null counts as not given to a tracker that takes it, as Python's default would.)
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

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
