#include "schedule/scheduler_python_state.h"

#include <string>
#include <vector>

#include "checkpoint/torch_pickle.h"
#include "common/error.h"
#include "schedule/named_schedules.h"

namespace acc {
namespace {

c10::IValue python_floats(const std::vector<double>& values) {
  std::vector<c10::IValue> items(values.begin(), values.end());
  return python_list(std::move(items));
}

// Schedules that transformers (and the C API's user factors) make as PyTorch's LambdaLR or
// MultiplicativeLR, whose state_dict holds one entry per group for its functions (None for a plain function).
bool lambda_scheduler(const std::string& name) {
  return name != "step" && name != "multistep" && name != "exponential" && name != "cosine_annealing" &&
         name != "linear_lr" && name != "constant_lr" && name != "polynomial_lr" && name != "swa_lr";
}

}  // namespace

void require_python_scheduler_layout(const Scheduler& scheduler) {
  const std::string& name = scheduler.name();
  const bool composite = name.find_first_of(",+") != std::string::npos;
  if (composite || name == "cosine_annealing_warm_restarts" || name == kOneCycleSchedule || name == kCyclicSchedule)
    fail(Status::Unsupported, "python_state_files: the scheduler '", name,
         "' is not written in Python's layout (Python's keeps more of its state than a step count and rates: ",
         composite ? "each scheduler of a sequence or chain its own"
                   : "its cycle, or its rates in the optimizer's groups",
         ")");
}

c10::IValue python_scheduler_state_dict(const Scheduler& scheduler) {
  require_python_scheduler_layout(scheduler);
  const std::string& name = scheduler.name();
  const SchedulerState state = scheduler.state();
  if (state.plateau) {
    return python_dict({{"best", state.plateau->best},
                        {"num_bad_epochs", state.plateau->num_bad_epochs},
                        {"cooldown_counter", state.plateau->cooldown_counter},
                        {"last_epoch", state.step},
                        {"_last_lr", python_floats(state.plateau->lrs)}});
  }
  std::vector<std::pair<std::string, c10::IValue>> items{{"base_lrs", python_floats(state.base_lrs)},
                                                         {"last_epoch", state.step},
                                                         {"verbose", false},
                                                         {"_step_count", state.step + 1},
                                                         {"_get_lr_called_within_step", false},
                                                         {"_last_lr", python_floats(state.last_lrs)}};
  if (lambda_scheduler(name))
    items.emplace_back("lr_lambdas", python_list(std::vector<c10::IValue>(state.base_lrs.size())));
  return python_dict(std::move(items));
}

}  // namespace acc
