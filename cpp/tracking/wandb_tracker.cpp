#include "tracking/wandb_tracker.h"

#include <cstdio>
#include <limits>

#include "common/error.h"
#include "common/files.h"
#include "common/utf8.h"
#include "tracking/init_kwargs.h"
#include "tracking/wandb_run.h"
#include "tracking/wandb_values.h"

namespace acc::tracking {

WandbTracker::~WandbTracker() {
  try {
    finish();
  } catch (...) {
  }
}

void WandbTracker::set_init_kwargs(const nlohmann::json& kwargs) { settings_ = wandb::run_settings(kwargs); }

void WandbTracker::check_log_kwargs(const nlohmann::json& kwargs, Logged) const {
  InitKwargs k("wandb", kwargs, "log_kwargs");
  k.boolean("commit");
  k.refuse_the_rest();
}

void WandbTracker::check_project_name(const std::string& project_name) const { wandb::check_project(project_name); }

void WandbTracker::check_name(const std::string& name) const {
  for (const std::string own : {"_step", "_runtime", "_timestamp", "_wandb"})
    require(name != own && name.rfind(own + "/", 0) != 0, "wandb: \"", printable_utf8(name), "\" is ",
            name == own ? "a key" : "under a key", " W&B writes itself; log the value under another name");
}

void WandbTracker::check_image_name(const std::string& name) const {
  // The longest step and digest a file name can get (the step: wandb's count, at most 19 digits).
  const std::string path =
      wandb::media_path("", name, std::numeric_limits<int64_t>::max(), std::string(64, '0'), ".png");
  for (const auto& part : path_parts(path))
    require(part.size() <= kFileNameMax, "wandb: the image name \"", printable_utf8(name), "\" makes a media file ",
            "name with a part longer than ", kFileNameMax, " bytes");
}

void WandbTracker::check_histogram(const Histogram& histogram) const {
  const size_t bins = numpy_histogram(histogram).counts.size();
  require(bins <= 512, "wandb: the histogram has ", bins, " bins, and wandb.Histogram keeps at most 512: give ",
          "acc_log_histogram max_bins (512 or fewer) or a bin count");
}

void WandbTracker::start(const std::string& project_name, const nlohmann::json& config) {
  finish();
  folder_.clear();
  const wandb::RunSettings settings = settings_ ? *settings_ : wandb::run_settings(nullptr);
  if (settings.mode == wandb::Mode::Disabled) return;  // as wandb: every call a no-op, nothing written
  auto run = std::make_shared<wandb::OfflineRun>(settings, project_name, config);
  std::fprintf(stderr, "accelerate: wandb: the run %s is written offline to %s%s; upload it with `wandb sync %s`\n",
               run->run_id().c_str(), run->folder().c_str(),
               settings.mode_chosen ? "" : " (no mode was given, and uploading while training is not built)",
               run->folder().c_str());
  // The run keeps what the disk refused: it goes on once the disk has room.
  writer_ = std::make_unique<AsyncFile>(
      AsyncFile::TasksOwnFiles{}, run->log_path(), [run] { run->write_out(); }, AsyncFile::AfterAnError::Retry);
  folder_ = run->folder();
  run_ = std::move(run);
}

void WandbTracker::log(const std::shared_ptr<const Record>& record) {
  if (!writer_) return;  // mode "disabled"
  writer_->post([record, run = run_](std::FILE*&, const std::string&) { run->log(*record); });
}

void WandbTracker::finish() {
  if (!writer_) return;
  std::unique_ptr<AsyncFile> writer = std::move(writer_);
  writer->post([run = std::move(run_)](std::FILE*&, const std::string&) { run->finish(); });
  writer->close();
}

}  // namespace acc::tracking
