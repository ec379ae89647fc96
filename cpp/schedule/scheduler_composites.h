// PyTorch's SequentialLR and ChainedScheduler where a part is a scheduler of its own (OneCycleLR,
// CyclicLR), over the parts themselves, as PyTorch composes them: each part is made on the optimizer
// in turn (OneCycleLR writes each group's initial_lr and momentum when made, which the parts made
// after it take as their base), a sequence then sets every rate back to initial_lr and makes its
// first part's step 0 again, restarts a part at its milestone with step(0) and otherwise steps the
// part whose milestone was reached last; a chain steps every part in turn. Sequences and chains of
// schedules with a rule alone stay LambdaScheduler's (flat, and resumable from older checkpoints).
//
// Refused (ACC_ERR_UNSUPPORTED) where PyTorch's parts share the optimizer's group entries and one
// part's making changes another's numbers: a second one_cycle (it rewrites the first one's
// initial_lr, max_lr and min_lr), and a cyclic cycling the momentum made after a one_cycle that
// cycles it (it rewrites the one_cycle's max_momentum and base_momentum).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "schedule/scheduler.h"

namespace acc {

// acc_scheduler_then: `scheduler` followed from `milestone` on by schedule `name`. Returns the
// scheduler that is the sequence now: `scheduler` itself, or a new SchedulerSequence over it.
std::shared_ptr<Scheduler> schedule_then(const std::shared_ptr<Scheduler>& scheduler, int64_t milestone,
                                         const std::string& name, const Options& options);
// acc_scheduler_chain: the same for a chain.
std::shared_ptr<Scheduler> schedule_chain(const std::shared_ptr<Scheduler>& scheduler, const std::string& name,
                                          const Options& options);

// What a sequence and a chain share: their parts, the optimizer, the step count, the rates set last.
class SchedulerComposite : public Scheduler {
 public:
  double last_lr(size_t group) const override { return group_lr(last_lrs_, group); }
  int64_t step_count() const override { return step_; }
  std::shared_ptr<Optimizer> optimizer() const override { return optimizer_; }
  size_t group_count() const override { return parts_.front()->group_count(); }
  const std::string& name() const override { return name_; }
  SchedulerState state() const override;
  void check_state(const SchedulerState& state) const override;
  // Also from inside a part's own callbacks (a cyclic's scale function).
  void refuse_from_callbacks(const char* call) const override;
  // The part's that holds it (each part's base rates are its own: a one_cycle rewrites initial_lr).
  PythonPartState python_part(size_t index, int64_t steps_in) const override;

 protected:
  // Over `first`, made and not stepped; `separator` joins the parts' names (",": a sequence, "+": a chain).
  SchedulerComposite(std::shared_ptr<IndexedScheduler> first, const char* separator);
  // Makes schedule `name` on the optimizer as the next part and runs `then_construct` (the
  // composite's own construction steps), restoring every group's rate, initial_lr and momentum if
  // either fails, so that a refused part changes nothing. `suffix` follows its name in name().
  void add_part(const std::string& name, const Options& options, const std::string& suffix,
                const std::function<void()>& then_construct);
  void require_unstepped(const char* what) const;
  // The state of `part` for a composite's `state`, `steps_in` steps into the part.
  static SchedulerState part_state(const IndexedScheduler& part, const SchedulerState& state, int64_t steps_in);
  void note_step(int64_t step);

  std::shared_ptr<Optimizer> optimizer_;
  std::vector<std::shared_ptr<IndexedScheduler>> parts_;
  std::string name_;
  const char* separator_;
  int64_t step_ = 0;
  std::vector<double> last_lrs_;
};

// PyTorch's SequentialLR.
class SchedulerSequence final : public SchedulerComposite {
 public:
  explicit SchedulerSequence(std::shared_ptr<IndexedScheduler> first) : SchedulerComposite(std::move(first), ",") {}
  void step() override;
  void then(int64_t milestone, const std::string& name, const Options& options) override;
  void chain(const std::string& name, const Options& options) override;
  void load_state(const SchedulerState& state) override;
  void check_state(const SchedulerState& state) const override;

 private:
  size_t part_at(int64_t step) const;
  int64_t milestone_of(size_t part) const { return part == 0 ? 0 : milestones_[part - 1]; }
  std::vector<int64_t> milestones_;  // milestones_[i]: where parts_[i + 1] takes over
};

// PyTorch's ChainedScheduler.
class SchedulerChain final : public SchedulerComposite {
 public:
  explicit SchedulerChain(std::shared_ptr<IndexedScheduler> first) : SchedulerComposite(std::move(first), "+") {}
  // Steps every part in turn; if one fails, every part goes back to where it stood.
  void step() override;
  void chain(const std::string& name, const Options& options) override;
  void then(int64_t milestone, const std::string& name, const Options& options) override;
  void load_state(const SchedulerState& state) override;
  void check_state(const SchedulerState& state) const override;

 private:
  void apply_state(const SchedulerState& state);  // checked before
};

}  // namespace acc
