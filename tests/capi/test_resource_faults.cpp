// Running out of resources: a full disk (a file-size limit, RLIMIT_FSIZE, fails writes as a full
// disk does), an address-space limit (ulimit -v), and paths that are not plain files. Each is an
// error with the reason and the file, never the end of the process, and what was there stays.
#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "support.h"
#include "tracking_reader.h"
#include "wandb_reader.h"

namespace {

namespace fs = std::filesystem;

constexpr const char* kSpec =
    R"([{"type":"linear","in_features":64,"out_features":64},{"type":"linear","in_features":64,"out_features":64}])";

// While it lives, files of this process cannot grow past `bytes`: writes beyond fail with EFBIG
// (SIGXFSZ ignored), as they fail with ENOSPC on a full disk.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    ::signal(SIGXFSZ, handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  sighandler_t handler_ = SIG_DFL;
};

// Set, the library's fsync calls fail with this errno: a disk that reports running out of room only
// when it writes back (thin provisioning, network file systems). This program's fsync stands in
// for the C library's, libaccelerate's calls included (symbol interposition).
std::atomic<int> fsync_failure{0};

// Set, the library's ftruncate calls fail with this errno: a file made immutable or read-only while
// it is written, which refuses both the write and the cut back to its last whole record.
std::atomic<int> ftruncate_failure{0};

// Makes the files and folders the library creates under `path` undeletable by this process: the
// immutable flag where it runs as root (which permissions do not stop), else write-protection. False
// where neither can be set.
bool protect(const std::string& path, bool on) {
  if (::geteuid() != 0) {
    for (const auto& entry : fs::recursive_directory_iterator(path))
      if (entry.is_directory())
        fs::permissions(entry.path(), fs::perms::owner_write, on ? fs::perm_options::remove : fs::perm_options::add);
    fs::permissions(path, fs::perms::owner_write, on ? fs::perm_options::remove : fs::perm_options::add);
    return true;
  }
  bool all = true;
  for (const auto& entry : fs::recursive_directory_iterator(path)) {
    if (!entry.is_regular_file()) continue;
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    int flags = 0;
    all = all && fd >= 0 && ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
    flags = on ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
    all = all && ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
    if (fd >= 0) ::close(fd);
  }
  return all;
}

// A spec model with every parameter `value`.
acc_model* model_of(float value) {
  acc_model* model = acc_test::spec_model(kSpec);
  acc_test::fill_state(model, value);
  return model;
}

std::set<float> values_in_folder(const std::string& dir) {
  acc_model* model = acc_test::spec_model(kSpec);
  EXPECT_EQ(acc_model_load_safetensors(model, dir.c_str(), 1, nullptr, nullptr), ACC_OK) << acc_last_error_message();
  std::set<float> values = acc_test::parameter_values(model);
  acc_model_free(model);
  return values;
}

// The files in `dir` (names only).
std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

}  // namespace

extern "C" int fsync(int fd) {
  if (const int error = fsync_failure.load()) {
    errno = error;
    return -1;
  }
  return static_cast<int>(::syscall(SYS_fsync, fd));
}

extern "C" int ftruncate(int fd, off_t length) {
  if (const int error = ftruncate_failure.load()) {
    errno = error;
    return -1;
  }
  return static_cast<int>(::syscall(SYS_ftruncate, fd, length));
}

TEST(FullDisk, AWriteBackFailureFailsTheSaveAndKeepsTheEarlierCheckpointAndModel) {
  // No save flushed its files to disk: a disk that reports running out of room at write-back lost the
  // checkpoint and the model after both calls returned ACC_OK (a hunt's thin-provisioned disk).
  const std::string dir = acc_test::fresh_dir("write_back_failure");
  const std::string checkpoint = dir + "/checkpoint", weights = dir + "/weights";
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "true"}});
  acc_model* model = model_of(1);
  acc_model* prepared = nullptr;
  ACC_ASSERT_OK(acc_prepare_model(acc, model, ACC_PLACEMENT_DEFAULT, &prepared));
  ACC_ASSERT_OK(acc_save_state(acc, checkpoint.c_str(), nullptr));
  ACC_ASSERT_OK(acc_save_model(acc, prepared, weights.c_str(), nullptr));
  acc_test::fill_state(prepared, 2);
  fsync_failure = ENOSPC;
  ACC_EXPECT_ERROR(acc_save_state(acc, checkpoint.c_str(), nullptr), ACC_ERR_IO,
                   "No space left on device (flushing it to disk)");
  EXPECT_NE(std::string(acc_last_error_message()).find(checkpoint), std::string::npos) << acc_last_error_message();
  ACC_EXPECT_ERROR(acc_save_model(acc, prepared, weights.c_str(), nullptr), ACC_ERR_IO,
                   "No space left on device (flushing it to disk)");
  EXPECT_NE(std::string(acc_last_error_message()).find(weights), std::string::npos) << acc_last_error_message();
  fsync_failure = 0;
  EXPECT_EQ(files_in(dir), (std::set<std::string>{"checkpoint", "weights"}));  // no staging or temporaries
  EXPECT_TRUE(acc_test::temporaries_of(weights + "/model.safetensors").empty());
  EXPECT_EQ(values_in_folder(weights), std::set<float>{1});
  ACC_ASSERT_OK(acc_load_state(acc, checkpoint.c_str(), nullptr));
  EXPECT_EQ(acc_test::parameter_values(prepared), std::set<float>{1});
  acc_model_free(prepared);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

