// Learning-rate schedulers over an optimizer. LambdaScheduler runs a named schedule's rule
// (schedule/named_schedules.h) or a user's factor (PyTorch's LambdaLR: lr = base_lr * factor(step),
// step 0's applied at construction, base_lr being each group's learning rate at that moment), or
// PyTorch's MultiplicativeLR (lr = the rate before * factor(step)); a sequence of them is PyTorch's
// SequentialLR (then()), a chain ChainedScheduler (chain()). ReduceLROnPlateau, OneCycleLR and CyclicLR
// are schedulers of their own (plateau_scheduler.h, one_cycle_scheduler.h, cyclic_scheduler.h); a
// sequence or chain with one of the last two is scheduler_composites.h's. make_scheduler picks by name.
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/options.h"
#include "common/own_callbacks.h"
#include "optim/optimizer.h"
#include "schedule/named_schedules.h"
#include "schedule/schedule_options.h"

namespace acc {

// Where ReduceLROnPlateau stands beyond its step count.
struct PlateauState {
  double best = 0;  // +-inf before a first metric (PyTorch's mode_worse)
  int64_t num_bad_epochs = 0;
  int64_t cooldown_counter = 0;
  std::vector<double> lrs;  // each group's rate: the schedule lowers them where it stands
};

// Where a schedule stands, for checkpoints.
struct SchedulerState {
  int64_t step = 0;
  std::vector<double> base_lrs;
  std::optional<PlateauState> plateau;  // only a reduce_lr_on_plateau scheduler's
  std::string schedule;                 // its name ("lambda": a user's); empty in older checkpoints
  // A schedule with a rule: each group's rate when saved (set by the schedule, or by hand since), and
  // the rates the schedule set last (PyTorch's _last_lr). Empty in older checkpoints: then computed.
  std::vector<double> lrs, last_lrs;
};

// What PyTorch's counterpart of a schedule keeps beyond every scheduler's step count and rates (its
// settings, where its cycle stands), and the keys its constructor writes into each of the
// optimizer's groups (OneCycleLR's max_lr, SWALR's swa_lr, ...): Python Accelerate's
// scheduler.bin and optimizer.bin carry them (schedule/scheduler_python_state.h).
struct PythonSchedulerFields {
  std::vector<std::pair<std::string, c10::IValue>> state;
  std::vector<std::vector<std::pair<std::string, double>>> group_keys;  // one list per group, or none
  // What PyTorch keeps as a collections.Counter (MultiStepLR's milestones, each step as often as it
  // is given), which these files' plain containers cannot hold: compared where a file has it, not
  // written (Python's program keeps its own).
  std::vector<std::pair<std::string, std::vector<int64_t>>> counted;
};

// One schedule of a sequence or chain as PyTorch's counterpart keeps it there (each part keeps a
// state of its own): its base rates and its fields.
struct PythonPartState {
  std::vector<double> base_lrs;
  PythonSchedulerFields fields;
};

// What the C API sees of a scheduler; the Accelerator's wrapper is one too.
class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual void step() = 0;
  // A step with the metric the schedule follows (ReduceLROnPlateau's step(metrics)); the other
  // schedules take none.
  virtual void step_with_metric(double metric);
  virtual bool takes_metric() const { return false; }
  // Where the schedule ends, if it has an end that a step past fails (OneCycleLR's total_steps);
  // Accelerate's AcceleratedScheduler steps such a schedule no further.
  virtual std::optional<int64_t> total_steps() const { return std::nullopt; }
  virtual SchedulerState state() const = 0;
  // Resumes at the saved step: each group's lr is set as the schedule gives it there.
  virtual void load_state(const SchedulerState& state) = 0;
  // The checks of load_state alone: throws what it would, changes nothing.
  virtual void check_state(const SchedulerState& state) const = 0;
  virtual double last_lr(size_t group) const = 0;
  virtual int64_t step_count() const = 0;
  virtual std::shared_ptr<Optimizer> optimizer() const = 0;
  // How many parameter groups the optimizer had when the schedule was made: it keeps a rate per group.
  virtual size_t group_count() const = 0;
  // Fails (InvalidArgument, naming `call`) once the optimizer has another number of groups (a group
  // added after the scheduler was made; PyTorch's schedulers then fail or leave the new group alone).
  void require_groups_unchanged(const char* call) const;
  // The schedule's name (acc_scheduler_create's), or "lambda" for a user's factor; a sequence's
  // names its schedules and milestones ("linear_lr,cosine_annealing@5").
  virtual const std::string& name() const = 0;
  // PyTorch's extra fields for this schedule at `step` (none for a schedule whose Python
  // counterpart keeps only the step count and rates).
  virtual PythonSchedulerFields python_fields(int64_t /*step*/) const { return {}; }
  // The `index`-th schedule named in name() (a sequence's or chain's parts, nested ones in the name's
  // order; a schedule alone is its own only one) as PyTorch keeps it `steps_in` steps into it (-1:
  // before its milestone, where SequentialLR set it one step back from its making).
  virtual PythonPartState python_part(size_t index, int64_t steps_in) const;
  // PyTorch's SequentialLR: from step `milestone` on, schedule `name` takes over, counting its steps
  // from 0 there. Only before the first step; milestones grow. Only schedules with a rule take part.
  virtual void then(int64_t milestone, const std::string& name, const Options& options);
  // PyTorch's ChainedScheduler: schedule `name` steps with this one, from the rate it leaves (step
  // 0's too). Only before the first step; only schedules with a rule take part, and not a sequence.
  virtual void chain(const std::string& name, const Options& options);
  // Refuses `call` from inside a callback this schedule runs (own_callbacks.h): a checkpoint's load
  // asks before it changes anything.
  virtual void refuse_from_callbacks(const char* call) const {
    refuse_inside_own_callbacks(owner(), "scheduler", call);
  }

