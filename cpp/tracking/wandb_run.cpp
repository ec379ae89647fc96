#include "tracking/wandb_run.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>

#include "common/environment.h"
#include "common/error.h"
#include "common/files.h"
#include "common/sha256.h"
#include "common/utf8.h"
#include "common/version.h"
#include "tracking/async_file.h"
#include "tracking/proto/wandb_record.pb.h"
#include "tracking/wandb_log.h"
#include "tracking/wandb_values.h"

namespace acc::tracking::wandb {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxImages = 108;  // wandb.Image's MAX_ITEMS: a list keeps its first 108

std::string local_time_stamp(std::time_t t) {
  std::tm local{};
  localtime_r(&t, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d_%H%M%S", &local);
  return text;
}

// wandb's folder: <root>/wandb, or <root>/.wandb where that exists.
std::string wandb_folder(const std::string& root) {
  const fs::path base = fs::absolute(root.empty() ? fs::path(".") : fs::path(root)).lexically_normal();
  std::error_code ec;
  if (fs::is_directory(base / ".wandb", ec)) return (base / ".wandb").string();
  return (base / "wandb").string();
}

// As wandb: a link made beside, then renamed over the old one; a failure only costs the link.
void point_latest_run(const std::string& wandb_dir, const std::string& run_folder_name) {
  const std::string link = wandb_dir + "/latest-run";
  const std::string temporary = link + "." + std::to_string(::getpid());
  ::unlink(temporary.c_str());
  if (::symlink(run_folder_name.c_str(), temporary.c_str()) != 0) return;
  if (::rename(temporary.c_str(), link.c_str()) != 0) ::unlink(temporary.c_str());
}

void set_items(google::protobuf::RepeatedPtrField<wandbpb::Item>* items, const std::vector<Leaf>& leaves) {
  for (const auto& leaf : leaves) {
    wandbpb::Item* item = items->Add();
    for (const auto& key : leaf.path) item->add_nested_key(key);
    item->set_value_json(leaf.value_json);
  }
}

void add_config_items(google::protobuf::RepeatedPtrField<wandbpb::Item>* items, const nlohmann::ordered_json& config) {
  for (const auto& entry : config.items()) {
    wandbpb::Item* item = items->Add();
    item->set_key(entry.key());
    item->set_value_json(value_json(entry.value()));
  }
}

// The run as wandb.init's client describes it (what `wandb sync` creates the run from).
wandbpb::Record run_record(const RunSettings& settings, const std::string& run_id, const std::string& project,
                           std::chrono::system_clock::time_point start) {
  wandbpb::Record record;
  wandbpb::RunRecord* run = record.mutable_run();
  run->set_run_id(run_id);
  run->set_entity(settings.entity);
  run->set_project(project);
  wandbpb::Item* internal = run->mutable_config()->add_update();  // what wandb keeps for itself
  internal->set_key("_wandb");
  internal->set_value_json("{}");
  add_config_items(run->mutable_config()->mutable_update(), settings.config);
  run->set_run_group(settings.run_group);
  run->set_job_type(settings.job_type);
  run->set_display_name(settings.display_name);
  run->set_notes(settings.notes);
  for (const auto& tag : settings.tags) run->add_tags(tag);
  run->set_host(host_name());
  const auto since_epoch = std::chrono::duration_cast<std::chrono::microseconds>(start.time_since_epoch()).count();
  run->mutable_start_time()->set_seconds(since_epoch / 1000000);
  run->mutable_start_time()->set_nanos(static_cast<int32_t>(since_epoch % 1000000 * 1000));
  run->mutable_info()->set_stream_id(run_id);
  record.mutable_info()->set_stream_id(run_id);
  return record;
}

// Creates `path` (never replacing a file: two runs must not share a log) with `bytes`.
void create_exclusively(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
  if (fd < 0)
    fail(Status::Io, "wandb: cannot create the run's log ", path, ": ", std::strerror(errno),
         errno == EEXIST ? " (a run with this id started in the same second)" : "");
  if (const int error = write_fully(fd, bytes.data(), bytes.size())) {
    ::close(fd);
    fail(Status::Io, "wandb: cannot write the run's log ", path, ": ", std::strerror(error));
  }
  if (::close(fd) != 0) fail(Status::Io, "wandb: cannot write the run's log ", path, ": ", std::strerror(errno));
}

}  // namespace

OfflineRun::OfflineRun(const RunSettings& settings, const std::string& project, const nlohmann::json& config)
    : run_id_(settings.run_id.empty() ? new_run_id() : settings.run_id), started_(std::chrono::steady_clock::now()) {
  const auto wall = std::chrono::system_clock::now();
  const std::string wandb_dir = wandb_folder(settings.root_dir);
  const std::string folder_name =
      "offline-run-" + local_time_stamp(std::chrono::system_clock::to_time_t(wall)) + "-" + run_id_;
  folder_ = wandb_dir + "/" + folder_name;
  make_folders(folder_ + "/files", "the W&B run's folder");
  make_folders(folder_ + "/logs", "the W&B run's folder");
  make_folders(folder_ + "/tmp/code", "the W&B run's folder");
  log_path_ = folder_ + "/run-" + run_id_ + ".wandb";

  wandbpb::Record header;
  header.mutable_header()->mutable_version_info()->set_producer(std::string("accelerate-cpp ") + kVersionString);
  header.mutable_header()->mutable_version_info()->set_min_consumer("0.70.0");
  write(header);
  wandbpb::Record run = run_record(settings, run_id_, project, wall);
  write(run);
  if (!config.empty()) {  // Accelerate's store_init_configuration: wandb.config.update(config)
    wandbpb::Record update;
    add_config_items(update.mutable_config()->mutable_update(),
                     config_update(nlohmann::ordered_json::parse(config.dump())));
    write(update);
  }
  std::string bytes = log_header();
  for (const std::string& record : waiting_) bytes += framed_record(record, bytes.size());
  create_exclusively(log_path_, bytes);
  size_ = bytes.size();
  waiting_.clear();
  waiting_bytes_ = 0;
  point_latest_run(wandb_dir, folder_name);
}

OfflineRun::~OfflineRun() {
  if (fd_ >= 0) ::close(fd_);
}

bool OfflineRun::spent() const {
  if (steps_spent_)
    std::fprintf(stderr,
                 "accelerate: wandb: the steps are spent (the last one, %lld, is written): this data will be "
                 "ignored.\n",
                 static_cast<long long>(step_));
  return steps_spent_;
}

double OfflineRun::runtime() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

void OfflineRun::write(wandbpb::Record& record) {
  record.set_num(++records_);
  std::string bytes = record.SerializeAsString();
  if (waiting_bytes_ + bytes.size() > kMaxWaitingBytes) {
    ++dropped_;
    return;
  }
  waiting_bytes_ += bytes.size();
  waiting_.push_back(std::move(bytes));
}

void OfflineRun::write_out() {
  std::string error;
  if (fd_ < 0) fd_ = ::open(log_path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) {
    error = concat("wandb: cannot open the run's log ", log_path_, ": ", std::strerror(errno));
  } else {
    // Framed where the file ends: a record's chunks depend on its place in the file's blocks.
    std::string bytes;
    for (const std::string& record : waiting_) bytes += framed_record(record, size_ + bytes.size());
    if (appends_.append(fd_, log_path_, bytes, error)) {
      size_ += bytes.size();
      waiting_.clear();
      waiting_bytes_ = 0;
    } else {
      error = concat("wandb: ", error, " (", waiting_.size(), " records kept, to be written once the disk takes them)");
    }
  }
  if (error.empty()) error = std::exchange(media_error_, std::string());
  if (error.empty()) return;
  media_error_.clear();
  fail(Status::Io, error, lost_so_far(dropped_, "record"));
}

void OfflineRun::write_run_timing() {
  const std::string seconds = std::to_string(static_cast<int64_t>(runtime()));
  wandbpb::Record record;
  set_items(record.mutable_summary()->mutable_update(), {Leaf{{"_wandb", "runtime"}, seconds}});
  wandbpb::Item* item = record.mutable_summary()->add_update();
  item->set_key("_runtime");
  item->set_value_json(seconds);
  write(record);
}

void OfflineRun::write_step(int64_t next) {
  if (pending_.empty()) {
    step_ = next;
    return;
  }
  pending_["_runtime"] = runtime();
  pending_["_step"] = step_;
  const std::vector<Leaf> values = leaves(pending_);
  write_run_timing();
  wandbpb::Record summary;  // without define_metric, each value is its own latest
  set_items(summary.mutable_summary()->mutable_update(), values);
  write(summary);
  wandbpb::Record history;
  set_items(history.mutable_history()->mutable_item(), values);
  history.mutable_history()->mutable_step()->set_num(step_);
  write(history);
  pending_ = nlohmann::ordered_json::object();
  steps_spent_ = step_ == std::numeric_limits<int64_t>::max();
  step_ = next;
}

std::optional<std::string> OfflineRun::add_media_file(const std::string& key, const std::string& png) {
  const std::string path = media_path("media/images", key, step_, sha256_hex(png), ".png");
  const std::string full = folder_ + "/files/" + path;
  try {
    make_folders(fs::path(full).parent_path().string(), "a W&B media folder");
    write_file_atomically(full, png);  // never half a PNG
  } catch (const std::exception& e) {
    if (media_error_.empty()) media_error_ = e.what();
    return std::nullopt;
  }
  wandbpb::Record record;
  record.mutable_files()->add_files()->set_path(path);
  write(record);
  return path;
}

void OfflineRun::log(const tracking::Record& record) {
  const nlohmann::json& kwargs = log_kwargs_of(record, "wandb");
  const nlohmann::json commit = kwargs.is_object() && kwargs.contains("commit") ? kwargs["commit"] : nlohmann::json();
  if (spent()) return;
  if (record.step_given) {
    if (record.step > step_) {
      write_step(record.step);
    } else if (record.step < step_) {
      std::fprintf(stderr,
                   "accelerate: wandb: Tried to log to step %lld that is less than the current step %lld. Steps must "
                   "be monotonically increasing, so this data will be ignored.\n",
                   static_cast<long long>(record.step), static_cast<long long>(step_));
      return;
    }
  }
  if (record.of_images) {
    // Accelerate's log_images logs each name on its own: without a step, each is a step of its own.
    for (size_t i = 0; i < record.images_apart.size() && !spent(); ++i) {
      const auto& images = record.images_apart[i];
      if (images.size() > kMaxImages)
        std::fprintf(stderr, "accelerate: wandb: only %zu images of \"%s\" are logged (of %zu), as wandb keeps them\n",
                     kMaxImages, printable_utf8(record.image_names[i]).c_str(), images.size());
      std::vector<std::string> paths;
      for (size_t j = 0; j < std::min(images.size(), kMaxImages); ++j)
        if (auto path = add_media_file(record.image_names[i], images[j].png)) paths.push_back(std::move(*path));
      if (!paths.empty())
        pending_[record.image_names[i]] = image_list_value(images.front().width, images.front().height, paths);
      pending_["_timestamp"] = record.wall_time;
      if (!record.step_given) write_step(next_step());
    }
    return;
  }
  if (record.of_histogram) {
    pending_[record.histogram_name] = histogram_value(record.histogram);
  } else if (!record.group.empty()) {
    nlohmann::ordered_json& group = pending_[record.group];
    if (!group.is_object()) group = nlohmann::ordered_json::object();
    for (size_t i = 0; i < record.group_names.size(); ++i) group[record.group_names[i]] = record.values[i];
  } else {
    for (size_t i = 0; i < record.names.size(); ++i) pending_[record.names[i]] = record.values[i];
  }
  for (size_t i = 0; i < record.text_names.size(); ++i) pending_[record.text_names[i]] = record.texts[i];
  pending_["_timestamp"] = record.wall_time;
  // wandb's handler writes the step out when the call has no step, unless commit says otherwise.
  const bool ends_step = commit.is_boolean() ? commit.get<bool>() : !record.step_given;
  if (ends_step) write_step(next_step());
}

void OfflineRun::finish() {
  write_run_timing();
  write_step(next_step());
  wandbpb::Record exit;
  exit.mutable_exit()->set_exit_code(0);
  exit.mutable_exit()->set_runtime(static_cast<int32_t>(runtime()));
  exit.mutable_control()->set_always_send(true);
  write(exit);
  wandbpb::Record final_record;  // what `wandb sync --legacy` waits for before it sends the exit
  final_record.mutable_final();
  write(final_record);
}

}  // namespace acc::tracking::wandb