TEST(UnsyncedSaves, ASaveIsNotFlushedToDisk) {
  // Run by CTest's capi_saves_unsynced, with ACC_SYNC_SAVES=0: a flush that would fail is not made.
  const char* sync = std::getenv("ACC_SYNC_SAVES");
  if (!sync || std::string(sync) != "0") GTEST_SKIP() << "runs with ACC_SYNC_SAVES=0 (capi_saves_unsynced)";
  const std::string dir = acc_test::fresh_dir("unsynced_saves");
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "true"}});
  acc_model* model = model_of(1);
  acc_model* prepared = nullptr;
  ACC_ASSERT_OK(acc_prepare_model(acc, model, ACC_PLACEMENT_DEFAULT, &prepared));
  fsync_failure = ENOSPC;
  ACC_ASSERT_OK(acc_save_state(acc, (dir + "/checkpoint").c_str(), nullptr));
  ACC_ASSERT_OK(acc_save_model(acc, prepared, (dir + "/weights").c_str(), nullptr));
  fsync_failure = 0;
  ACC_ASSERT_OK(acc_load_state(acc, (dir + "/checkpoint").c_str(), nullptr));
  acc_model_free(prepared);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

TEST(SavePaths, AnEarlierCheckpointThatCannotBeDeletedIsKeptAsideAndLaterSavesWork) {
  // The earlier checkpoint, swapped to the staging folder's name and not deletable there, stopped
  // every later save into that folder ("cannot write '.<name>.incomplete/...'").
  const std::string parent = acc_test::fresh_dir("undeletable_checkpoint");
  const std::string checkpoint = parent + "/ck", kept = parent + "/.ck.replaced";
  // Deletable again at the end, wherever the test stops.
  const std::shared_ptr<void> unprotect(nullptr, [&](void*) {
    for (const std::string& path : {checkpoint, kept})
      if (fs::exists(path)) protect(path, false);
  });
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "true"}});
  acc_model* model = model_of(1);
  acc_model* prepared = nullptr;
  ACC_ASSERT_OK(acc_prepare_model(acc, model, ACC_PLACEMENT_DEFAULT, &prepared));
  ACC_ASSERT_OK(acc_save_state(acc, checkpoint.c_str(), nullptr));
  if (!protect(checkpoint, true)) GTEST_SKIP() << "this file system cannot make files undeletable";
  acc_test::fill_state(prepared, 2);
  ACC_EXPECT_ERROR(acc_save_state(acc, checkpoint.c_str(), nullptr), ACC_ERR_IO,
                   "cannot delete the checkpoint it replaced");
  EXPECT_NE(std::string(acc_last_error_message()).find("kept as '" + kept + "'"), std::string::npos)
      << acc_last_error_message();
  EXPECT_NE(std::string(acc_last_error_message()).find("was written complete"), std::string::npos)
      << acc_last_error_message();
  EXPECT_EQ(files_in(parent), (std::set<std::string>{"ck", ".ck.replaced"}));
  acc_test::fill_state(prepared, 3);
  ACC_ASSERT_OK(acc_save_state(acc, checkpoint.c_str(), nullptr));  // the folder is not blocked
  acc_test::fill_state(prepared, 0);
  ACC_ASSERT_OK(acc_load_state(acc, checkpoint.c_str(), nullptr));
  EXPECT_EQ(acc_test::parameter_values(prepared), std::set<float>{3});
  ACC_ASSERT_OK(acc_load_state(acc, kept.c_str(), nullptr));  // the earlier one, whole
  EXPECT_EQ(acc_test::parameter_values(prepared), std::set<float>{1});
  acc_model_free(prepared);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

TEST(FullDisk, AModelSaveThatFailsIntoANewFolderLeavesNoFolder) {
  // The folder made for the model stayed behind, empty (so did merge-weights' output folder).
  const std::string dir = acc_test::temp_path("full_disk_new_folder");
  fs::remove_all(dir);
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "true"}});
  acc_model* model = model_of(1);
  {
    const FileSizeLimit limit(12000);
    ACC_EXPECT_ERROR(acc_save_model(acc, model, dir.c_str(), "20000"), ACC_ERR_IO, "File too large");
  }
  EXPECT_FALSE(fs::exists(dir));
  acc_model_free(model);
  acc_accelerator_free(acc);
}

