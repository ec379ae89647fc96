#include "schedule/scheduler_part.h"

#include <cmath>

#include "checkpoint/state_files.h"
#include "common/error.h"
#include "common/files.h"
#include "schedule/named_schedules.h"

namespace acc {
namespace {

// ReduceLROnPlateau's best metric is +-inf until a first one arrives, which JSON cannot hold:
// those two are the strings "inf" and "-inf".
nlohmann::json plateau_best_to_json(double best) {
  if (std::isinf(best)) return best > 0 ? "inf" : "-inf";
  return best;
}
double plateau_best_from_json(const nlohmann::json& plateau, const std::string& path) {
  if (plateau.is_object() && plateau.contains("best") && plateau["best"].is_string()) {
    const std::string text = plateau["best"].get<std::string>();
    if (text == "inf" || text == "-inf") return text == "inf" ? INFINITY : -INFINITY;
    fail(Status::Io, "checkpoint file '", path, "': 'best' must be a finite number, \"inf\" or \"-inf\", not \"",
         text, "\"");
  }
  return json_field<double>(plateau, "best", path);
}

class SchedulerPart final : public CheckpointPart {
 public:
  SchedulerPart(size_t index, std::shared_ptr<Scheduler> scheduler) : index_(index), scheduler_(std::move(scheduler)) {}

  std::string file() const override { return indexed_name("scheduler", index_, ".json"); }
  void save(const std::string& path) const override {
    const SchedulerState state = scheduler_->state();
    nlohmann::json j{{"schedule", state.schedule}, {"step", state.step}, {"base_lrs", state.base_lrs}};
    if (!state.plateau) {
      j["lrs"] = state.lrs;
      j["last_lrs"] = state.last_lrs;
    }
    if (const auto& p = state.plateau)
      j[kPlateauSchedule] = {{"best", plateau_best_to_json(p->best)},
                             {"num_bad_epochs", p->num_bad_epochs},
                             {"cooldown_counter", p->cooldown_counter},
                             {"lrs", p->lrs}};
    write_file(path, j.dump(2));
  }
  StagedLoad load(const std::string& path) const override {
    const nlohmann::json j = read_json(path);
    SchedulerState state{json_field_at_least<int64_t>(j, "step", path, 0),
                         json_field<std::vector<double>>(j, "base_lrs", path),
                         std::nullopt,
                         j.contains("schedule") ? json_field<std::string>(j, "schedule", path) : "",
                         {},
                         {}};
    // Finite rates of any sign: a schedule's arithmetic may leave one a few ulp below 0, as PyTorch's.
    for (auto [key, rates] : {std::pair{"lrs", &state.lrs}, std::pair{"last_lrs", &state.last_lrs}})
      if (j.contains(key)) *rates = json_field<std::vector<double>>(j, key, path);  // not in older ones
    if (j.contains(kPlateauSchedule)) {
      const nlohmann::json& p = j[kPlateauSchedule];
      state.plateau = PlateauState{plateau_best_from_json(p, path),
                                   json_field_at_least<int64_t>(p, "num_bad_epochs", path, 0),
                                   json_field_at_least<int64_t>(p, "cooldown_counter", path, 0),
                                   json_field<std::vector<double>>(p, "lrs", path)};
    }
    return staged_scheduler_load(scheduler_, state, path);
  }

 private:
  size_t index_;
  std::shared_ptr<Scheduler> scheduler_;
};

}  // namespace

StagedLoad staged_scheduler_load(std::shared_ptr<Scheduler> scheduler, const SchedulerState& state,
                                 const std::string& path) {
  scheduler->refuse_from_callbacks("load_state");  // before anything of the checkpoint is applied
  checked_by_file(path, [&] { scheduler->check_state(state); });
  return {[scheduler, state] { scheduler->load_state(state); }, {}, {}};
}

std::unique_ptr<CheckpointPart> scheduler_part(size_t index, std::shared_ptr<Scheduler> scheduler) {
  return std::make_unique<SchedulerPart>(index, std::move(scheduler));
}

}  // namespace acc