 protected:
  // Entered by each operation that runs the user's functions (a factor, a scale function) or
  // changes what they serve: refused from inside one of this schedule's own callbacks (a step
  // within a step; own_callbacks.h); while it lives, this thread runs them.
  OwnCallbacksRunning enter(const char* call) const {
    Scheduler::refuse_from_callbacks(call);
    require_groups_unchanged(call);
    return OwnCallbacksRunning(owner());
  }
  // Marks this thread as running this schedule's functions, without the refusal (a check inside an
  // operation already entered).
  OwnCallbacksRunning running_callbacks() const { return OwnCallbacksRunning(owner()); }
  // Each parameter group's learning rate now.
  static std::vector<double> group_lrs(const Optimizer& optimizer);
  // Each group's initial_lr (PyTorch's: set by the first scheduler made on the optimizer), or its
  // rate now where none is set.
  static std::vector<double> initial_lrs(const Optimizer& optimizer);
  // The checks every scheduler's last_lr and check_state make.
  static double group_lr(const std::vector<double>& lrs, size_t group);
  static void check_group_count(size_t saved, size_t groups);
  // A saved state's rates (`which`: "learning rates", "base learning rates") are finite numbers; of
  // any sign, as PyTorch's arithmetic may leave one a few ulp below 0.
  static void check_finite_rates(const std::vector<double>& lrs, const char* which);
  // A state saved by another schedule is refused (a state without a name, from an older
  // checkpoint, is taken).
  void check_schedule_name(const SchedulerState& state) const;

 private:
  const void* owner() const { return static_cast<const Scheduler*>(this); }
};

// The scheduler named `name`: a LambdaScheduler for a schedule with a rule, else reduce_lr_on_plateau's,
// one_cycle's or cyclic's own.
std::shared_ptr<Scheduler> make_scheduler(std::shared_ptr<Optimizer> optimizer, const std::string& name,
                                          const Options& options);
// PyTorch's CyclicLR with a user's scale_fn (of the cycle or the step, as options' scale_mode says).
std::shared_ptr<Scheduler> make_cyclic_scheduler(std::shared_ptr<Optimizer> optimizer, const Options& options,
                                                 std::function<double(int64_t)> scale_fn);