TEST(FullDisk, ATorchScriptSaveFailsWithTheReasonAndKeepsTheEarlierFile) {
  // libtorch's archive writer threw again from its destructor after a failed write: the process ended.
  const std::string path = acc_test::temp_path("full_disk_model.pt");
  acc_model* earlier = model_of(1);
  ACC_ASSERT_OK(acc_model_save_torchscript(earlier, path.c_str()));
  acc_model* later = model_of(2);
  {
    const FileSizeLimit limit(4096);
    ACC_EXPECT_ERROR(acc_model_save_torchscript(later, path.c_str()), ACC_ERR_IO, "File too large");
    EXPECT_NE(std::string(acc_last_error_message()).find("full_disk_model.pt"), std::string::npos);
  }
  EXPECT_TRUE(acc_test::temporaries_of(path).empty());
  acc_model* loaded = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript(path.c_str(), &loaded));
  EXPECT_EQ(acc_test::parameter_values(loaded), std::set<float>{1});
  acc_model_free(loaded);
  ACC_ASSERT_OK(acc_model_save_torchscript(later, path.c_str()));  // with room again
  acc_model_free(earlier);
  acc_model_free(later);
}

TEST(FullDisk, AShardedSaveThatFailsLeavesNoShardsBehind) {
  // The shards written before the failure stayed in the staging folder, filling the disk further.
  const std::string dir = acc_test::temp_path("full_disk_sharded");
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "true"}});
  acc_model* earlier = model_of(1);
  ACC_ASSERT_OK(acc_save_model(acc, earlier, dir.c_str(), "20000"));
  const std::set<std::string> saved = files_in(dir);
  acc_model* later = model_of(2);
  {
    const FileSizeLimit limit(12000);  // each 16.6 kB shard is too large
    ACC_EXPECT_ERROR(acc_save_model(acc, later, dir.c_str(), "20000"), ACC_ERR_IO, "File too large");
  }
  EXPECT_EQ(files_in(dir), saved);
  EXPECT_EQ(values_in_folder(dir), std::set<float>{1});
  acc_model_free(earlier);
  acc_model_free(later);
  acc_accelerator_free(acc);
}

TEST(FullDisk, ATensorBoardRunThatFailedToWriteEndsAndTheNextRunStarts) {
  // The run's end record was written before its file was closed: once the writer had failed, that
  // threw, the file stayed open, and every later acc_init_trackers failed with the old message.
  const std::string dir = acc_test::temp_path("full_disk_tb");
  acc_accelerator* acc =
      acc_test::make_accelerator({{"cpu", "true"}, {"log_with", "tensorboard"}, {"project_dir", dir}});
  ACC_ASSERT_OK(acc_init_trackers(acc, "run1", R"({"lr": 0.001})"));
  acc_status failure = ACC_OK;
  {
    const FileSizeLimit limit(1024);
    for (int step = 0; step < 2000 && failure == ACC_OK; ++step)
      failure = acc_log_scalar(acc, "loss", 1.0 / (step + 1), step);
    if (failure == ACC_OK) failure = acc_end_training(acc);
  }
  EXPECT_EQ(failure, ACC_ERR_IO) << acc_last_error_message();
  EXPECT_NE(std::string(acc_last_error_message()).find("events.out.tfevents"), std::string::npos)
      << acc_last_error_message();
  (void)acc_end_training(acc);  // the failed run ends (its error may be reported here once more)
  ACC_ASSERT_OK(acc_init_trackers(acc, "run2", R"({"lr": 0.002})"));
  ACC_ASSERT_OK(acc_log_scalar(acc, "loss", 0.5, 0));
  ACC_ASSERT_OK(acc_end_training(acc));
  char* path = nullptr;
  ACC_ASSERT_OK(acc_tracker_path(acc, "tensorboard", &path));
  EXPECT_EQ(std::string(path).rfind(dir + "/run2/events.out.tfevents.", 0), 0u) << path;
  EXPECT_GT(fs::file_size(path), 0u);
  acc_string_free(path);
  acc_accelerator_free(acc);
}

namespace {

// The file a tracker writes the metric "loss" into: its own file (jsonl, TensorBoard), MLflow's
// metric file or DVCLive's table.
std::string loss_file(const std::string& tracker, acc_accelerator* acc) {
  const std::string path = acc_test::tracker_path(acc, tracker.c_str());
  if (tracker == "mlflow") return path + "/metrics/loss";
  if (tracker == "dvclive") return path + "/plots/metrics/loss.tsv";
  if (tracker == "clearml") return path + "/metrics.jsonl";
  if (tracker == "wandb")  // the run's folder: its log is run-<id>.wandb
    for (const auto& entry : fs::directory_iterator(path))
      if (entry.path().extension() == ".wandb") return entry.path().string();
  return path;
}

// The steps of a tracker's file: metrics.jsonl's lines, the scalar events of a TensorBoard file,
// the third field of an MLflow metric file's lines, the first of a DVCLive table's rows.
std::vector<int64_t> logged_steps(const std::string& tracker, const std::string& path) {
  std::vector<int64_t> steps;
  std::ifstream in(path);
  if (tracker == "jsonl") {
    for (std::string line; std::getline(in, line);) steps.push_back(nlohmann::json::parse(line).at("step"));
  } else if (tracker == "mlflow") {
    int64_t timestamp = 0, step = 0;
    for (double value = 0; in >> timestamp >> value >> step;) steps.push_back(step);
  } else if (tracker == "trackio") {  // the project database, read by Python's sqlite3 as trackio reads it
    const std::string out = path + ".read.json";
    const std::string command =
        std::string("'") + ACC_TEST_PYTHON + "' '" + ACC_TRACKIO_READER + "' '" + path + "' > '" + out + "'";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    const nlohmann::json runs = nlohmann::json::parse(acc_test::read_file(out))["runs"];
    EXPECT_EQ(runs.size(), 1u);
    for (const auto& run : runs)
      for (const auto& row : run["logs"]) steps.push_back(row["step"]);
  } else if (tracker == "clearml") {  // lines of events (JSON arrays), each scalar's iteration
    for (std::string line; std::getline(in, line);)
      for (const auto& event : nlohmann::json::parse(line)) steps.push_back(event.at("iter"));
  } else if (tracker == "wandb") {  // each step's history, read as wandb's readers take the log
    for (const auto& record : acc_test::read_wandb_log(path))
      if (record["type"] == "history") steps.push_back(record["step"]);
  } else if (tracker == "dvclive") {
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, "step\tloss") << "the table's header";
    while (std::getline(in, line)) steps.push_back(std::stoll(line.substr(0, line.find('\t'))));
  } else {
    for (const auto& event : acc_test::read_event_file(path))
      if (event.has_summary) steps.push_back(event.step);
  }
  return steps;
}

}  // namespace

