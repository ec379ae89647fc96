// What the file trackers (csv, jsonl, tensorboard) share: a name, the logging folder, and the file of
// the current run, written by an AsyncFile on a background thread.
#pragma once

#include <memory>
#include <string>

#include "common/error.h"
#include "tracking/async_file.h"
#include "tracking/tracker.h"

namespace acc::tracking {

class FileTracker : public Tracker {
 public:
  FileTracker(std::string name, std::string logging_dir)
      : name_(std::move(name)), logging_dir_(std::move(logging_dir)) {}
  const std::string& name() const override { return name_; }
  std::string path() const override { return path_; }
  // Closes the run's file (everything queued is written first); nothing to do without a run.
  void finish() override {
    if (!file_) return;
    std::unique_ptr<AsyncFile> file = std::move(file_);  // gone even if close() throws
    file->close();
  }

 protected:
  // Starts the run's file, logging_dir/project_name/file_name (after closing the last run's), flushed
  // every `flush_interval`, going on after a write error as `after_an_error` says; returns the run's
  // folder.
  std::string open_run(const std::string& project_name, const std::string& file_name, bool truncate,
                       std::chrono::milliseconds flush_interval,
                       AsyncFile::AfterAnError after_an_error = AsyncFile::AfterAnError::Stop) {
    if (file_) finish();
    const std::string dir = make_run_dir(logging_dir_, project_name);
    path_ = dir + "/" + file_name;
    file_ = std::make_unique<AsyncFile>(path_, truncate, flush_interval, after_an_error);
    return dir;
  }
  // The file of the current run; fails if no run has started. (A failed writer is reported by the
  // next post/append on it.)
  AsyncFile& running_file() {
    if (!file_) fail(Status::NotInitialized, "the ", name_, " tracker has not started");
    return *file_;
  }

  const std::string name_;
  const std::string logging_dir_;
  std::string path_;
  std::unique_ptr<AsyncFile> file_;
};

}  // namespace acc::tracking