// A scheduler whose rates follow from its step count and base rates alone (every one but
// ReduceLROnPlateau): it goes to a step by applying it, and a resume applies the saved one.
class IndexedScheduler : public Scheduler {
 public:
  void step() override {
    const auto entered = enter("step");
    apply(step_ + 1);
  }
  SchedulerState state() const override;
  void load_state(const SchedulerState& state) override;
  double last_lr(size_t group) const override { return group_lr(last_lrs_, group); }
  int64_t step_count() const override { return step_; }
  std::shared_ptr<Optimizer> optimizer() const override { return optimizer_; }
  size_t group_count() const override { return base_lrs_.size(); }
  const std::string& name() const override { return name_; }

  // As a part of a sequence or chain with a scheduler of its own (scheduler_composites.h):
  // PyTorch's step(0), which a SequentialLR gives a schedule at its milestone.
  virtual void restart() = 0;
  // SequentialLR's construction for its first schedule, after it set each group's rate to `reset`
  // (its initial_lr): that schedule's step 0 again, from there.
  virtual void start_again(const std::vector<double>& reset) = 0;

 protected:
  // The base rates are the groups' initial_lr, or their rates now where no scheduler set one.
  IndexedScheduler(std::shared_ptr<Optimizer> optimizer, std::string name);
  // Sets what the schedule gives at `step`, all checked before anything changes, then
  // set_rates(step, ...).
  virtual void apply(int64_t step) = 0;
  void set_rates(int64_t step, std::vector<double> lrs);
  // The saved rates' checks: one of each per group, finite and >= 0.
  void check_saved_rates(const SchedulerState& state) const;
  // A resume at `state`'s step with its saved rates (checked before).
  void restore_rates(const SchedulerState& state);
  // The checks every such state gets: its schedule's name, no plateau part, the group count.
  void check_state_shape(const SchedulerState& state) const;

  // OneCycleLR's constructor: each group's initial_lr is set to `lrs` (over what is there) when the
  // schedule is made, instead of only where no scheduler set one.
  void overwrite_initial_lrs(std::vector<double> lrs) { initial_lrs_written_ = std::move(lrs); }

  std::shared_ptr<Optimizer> optimizer_;
  std::string name_;
  std::vector<double> base_lrs_;  // PyTorch's base_lrs: each group's initial_lr (see Optimizer::initial_lr)

 private:
  std::vector<double> last_lrs_;
  int64_t step_ = 0;
  // Whether the optimizer's initial_lr was set (at the first set_rates: when made, once nothing failed).
  bool made_ = false;
  std::optional<std::vector<double>> initial_lrs_written_;
};

class LambdaScheduler final : public IndexedScheduler {
 public:
  LambdaScheduler(std::shared_ptr<Optimizer> optimizer, const std::string& name, const Options& options);
  // What a user's factor multiplies: PyTorch's LambdaLR multiplies the base rate (lr = base_lr *
  // factor(step), step 0 included), MultiplicativeLR the rate before (from step 1).
  enum class FactorOf { BaseRate, RateBefore };
  // A user schedule: factor(step) for every parameter group, as PyTorch's LambdaLR(opt, fn). A
  // factor that throws, or is not finite or negative, fails the step and leaves the schedule where it was.
  LambdaScheduler(std::shared_ptr<Optimizer> optimizer, std::function<double(int64_t)> factor,
                  FactorOf of = FactorOf::BaseRate);
  // A user schedule with a factor of each group's own, as PyTorch's LambdaLR(opt, [fn0, fn1, ...]):
  // factor(group, step), called for each group in turn. `functions`, how many the caller has, must
  // be the group count (PyTorch refuses another); `what` names them in that refusal.
  using GroupFactor = std::function<double(size_t group, int64_t step)>;
  LambdaScheduler(std::shared_ptr<Optimizer> optimizer, GroupFactor factor, size_t functions, const char* what,
                  FactorOf of);