TEST(FullDisk, FileTrackersGoOnOnceTheDiskHasRoomAgain) {
  // After one failed write a jsonl or TensorBoard run wrote nothing more, room or not, and what
  // had been accepted before was lost (the csv tracker's table rewrites stop at an error, by design).
  // Where the cut back to the last whole record failed too, the records written again followed the
  // fragment the failed write left: a torn line or event (a hunt's finding).
  // MLflow's and DVCLive's files stopped at the first error the same way (a hunt's finding), and so
  // did trackio's database (whose refused transactions leave nothing to cut back), W&B's log and
  // ClearML's events.
  const acc_test::ScopedEnv uri("MLFLOW_TRACKING_URI", nullptr);
  for (const bool cut_fails : {false, true})
    for (const std::string tracker : {"jsonl", "tensorboard", "mlflow", "dvclive", "trackio", "wandb", "clearml"}) {
      if (tracker == "trackio" && cut_fails) continue;
      SCOPED_TRACE(tracker + (cut_fails ? ", its cut back refused too" : ""));
      const std::string dir = acc_test::fresh_dir("full_disk_" + tracker);
      const acc_test::ScopedEnv trackio_dir("TRACKIO_DIR", dir.c_str()), wandb_mode("WANDB_MODE", "offline"),
          wandb_dir("WANDB_DIR", dir.c_str()), clearml_cache("CLEARML_CACHE_DIR", dir.c_str()),
          clearml_offline("CLEARML_OFFLINE_MODE", "1");
      acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", tracker}, {"project_dir", dir}});
      // (DVCLive's folder is its dir, by default in the working folder)
      const std::string kwargs =
          nlohmann::json{{"dvclive", {{"save_dvc_exp", false}, {"dvcyaml", nullptr}, {"dir", dir + "/dvclive"}}}}
              .dump();
      ACC_ASSERT_OK(acc_init_trackers_ex(acc, "run", nullptr, tracker == "dvclive" ? kwargs.c_str() : nullptr));
      const std::string path = loss_file(tracker, acc);
      std::vector<int64_t> accepted;
      int64_t step = 0;
      int refused = 0;
      {
        const FileSizeLimit limit((fs::exists(path) ? fs::file_size(path) : 0) + 2048);
        if (cut_fails) ftruncate_failure = EPERM;
        // Until the writer has met the limit and said so, and a while after (the disk still full).
        for (int waited = 0; refused < 3 && waited < 2000; ++step) {
          if (acc_log_scalar(acc, "loss", 1.0 / (step + 1), step) == ACC_OK) {
            accepted.push_back(step);
          } else {
            const std::string message = acc_last_error_message();
            const char* why = cut_fails ? "ends in part of a" : tracker == "trackio" ? "rows kept" : "File too large";
            EXPECT_NE(message.find(why), std::string::npos) << message;
            ++refused;
          }
          if (step % 64 == 63) std::this_thread::sleep_for(std::chrono::milliseconds(5)), ++waited;
        }
        ftruncate_failure = 0;
      }
      ASSERT_EQ(refused, 3) << "the writer never met the limit";
      for (int more = 0; more < 10; ++more, ++step) {
        ACC_ASSERT_OK(acc_log_scalar(acc, "loss", 0.5, step));
        accepted.push_back(step);
      }
      ACC_ASSERT_OK(acc_end_training(acc));              // everything accepted is on disk now
      EXPECT_EQ(logged_steps(tracker, path), accepted);  // each once, in order, none of the refused calls'
      acc_accelerator_free(acc);
    }
}

