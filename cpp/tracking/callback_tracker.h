// A tracker implemented by the host program (the C API's acc_add_tracker): each call is forwarded
// synchronously on the caller's thread, so a failure is the caller's error at once.
#pragma once

#include <functional>
#include <string>

#include "tracking/tracker.h"

namespace acc::tracking {

class CallbackTracker : public Tracker {
 public:
  struct Callbacks {
    std::function<void(const std::string& project_name, const std::string& config_json)> init;  // may be empty
    std::function<void(const Record& record)> log;                                            // may be empty
    std::function<void()> finish;                                                             // may be empty
  };
  CallbackTracker(std::string name, Callbacks callbacks) : name_(std::move(name)), callbacks_(std::move(callbacks)) {}
  const std::string& name() const override { return name_; }
  void start(const std::string& project_name, const nlohmann::json& config) override {
    if (callbacks_.init) callbacks_.init(project_name, config.dump());
  }
  void log(const std::shared_ptr<const Record>& record) override {
    if (callbacks_.log) callbacks_.log(*record);
  }
  void finish() override {
    if (callbacks_.finish) callbacks_.finish();
  }

 private:
  std::string name_;
  Callbacks callbacks_;
};

}  // namespace acc::tracking
