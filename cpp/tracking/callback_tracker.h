// A tracker implemented by the host program (the C API's acc_add_tracker): each call is forwarded
// synchronously on the caller's thread, so a failure is the caller's error at once.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "tracking/tracker.h"

namespace acc::tracking {

class CallbackTracker : public Tracker {
 public:
  struct Callbacks {
    std::function<void(const std::string& project_name, const std::string& config_json)> init;  // may be empty
    std::function<void(const Record& record)> log;                                            // may be empty
    std::function<void()> finish;                                                             // may be empty
    std::function<void(const Record& record)> log_text;  // may be empty: texts are then not passed on
    std::function<void(const Record& record)> log_images;  // may be empty: the tracker then takes no images
    std::function<void(const Record& record)> log_histogram;  // may be empty: the tracker takes no histograms
  };
  // user_data: what the callbacks share (the C API's), kept for a callback given later.
  CallbackTracker(std::string name, Callbacks callbacks, std::shared_ptr<void> user_data = nullptr)
      : name_(std::move(name)), callbacks_(std::move(callbacks)), user_data_(std::move(user_data)) {}
  const std::string& name() const override { return name_; }
  void start(const std::string& project_name, const nlohmann::json& config) override {
    if (callbacks_.init) callbacks_.init(project_name, config.dump());
  }
  void log(const std::shared_ptr<const Record>& record) override {
    if (record->of_images) {
      if (callbacks_.log_images) callbacks_.log_images(*record);
    } else if (record->of_histogram) {
      if (callbacks_.log_histogram) callbacks_.log_histogram(*record);
    } else if (!record->text_names.empty()) {
      if (callbacks_.log_text) callbacks_.log_text(*record);
    } else if (callbacks_.log) {
      callbacks_.log(*record);
    }
  }
  // The program's text callback, given after the tracker was added (acc_tracker_set_log_text).
  void set_log_text(std::function<void(const Record& record)> log_text) { callbacks_.log_text = std::move(log_text); }
  // The program's image callback (acc_tracker_set_log_images).
  void set_log_images(std::function<void(const Record& record)> log_images) {
    callbacks_.log_images = std::move(log_images);
  }
  bool takes_images() const override { return static_cast<bool>(callbacks_.log_images); }
  // The program's histogram callback (acc_tracker_set_log_histogram).
  void set_log_histogram(std::function<void(const Record& record)> log_histogram) {
    callbacks_.log_histogram = std::move(log_histogram);
  }
  bool takes_histograms() const override { return static_cast<bool>(callbacks_.log_histogram); }
  const std::shared_ptr<void>& user_data() const { return user_data_; }
  void finish() override {
    if (callbacks_.finish) callbacks_.finish();
  }

 private:
  std::string name_;
  Callbacks callbacks_;
  std::shared_ptr<void> user_data_;
};

}  // namespace acc::tracking