TEST(FullDisk, AnImageTheDiskRefusesLeavesNoPartOfItsFile) {
  // trackio's and W&B's image files were written in place: a full disk left a cut PNG (a hunt's finding).
  for (const std::string tracker : {"trackio", "wandb"}) {
    SCOPED_TRACE(tracker);
    const std::string dir = acc_test::fresh_dir("full_disk_images_" + tracker);
    const acc_test::ScopedEnv trackio_dir("TRACKIO_DIR", dir.c_str()), mode("WANDB_MODE", "offline"),
        wandb_dir("WANDB_DIR", dir.c_str());
    acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "true"}, {"log_with", tracker}, {"project_dir", dir}});
    ACC_ASSERT_OK(acc_init_trackers(acc, "pics", nullptr));
    std::vector<float> noise(3 * 64 * 64);
    std::mt19937 generator(7);
    for (float& value : noise) value = static_cast<float>(generator() % 256) / 255.0f;  // incompressible
    acc_tensor* image = acc_test::floats(noise, {1, 3, 64, 64});  // a PNG of some 12 kB
    const char* names[] = {"noise"};
    acc_status status = ACC_OK;
    {
      const FileSizeLimit limit(4096);
      status = acc_log_images(acc, names, &image, 1, 0, nullptr);
      if (status == ACC_OK) status = acc_end_training(acc);
    }
    EXPECT_EQ(status, ACC_ERR_IO) << acc_last_error_message();
    (void)acc_end_training(acc);
    for (const auto& entry : fs::recursive_directory_iterator(dir))
      EXPECT_EQ(entry.path().string().find(".png"), std::string::npos) << entry.path();
    acc_tensor_free(image);
    acc_accelerator_free(acc);
  }
}

TEST(SavePaths, ASaveThroughASymbolicLinkWritesTheFileItLeadsTo) {
  // The temporary file was renamed over the link: the link became a file, its target stayed old.
  const std::string target = acc_test::temp_path("link_target.safetensors"),
                    link = acc_test::temp_path("link.safetensors");
  acc_tensor_list* list = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&list));
  acc_tensor* t = acc_test::floats({1, 2, 3}, {3});
  ACC_ASSERT_OK(acc_tensor_list_append(list, "t", t));
  ACC_ASSERT_OK(acc_tensor_list_save_safetensors(list, target.c_str()));
  fs::create_symlink("link_target.safetensors", link);  // relative, as `ln -s` makes them
  acc_tensor* u = acc_test::floats({4, 5, 6}, {3});
  acc_tensor_list* other = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_create(&other));
  ACC_ASSERT_OK(acc_tensor_list_append(other, "t", u));
  ACC_ASSERT_OK(acc_tensor_list_save_safetensors(other, link.c_str()));
  EXPECT_TRUE(fs::is_symlink(link));
  acc_tensor_list* read = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_load_safetensors(target.c_str(), &read));
  acc_tensor* r = nullptr;
  ACC_ASSERT_OK(acc_tensor_list_get(read, 0, &r));
  EXPECT_EQ(acc_test::to_floats(r), (std::vector<float>{4, 5, 6}));
  for (acc_tensor* x : {t, u, r}) acc_tensor_free(x);
  for (acc_tensor_list* l : {list, other, read}) acc_tensor_list_free(l);
}

TEST(SavePaths, ASaveOverSomethingThatIsNotAFileIsRefusedAndLeavesIt) {
  // The temporary file was renamed over it: a FIFO (or a device node: /dev/null as root) became a file.
  const std::string fifo = acc_test::temp_path("a_fifo.pt");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  acc_model* model = model_of(1);
  ACC_EXPECT_ERROR(acc_model_save_torchscript(model, fifo.c_str()), ACC_ERR_IO, "not a regular file");
  acc_tensor_list* list = nullptr;
  ACC_ASSERT_OK(acc_model_state_dict(model, &list));
  ACC_EXPECT_ERROR(acc_tensor_list_save_safetensors(list, fifo.c_str()), ACC_ERR_IO, "not a regular file");
  EXPECT_TRUE(fs::is_fifo(fifo));
  acc_tensor_list_free(list);
  acc_model_free(model);
}

TEST(SavePaths, AFolderThatCannotHoldTheFileIsNamedByTheCallersPath) {
  // The message named the temporary file ("m.pt.tmp96a5c6046dfe"), a path the caller never gave.
  const std::string file = acc_test::temp_path("plain_file");
  std::ofstream(file) << "x";
  acc_model* model = model_of(1);
  acc_tensor_list* list = nullptr;
  ACC_ASSERT_OK(acc_model_state_dict(model, &list));
  for (const std::string& path : {file + "/m.pt", acc_test::temp_path("missing_folder/m.pt")}) {
    for (int save = 0; save < 2; ++save) {
      const acc_status status = save == 0 ? acc_model_save_torchscript(model, path.c_str())
                                          : acc_tensor_list_save_safetensors(list, path.c_str());
      EXPECT_EQ(status, ACC_ERR_IO);
      const std::string message = acc_last_error_message();
      EXPECT_NE(message.find("cannot write '" + path + "': "), std::string::npos) << message;
      EXPECT_EQ(message.find(".tmp"), std::string::npos) << message;
      // A file where the folder should be is said so (as root, access() said "Permission denied").
      if (path.rfind(file, 0) == 0) EXPECT_NE(message.find("is a file, not a folder"), std::string::npos) << message;
    }
  }
  acc_tensor_list_free(list);
  acc_model_free(model);
}

