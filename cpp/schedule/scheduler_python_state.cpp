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

std::vector<double> floats_from_python(const TorchSavedFile& file, const PickleNode& list, const std::string& where) {
  std::vector<double> out;
  for (const PickleNode* item : file.sequence(list, where)) out.push_back(file.number(*item, where));
  return out;
}

}  // namespace

void require_python_scheduler_layout(const Scheduler& scheduler, const std::string& context) {
  const std::string& name = scheduler.name();
  const bool composite = name.find_first_of(",+") != std::string::npos;
  if (composite || name == "cosine_annealing_warm_restarts" || name == kOneCycleSchedule || name == kCyclicSchedule)
    fail(Status::Unsupported, context, ": the scheduler '", name,
         "' has no counterpart in Python's layout here (Python's keeps more of its state than a step count and rates: ",
         composite ? "each scheduler of a sequence or chain its own"
                   : "its cycle, or its rates in the optimizer's groups",
         ")");
}

c10::IValue python_scheduler_state_dict(const Scheduler& scheduler) {
  require_python_scheduler_layout(scheduler, "python_state_files");
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

SchedulerState python_scheduler_state(const Scheduler& scheduler, const TorchSavedFile& file) {
  require_python_scheduler_layout(scheduler, "loading Python Accelerate's '" + file.path() + "'");
  const PickleNode& root = file.root();
  SchedulerState state = scheduler.state();  // the schedule's name, and what the file may not hold
  state.step = file.integer(file.field(root, "last_epoch", "the state dict"), "last_epoch");
  if (const PickleNode* base = root.find("base_lrs")) state.base_lrs = floats_from_python(file, *base, "base_lrs");
  // The rates the scheduler set last, which PyTorch's step also left in the optimizer's groups.
  const std::vector<double> last = floats_from_python(file, file.field(root, "_last_lr", "the state dict"), "_last_lr");
  if (state.plateau) {
    state.plateau->best = file.number(file.field(root, "best", "the state dict"), "best");
    state.plateau->num_bad_epochs =
        file.integer(file.field(root, "num_bad_epochs", "the state dict"), "num_bad_epochs");
    state.plateau->cooldown_counter =
        file.integer(file.field(root, "cooldown_counter", "the state dict"), "cooldown_counter");
    state.plateau->lrs = last;
  } else {
    state.lrs = last;
    state.last_lrs = last;
  }
  return state;
}

}  // namespace acc
