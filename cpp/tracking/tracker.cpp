#include "tracking/tracker.h"

#include "common/error.h"
#include "tracking/init_kwargs.h"

namespace acc::tracking {

// What a tracker takes by default: no keyword arguments, no artifacts.
void Tracker::set_init_kwargs(const nlohmann::json& kwargs) { InitKwargs(name(), kwargs).refuse_the_rest(); }

void Tracker::log_artifact(const std::string&, const std::string&) {
  fail(Status::Unsupported, "the ", name(), " tracker keeps no artifacts (mlflow's does)");
}

}  // namespace acc::tracking