TEST(SavePaths, ACheckpointFolderWithTheLongestNameSavesAndLoads) {
  // Its staging folder, ".<name>.incomplete", was longer than a file name may be.
  const std::string parent = acc_test::temp_path("long_names");
  fs::create_directories(parent);
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "true"}});
  acc_model* model = model_of(1);
  acc_model* prepared = nullptr;
  ACC_ASSERT_OK(acc_prepare_model(acc, model, ACC_PLACEMENT_DEFAULT, &prepared));
  for (const size_t length : {250, 255}) {
    const std::string dir = parent + "/" + std::string(length, 'c');
    ACC_ASSERT_OK(acc_save_state(acc, dir.c_str(), nullptr));
    ACC_ASSERT_OK(acc_save_state(acc, dir.c_str(), nullptr));  // replacing it
    ACC_ASSERT_OK(acc_load_state(acc, dir.c_str(), nullptr));
  }
  EXPECT_EQ(files_in(parent).size(), 2u);  // nothing left beside them
  acc_model_free(prepared);
  acc_model_free(model);
  acc_accelerator_free(acc);
}

namespace {

// The TorchScript file and the safetensors weights saved from model_of(value) both load, with its values.
void expect_saved_model_of(float value, const std::string& script, const std::string& weights) {
  acc_model* loaded = nullptr;
  ACC_ASSERT_OK(acc_model_load_torchscript(script.c_str(), &loaded));
  EXPECT_EQ(acc_test::parameter_values(loaded), std::set<float>{value});
  acc_model_free(loaded);
  acc_model* read = acc_test::spec_model(kSpec);
  ACC_ASSERT_OK(acc_model_load_safetensors(read, weights.c_str(), 1, nullptr, nullptr));
  EXPECT_EQ(acc_test::parameter_values(read), std::set<float>{value});
  acc_model_free(read);
}

}  // namespace

TEST(SavePaths, FilesWithTheLongestNamesSaveAndLoad) {
  // Their temporaries, "<name>.tmp" and 12 digits, are longer than a file name may be: they are cut.
  const std::string parent = acc_test::temp_path("long_file_names");
  fs::create_directories(parent);
  acc_model* model = model_of(3);
  acc_tensor_list* list = nullptr;
  ACC_ASSERT_OK(acc_model_state_dict(model, &list));
  for (const size_t length : {251, 252, 255}) {
    SCOPED_TRACE(length);
    const std::string script = parent + "/" + std::string(length - 3, 's') + ".pt";
    const std::string weights = parent + "/" + std::string(length - 12, 'w') + ".safetensors";
    for (int round = 0; round < 2; ++round) {  // writing, then replacing
      ACC_ASSERT_OK(acc_model_save_torchscript(model, script.c_str()));
      ACC_ASSERT_OK(acc_tensor_list_save_safetensors(list, weights.c_str()));
    }
    expect_saved_model_of(3, script, weights);
  }
  EXPECT_EQ(files_in(parent).size(), 6u);  // no temporary left beside them
  acc_tensor_list_free(list);
  acc_model_free(model);
}

TEST(SavePaths, WritersOfOneFileAtOnceEachSaveWhole) {
  // Every rank saving the same model to one path (the example's --save did): each write's temporary
  // was "<name>.tmp", so one writer renamed the other's away ("No such file or directory") or two
  // wrote one temporary at once.
  const std::string parent = acc_test::temp_path("one_file_many_writers");
  fs::create_directories(parent);
  const std::string script = parent + "/model.pt", weights = parent + "/model.safetensors";
  acc_model* model = model_of(4);
  acc_tensor_list* list = nullptr;
  ACC_ASSERT_OK(acc_model_state_dict(model, &list));
  std::atomic<int> failures{0};
  std::string first_failure;
  std::mutex mutex;
  auto writer = [&] {
    for (int i = 0; i < 60; ++i)
      for (const bool torchscript : {true, false}) {
        const acc_status status = torchscript ? acc_model_save_torchscript(model, script.c_str())
                                              : acc_tensor_list_save_safetensors(list, weights.c_str());
        if (status == ACC_OK) continue;
        std::lock_guard<std::mutex> lock(mutex);
        if (failures++ == 0) first_failure = acc_last_error_message();
      }
  };
  std::thread a(writer), b(writer);
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0) << first_failure;
  expect_saved_model_of(4, script, weights);
  EXPECT_EQ(files_in(parent).size(), 2u);  // no temporary left beside them
  acc_tensor_list_free(list);
  acc_model_free(model);
}

