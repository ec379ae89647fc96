#include "schedule/scheduler_python_state.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "checkpoint/torch_pickle.h"
#include "common/error.h"
#include "schedule/composite_python_state.h"
#include "schedule/named_schedules.h"

namespace acc {
namespace {

std::vector<double> floats_from_python(const TorchSavedFile& file, const PickleNode& list, const std::string& where) {
  std::vector<double> out;
  for (const PickleNode* item : file.sequence(list, where)) out.push_back(file.number(*item, where));
  return out;
}

PythonPartOf python_parts_of(const Scheduler& scheduler) {
  return [&scheduler](size_t index, int64_t steps_in) { return scheduler.python_part(index, steps_in); };
}

}  // namespace

void require_python_scheduler_layout(const Scheduler& scheduler) {
  (void)python_scheduler_state_dict(scheduler);  // every part's own refusals, before anything is written
}

c10::IValue python_scheduler_state_dict(const Scheduler& scheduler) {
  const std::string& name = scheduler.name();
  const SchedulerState state = scheduler.state();
  if (state.plateau) {
    // PyTorch's attributes in its constructor's order: the settings, the progress among them.
    const PythonSchedulerFields fields = scheduler.python_fields(state.step);
    const auto setting = [&](const std::string& key) {
      for (const auto& entry : fields.state)
        if (entry.first == key) return entry.second;
      fail(Status::Internal, "the ", name, " schedule has no setting '", key, "'");
    };
    const double worst = std::numeric_limits<double>::infinity();
    return python_dict({{"factor", setting("factor")},
                        {"min_lrs", setting("min_lrs")},
                        {"patience", setting("patience")},
                        {"verbose", false},
                        {"cooldown", setting("cooldown")},
                        {"cooldown_counter", state.plateau->cooldown_counter},
                        {"mode", setting("mode")},
                        {"threshold", setting("threshold")},
                        {"threshold_mode", setting("threshold_mode")},
                        {"best", state.plateau->best},
                        {"num_bad_epochs", state.plateau->num_bad_epochs},
                        {"mode_worse", setting("mode").toStringRef() == "max" ? -worst : worst},
                        {"eps", setting("eps")},
                        {"last_epoch", state.step},
                        {"_last_lr", python_floats(state.plateau->lrs)}});
  }
  // A schedule alone is a composition of one: its fields, then LRScheduler's, then the last rates.
  return python_composition_state_dict(python_composition(name), state.step, python_parts_of(scheduler),
                                       state.last_lrs);
}

SchedulerGroupKeys python_scheduler_group_keys(const std::vector<std::shared_ptr<Scheduler>>& schedulers) {
  // Each schedule's constructor writes its keys into the groups: a key written twice holds the later value.
  SchedulerGroupKeys keys;
  for (const auto& scheduler : schedulers) {
    for (size_t i = 0; i < python_schedule_count(scheduler->name()); ++i) {
      const auto& group_keys = scheduler->python_part(i, 0).fields.group_keys;
      keys.resize(std::max(keys.size(), group_keys.size()));
      for (size_t g = 0; g < group_keys.size(); ++g)
        for (const auto& entry : group_keys[g]) {
          const auto same =
              std::find_if(keys[g].begin(), keys[g].end(), [&](const auto& k) { return k.first == entry.first; });
          if (same == keys[g].end())
            keys[g].push_back(entry);
          else
            same->second = entry.second;
        }
    }
  }
  return keys;
}

SchedulerState python_scheduler_state(const Scheduler& scheduler, const TorchSavedFile& file) {
  const PickleNode& root = file.root();
  SchedulerState state = scheduler.state();  // the schedule's name, and what the file may not hold
  if (composite_schedule_name(scheduler.name())) {
    const PythonCompositionPosition position = python_composition_position(
        python_composition(scheduler.name()), scheduler.name(), python_parts_of(scheduler), file);
    state.step = position.step;
    if (!position.base_lrs.empty()) state.base_lrs = position.base_lrs;
  } else {
    state.step = file.integer(file.field(root, "last_epoch", "the state dict"), "last_epoch");
    if (const PickleNode* base = root.find("base_lrs")) state.base_lrs = floats_from_python(file, *base, "base_lrs");
  }
  // The rates the scheduler set last, which PyTorch's step also left in the optimizer's groups.
  const std::vector<double> last = floats_from_python(file, file.field(root, "_last_lr", "the state dict"), "_last_lr");
  // The settings, where a cycle stands and how long it is, as this schedule gives them at that step
  // (PyTorch's load_state_dict would take the file's settings: a schedule here is the program's).
  if (const auto differs = python_field_mismatch(scheduler.python_fields(state.step), root, file, ""))
    fail(Status::InvalidArgument, "checkpoint file '", file.path(), "': its scheduler's '", differs->key, "' is ",
         differs->saved, " at step ", state.step, ", where this program's ", scheduler.name(), " schedule has ",
         differs->ours, " (a schedule made with other settings, or stepped with epochs of its own)");
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
