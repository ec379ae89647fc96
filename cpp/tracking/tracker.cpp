#include "tracking/tracker.h"

#include "common/error.h"
#include "tracking/init_kwargs.h"

namespace acc::tracking {

// What a tracker takes by default: no keyword arguments, no artifacts.
void Tracker::set_init_kwargs(const nlohmann::json& kwargs) { InitKwargs(name(), kwargs).refuse_the_rest(); }

void Tracker::check_log_kwargs(const nlohmann::json& kwargs, Logged) const {
  InitKwargs(name(), kwargs, "log_kwargs").refuse_the_rest();
}

const nlohmann::json& log_kwargs_of(const Record& record, const std::string& tracker) {
  // Never destroyed: writer threads may still read it while a process that left its accelerator
  // alive exits.
  static const nlohmann::json* const none = new nlohmann::json(nlohmann::json::object());
  if (!record.log_kwargs.is_object()) return *none;
  const auto found = record.log_kwargs.find(tracker);
  return found == record.log_kwargs.end() || found->is_null() ? *none : *found;
}

void Tracker::log_artifact(const std::string&, const std::string&) {
  fail(Status::Unsupported, "the ", name(), " tracker keeps no artifacts (mlflow's does)");
}

}  // namespace acc::tracking