// Under an address-space limit (ulimit -v): run in a process of its own (the limit is the whole
// process's), spawned from this test binary.
namespace {

const char* const kChildVariable = "ACC_TEST_ADDRESS_LIMIT_FILE";

// The process's address space in use now, in bytes.
rlim_t address_space_in_use() {
  std::ifstream statm("/proc/self/statm");
  rlim_t pages = 0;
  statm >> pages;
  return pages * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

// Not a test by itself: the limited process of the test below.
TEST(AddressLimitChild, RunsUnderTheLimit) {
  const char* file = std::getenv(kChildVariable);
  if (!file) GTEST_SKIP() << "runs as the child of AddressLimit tests";
  rlimit limit{};
  ::getrlimit(RLIMIT_AS, &limit);
  limit.rlim_cur = address_space_in_use() + (rlim_t{512} << 20);
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &limit), 0);
  // The first handles: their cells' address space was reserved 4 GiB at a time.
  acc_options* options = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &options));
  acc_options_free(options);
  // A mapping larger than the limit: out of memory, not a file the library cannot read.
  const int64_t dims[] = {int64_t{1} << 28};  // 1 GiB of floats
  acc_tensor* mapped = nullptr;
  ACC_EXPECT_ERROR(acc_tensor_from_file_mmap(file, 0, ACC_DTYPE_FLOAT32, dims, 1, &mapped), ACC_ERR_OUT_OF_MEMORY,
                   "cannot map");
}

TEST(AddressLimit, HandlesWorkAndAMappingPastTheLimitIsOutOfMemory) {
  if (ACC_TEST_UNDER_ASAN) GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space";
  // A sparse file of 1 GiB: it takes no disk.
  const std::string file = acc_test::temp_path("sparse_1gib.bin");
  const int fd = ::open(file.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{1} << 30), 0);
  ::close(fd);
  const int status = acc_test::run_self("AddressLimitChild.*", {std::string(kChildVariable) + "=" + file});
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the limited process failed (status " << status << ")";
}

// A merge that fails on a later layer leaves every layer as it was, the earlier ones included, and
// the adapters in place; so does merging by name. BOFT's merge of a layer of 8192 inputs over two
// butterfly factors makes dense 8192 x 8192 rotations (256 MiB each), which a process limited to
// 128 MiB more than it holds cannot allocate.
namespace {

const char* const kMergeChildVariable = "ACC_TEST_MERGE_UNDER_LIMIT";

std::vector<float> parameter_values(const acc_model* m, const char* name) {
  acc_tensor* p = nullptr;
  EXPECT_EQ(acc_model_parameter(m, name, &p), ACC_OK) << name;
  std::vector<float> values = acc_test::to_floats(p);
  acc_tensor_free(p);
  return values;
}

}  // namespace

// Not a test by itself: the limited process of the test below.
TEST(MergeUnderLimitChild, FailsAndChangesNothing) {
  if (!std::getenv(kMergeChildVariable)) GTEST_SKIP() << "runs as the child of MergeUnderLimit";
  acc_model* m = nullptr;
  ACC_ASSERT_OK(acc_model_from_spec(R"([{"type":"linear","in_features":16,"out_features":1,"bias":false},
      {"type":"linear","in_features":8192,"out_features":1,"bias":false}])",
                                    &m));
  acc_options* o = nullptr;
  ACC_ASSERT_OK(acc_options_create(ACC_OPTIONS_BOFT, &o));
  ACC_ASSERT_OK(acc_options_set_int(o, "boft_block_size", 2));
  ACC_ASSERT_OK(acc_options_set_int(o, "boft_n_butterfly_factor", 2));
  ACC_ASSERT_OK(acc_options_set_bool(o, "init_weights", 0));
  ACC_ASSERT_OK(acc_model_add_boft(m, "0,1", o, nullptr));
  acc_options_free(o);
  const auto before = parameter_values(m, "0.weight");
  rlimit limit{};
  ::getrlimit(RLIMIT_AS, &limit);
  const rlimit unlimited = limit;
  limit.rlim_cur = address_space_in_use() + (rlim_t{128} << 20);
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &limit), 0);
  const acc_status merged = acc_model_merge_lora(m);
  const char* names[] = {"default"};
  const acc_status merged_by_name = acc_model_merge_lora_adapters(m, names, 1);
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &unlimited), 0);
  EXPECT_EQ(merged, ACC_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(merged_by_name, ACC_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(parameter_values(m, "0.weight"), before);
  size_t n = 0;
  ACC_ASSERT_OK(acc_model_lora_count(m, &n));
  EXPECT_EQ(n, 2u);
  acc_model_free(m);
}

TEST(MergeUnderLimit, AFailedMergeChangesNothing) {
  if (ACC_TEST_UNDER_ASAN) GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space";
  const int status = acc_test::run_self("MergeUnderLimitChild.*", {std::string(kMergeChildVariable) + "=1"});
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the limited process failed (status " << status << ")";
}

namespace {

// Rewrites `path` as `cp` does (truncated, then written again) in a loop until `stop`.
void rewrite_in_place_until(const std::string& path, const std::string& content, const std::atomic<bool>& stop) {
  while (!stop) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) continue;
    for (size_t done = 0; done < content.size();) {
      const ssize_t wrote = ::write(fd, content.data() + done, std::min<size_t>(4096, content.size() - done));
      if (wrote <= 0) break;
      done += static_cast<size_t>(wrote);
    }
    ::close(fd);
  }
}