  // A step within a phase whose schedule is chainable goes on from each group's rate now, as
  // PyTorch's get_lr() reads group["lr"]: a rate set by hand since the last step is taken up.
  void step() override;
  void restart() override;
  void start_again(const std::vector<double>& reset) override;
  void then(int64_t milestone, const std::string& name, const Options& options) override;
  void chain(const std::string& name, const Options& options) override;
  void check_state(const SchedulerState& state) const override;
  // CosineAnnealingWarmRestarts' cycle (T_i, T_cur) and settings; SWALR's swa_lr in each group.
  PythonSchedulerFields python_fields(int64_t step) const override;
  // The same for each schedule of a sequence or chain.
  PythonPartState python_part(size_t index, int64_t steps_in) const override;
  bool is_sequence() const { return phases_.size() > 1; }
  // A state with saved rates resumes from them (as PyTorch's optimizer state holds group["lr"]); an
  // older one has them computed at its step.
  void load_state(const SchedulerState& state) override;

 private:
  // A user's factor; `per_group`: the factors are the groups' own (their failures name the group).
  LambdaScheduler(std::shared_ptr<Optimizer> optimizer, GroupFactor factor, FactorOf of, bool per_group);

  // A sequence's schedule from its milestone on, counting its steps from there, for each group: its
  // rule (the rate from the base rate) and, for a chainable schedule, its step from the rate before.
  struct Phase {
    int64_t milestone;
    std::vector<ScheduleRule> rules;
    std::vector<Schedule::Next> steps;  // empty for a closed form
  };

  void apply(int64_t step) override;
  // Notes a schedule that may be walked: a chainable one is computed by its recursion from step 0.
  void note_form(const Schedule& schedule) { walks_ = walks_ || !schedule.closed_form; }
  // Each group's learning rate at `step` from these bases, by the phase the step is in.
  std::vector<double> lrs_at(const std::vector<double>& base_lrs, int64_t step) const;
  // The same by `rules` (one per group), `steps_in` steps into their phase, checked: finite and >= 0.
  static std::vector<double> rates(const std::vector<ScheduleRule>& rules, const std::vector<double>& base_lrs,
                                   int64_t steps_in, int64_t step);
  // The first phase (milestone 0) from each group's chain, its step 0 from `made_at` (each group's rate).
  static Phase first_phase(const std::vector<std::vector<Schedule>>& chains, const std::vector<double>& made_at);
  // SequentialLR's construction: the first phase again from each group's rate `reset`, and its
  // step 0's rates (`lrs`), checked; nothing changes.
  Phase first_phase_again(const std::vector<double>& reset, std::vector<double>& lrs) const;
  const Phase& phase_at(int64_t step) const;
  // Each group's rate checked: finite and >= 0.
  static void check_rates(const std::vector<double>& lrs, int64_t step);
  void require_unstepped(const char* what) const;
  size_t chain_length() const { return chains_.empty() ? 0 : chains_[0].size(); }

  // Kept flat (never a rule wrapping a rule), so a long sequence or chain costs no stack depth.
  // Each group's own (a user's factor may differ by group; a named schedule is the same in each).
  std::vector<std::vector<Schedule>> chains_;  // the first phase's schedules: one each unless chained
  std::vector<Phase> phases_;    // phases_[0] (milestone 0): the chain's rule; then's after it
  // Each group's rate when the scheduler was made, from which a chainable first phase starts (as
  // PyTorch's get_lr() at step 0 reads group["lr"]); a sequence starts it from the base rate instead
  // (SequentialLR sets each group's rate to initial_lr first).
  std::vector<double> made_lrs_;
  bool walks_ = false;  // a phase or chain part is chainable (walked step by step)
  // Makes a named schedule's step(0) (restarted_schedule_rule, which refuses a schedule that PyTorch
  // cannot restart); none for a user's factor, which only ever leads a sequence or chain.
  std::function<ScheduleRule()> restart_rule_;
  // Each schedule's name and settings in the name's order (none for a user's factor), for python_part.
  std::vector<std::pair<std::string, std::optional<ScheduleOptions>>> settings_;
};

}  // namespace acc