// Runs `load` (which returns an acc_status) 200 times in a forked child while a thread of the child
// rewrites `path` in place: how the child ended ("" for a normal end, else the signal's name).
template <typename Load>
std::string loads_while_rewritten(const std::string& path, Load load) {
  const std::string content = acc_test::read_file(path);
  const pid_t child = ::fork();
  if (child == 0) {
    ::alarm(120);
    std::atomic<bool> stop{false};
    std::thread writer([&] { rewrite_in_place_until(path, content, stop); });
    int unexpected = 0;
    for (int i = 0; i < 200; ++i) {
      const acc_status status = load();
      if (status != ACC_OK && status != ACC_ERR_IO) ++unexpected;  // (IO: the file was caught mid-write)
    }
    stop = true;
    writer.join();
    ::_exit(unexpected == 0 ? 0 : 3);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  if (WIFSIGNALED(status)) return strsignal(WTERMSIG(status));
  return WEXITSTATUS(status) == 0 ? "" : "a status other than ACC_OK or ACC_ERR_IO";
}

}  // namespace

// A safetensors or TorchScript file rewritten while it is loaded (`cp` over it, another job's save)
// is an error or the file as it was read, never the end of the process (found by a hunt: the files
// were mapped, and the pages a rewrite had cut off killed the process with SIGBUS).
TEST(ChangingFiles, AFileRewrittenWhileItLoadsIsNoCrash) {
  const std::string dir = acc_test::fresh_dir("changing_files");
  fs::create_directories(dir);
  acc_model* model = model_of(0.5f);
  acc_tensor_list* state = nullptr;
  ACC_ASSERT_OK(acc_model_state_dict(model, &state));
  const std::string tensors = dir + "/tensors.safetensors", script = dir + "/model.pt";
  ACC_ASSERT_OK(acc_tensor_list_save_safetensors(state, tensors.c_str()));
  acc_tensor_list_free(state);
  acc_model_free(model);
  EXPECT_EQ(loads_while_rewritten(tensors,
                                  [&] {
                                    acc_tensor_list* list = nullptr;
                                    const acc_status s = acc_tensor_list_load_safetensors(tensors.c_str(), &list);
                                    acc_tensor_list_free(list);
                                    return s;
                                  }),
            "");
  if (acc_test::data_dir().empty()) GTEST_SKIP() << "ACC_TEST_DATA is not set (the TorchScript half)";
  std::filesystem::copy_file(acc_test::data_dir() + "/classifier.pt", script);
  EXPECT_EQ(loads_while_rewritten(script,
                                  [&] {
                                    acc_model* m = nullptr;
                                    const acc_status s = acc_model_load_torchscript(script.c_str(), &m);
                                    acc_model_free(m);
                                    return s;
                                  }),
            "");
}

namespace {

// A registered object whose load, run while acc_load_state applies the checkpoint, spoils the
// checkpoint's weights file as another process could: cut short, or its bytes overwritten.
struct Spoiler {
  std::string file;
  bool cut = false;
  static int save(void*, acc_bytes* out) { return acc_bytes_append(out, "x", 1) == ACC_OK ? 0 : 1; }
  static int load(void* self, const void*, size_t) {
    const auto& s = *static_cast<Spoiler*>(self);
    if (s.cut) return ::truncate(s.file.c_str(), 64) == 0 ? 0 : 1;
    const int fd = ::open(s.file.c_str(), O_WRONLY | O_CLOEXEC);
    const std::string junk(4096, 'A');
    const bool done =
        fd >= 0 && ::pwrite(fd, junk.data(), junk.size(), static_cast<off_t>(fs::file_size(s.file) - junk.size())) ==
                       static_cast<ssize_t>(junk.size());
    if (fd >= 0) ::close(fd);
    return done ? 0 : 1;
  }
};

}  // namespace

// acc_load_state applies what it checked (found by a hunt: the weights were read from the file again
// when applied, after their checksum had been checked: overwritten bytes were loaded as weights
// with ACC_OK, and a file cut short killed the process with SIGBUS).
TEST(ChangingFiles, ALoadAppliesTheCheckpointItChecked) {
  const std::string dir = acc_test::fresh_dir("changing_checkpoint") + "/checkpoint";
  acc_accelerator* acc = acc_test::make_accelerator({{"cpu", "true"}});
  acc_model* model = model_of(1.0f);
  ACC_ASSERT_OK(acc_prepare(acc, &model, nullptr, nullptr, nullptr));
  Spoiler spoiler{dir + "/model.safetensors"};
  ACC_ASSERT_OK(acc_register_for_checkpointing(acc, &Spoiler::save, &Spoiler::load, &spoiler, nullptr));
  for (const bool cut : {false, true}) {
    SCOPED_TRACE(cut ? "cut short" : "overwritten");
    ACC_ASSERT_OK(acc_save_state(acc, dir.c_str(), nullptr));
    acc_test::fill_state(model, 2.0f);
    spoiler.cut = cut;
    const pid_t child = ::fork();  // (a SIGBUS would end the test program)
    if (child == 0) {
      ::alarm(60);
      if (acc_load_state(acc, dir.c_str(), nullptr) != ACC_OK) ::_exit(3);
      ::_exit(acc_test::parameter_values(model) == std::set<float>{1.0f} ? 0 : 4);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << "the load ended by " << strsignal(WTERMSIG(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "3: the load failed; 4: the weights are not those saved";
    acc_test::fill_state(model, 1.0f);
  }
  acc_model_free(model);
  acc_accelerator_free(acc);
}
