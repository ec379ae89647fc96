#include "schedule/scheduler.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <memory>
#include <vector>

#include "common/error.h"
#include "schedule/chainable_schedules.h"
#include "schedule/cyclic_scheduler.h"
#include "schedule/named_schedules.h"
#include "schedule/one_cycle_scheduler.h"
#include "schedule/plateau_scheduler.h"

namespace acc {
namespace {

constexpr int64_t kMaxWalkedStep = 100'000'000;

// At most this many schedules in a chain: each step runs them all, and each one added checks the
// chain's step 0 again.
constexpr size_t kMaxChainedSchedules = 1000;

}  // namespace

void Scheduler::require_groups_unchanged(const char* call) const {
  const size_t groups = optimizer()->num_param_groups();
  require(groups == group_count(), call, ": the optimizer has ", groups, " parameter groups, and the ", name(),
          " schedule was made over ", group_count(), ": add parameter groups before making the scheduler");
}

void Scheduler::step_with_metric(double) {
  fail(Status::InvalidArgument, "only a ", kPlateauSchedule,
       " scheduler steps with a metric; this schedule steps without one (acc_scheduler_step)");
}

void Scheduler::then(int64_t, const std::string& name, const Options&) {
  fail(Status::Unsupported, "a sequence of schedules starts with a schedule that has a rule; the ", this->name(),
       " scheduler cannot be followed by '", name, "'");
}

PythonPartState Scheduler::python_part(size_t index, int64_t steps_in) const {
  if (index != 0) fail(Status::Internal, "the ", name(), " schedule has no part ", index);
  return {state().base_lrs, python_fields(std::max<int64_t>(0, steps_in))};
}

void Scheduler::chain(const std::string& name, const Options&) {
  fail(Status::Unsupported, "a chain of schedules starts with a schedule that has a rule; the ", this->name(),
       " scheduler cannot be chained with '", name, "'");
}

std::vector<double> Scheduler::group_lrs(const Optimizer& optimizer) {
  std::vector<double> lrs;
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) lrs.push_back(optimizer.lr(g));
  return lrs;
}

// PyTorch's LRScheduler constructor: base_lrs are the groups' initial_lr, which the first scheduler
// made on the optimizer sets to their rates then.
std::vector<double> Scheduler::initial_lrs(const Optimizer& optimizer) {
  std::vector<double> lrs;
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g)
    lrs.push_back(optimizer.initial_lr(g).value_or(optimizer.lr(g)));
  return lrs;
}

double Scheduler::group_lr(const std::vector<double>& lrs, size_t group) {
  require(group < lrs.size(), "parameter group ", group, " does not exist (the scheduler has ", lrs.size(), ")");
  return lrs[group];
}

void Scheduler::check_group_count(size_t saved, size_t groups) {
  require(saved == groups, "the scheduler state has ", saved, " parameter groups, but the optimizer has ", groups);
}

void Scheduler::check_finite_rates(const std::vector<double>& lrs, const char* which) {
  for (double lr : lrs) require(std::isfinite(lr), "a scheduler state's ", which, " must be finite, got ", lr);
}

void Scheduler::check_schedule_name(const SchedulerState& state) const {
  require(state.schedule.empty() || state.schedule == name(), "the state was saved by a '", state.schedule,
          "' schedule; this scheduler's is '", name(), "'");
}

std::shared_ptr<Scheduler> make_scheduler(std::shared_ptr<Optimizer> optimizer, const std::string& name,
                                          const Options& options) {
  if (name != kPlateauSchedule && name != kOneCycleSchedule && name != kCyclicSchedule)
    return std::make_shared<LambdaScheduler>(std::move(optimizer), name, options);  // checks the options
  check_schedule_options(name, options);
  const ScheduleOptions settings = scheduler_option_table().read(options);
  if (name == kPlateauSchedule) return std::make_shared<PlateauScheduler>(std::move(optimizer), settings);
  if (name == kCyclicSchedule) return std::make_shared<CyclicScheduler>(std::move(optimizer), settings);
  return std::make_shared<OneCycleScheduler>(std::move(optimizer), settings);
}

std::shared_ptr<Scheduler> make_cyclic_scheduler(std::shared_ptr<Optimizer> optimizer, const Options& options,
                                                 std::function<double(int64_t)> scale_fn) {
  check_schedule_options(kCyclicSchedule, options);
  return std::make_shared<CyclicScheduler>(std::move(optimizer), scheduler_option_table().read(options),
                                           std::move(scale_fn));
}

IndexedScheduler::IndexedScheduler(std::shared_ptr<Optimizer> optimizer, std::string name)
    : optimizer_(std::move(optimizer)), name_(std::move(name)), base_lrs_(initial_lrs(*optimizer_)) {}

SchedulerState IndexedScheduler::state() const {
  return {step_, base_lrs_, std::nullopt, name_, group_lrs(*optimizer_), last_lrs_};
}

void IndexedScheduler::set_rates(int64_t step, std::vector<double> lrs) {
  if (!made_) {  // the constructor's step 0, all checked: PyTorch's group.setdefault("initial_lr", ...)
    for (size_t g = 0; g < base_lrs_.size(); ++g)
      optimizer_->set_initial_lr(g, initial_lrs_written_ ? initial_lrs_written_->at(g) : base_lrs_[g],
                                 initial_lrs_written_.has_value());
    made_ = true;
  }
  for (size_t g = 0; g < lrs.size(); ++g) optimizer_->set_lr(g, lrs[g]);
  step_ = step;
  last_lrs_ = std::move(lrs);
}

void IndexedScheduler::check_saved_rates(const SchedulerState& state) const {
  check_group_count(state.lrs.size(), base_lrs_.size());
  check_group_count(state.last_lrs.size(), base_lrs_.size());
  for (const std::vector<double>* lrs : {&state.lrs, &state.last_lrs}) check_finite_rates(*lrs, "learning rates");
}

void IndexedScheduler::restore_rates(const SchedulerState& state) {
  for (size_t g = 0; g < state.lrs.size(); ++g) optimizer_->set_lr(g, state.lrs[g]);
  step_ = state.step;
  last_lrs_ = state.last_lrs;
}

void IndexedScheduler::check_state_shape(const SchedulerState& state) const {
  check_schedule_name(state);
  require(!state.plateau, "the state is a ", kPlateauSchedule, " scheduler's, not this schedule's");
  check_group_count(state.base_lrs.size(), base_lrs_.size());
  require_groups_unchanged("loading a scheduler's state");
}

void IndexedScheduler::load_state(const SchedulerState& state) {
  const auto entered = enter("loading a scheduler's state");
  check_state(state);
  base_lrs_ = state.base_lrs;
  apply(state.step);
}

LambdaScheduler::LambdaScheduler(std::shared_ptr<Optimizer> optimizer, const std::string& name, const Options& options)
    : IndexedScheduler(std::move(optimizer), name),
      made_lrs_(group_lrs(*optimizer_)),
      restart_rule_([name, options, default_lr = optimizer_->default_lr()] {
        return restarted_schedule_rule(name, options, default_lr);
      }) {
  for (Schedule& schedule : named_group_schedules(name, options, optimizer_->default_lr(), base_lrs_.size())) {
    note_form(schedule);
    chains_.push_back({std::move(schedule)});
  }
  phases_ = {first_phase(chains_, made_lrs_)};
  apply(0);
  settings_.emplace_back(name, scheduler_option_table().read(options));
}

LambdaScheduler::LambdaScheduler(std::shared_ptr<Optimizer> optimizer, std::function<double(int64_t)> factor,
                                 FactorOf of)
    : LambdaScheduler(std::move(optimizer),
                      factor ? GroupFactor([factor](size_t, int64_t step) { return factor(step); }) : GroupFactor(), of,
                      false) {}

namespace {

// `optimizer`, once `functions` (one per group, named `what`) is its group count, as PyTorch checks.
std::shared_ptr<Optimizer> with_one_function_per_group(std::shared_ptr<Optimizer> optimizer, size_t functions,
                                                       const char* what) {
  require(functions == optimizer->num_param_groups(), "expected ", optimizer->num_param_groups(), " ", what,
          "s (one per parameter group), but got ", functions);
  return optimizer;
}

}  // namespace

LambdaScheduler::LambdaScheduler(std::shared_ptr<Optimizer> optimizer, GroupFactor factor, size_t functions,
                                 const char* what, FactorOf of)
    : LambdaScheduler(with_one_function_per_group(std::move(optimizer), functions, what), std::move(factor), of,
                      true) {}

LambdaScheduler::LambdaScheduler(std::shared_ptr<Optimizer> optimizer, GroupFactor factor, FactorOf of, bool per_group)
    : IndexedScheduler(std::move(optimizer), of == FactorOf::BaseRate ? "lambda" : "multiplicative"),
      made_lrs_(group_lrs(*optimizer_)) {
  require(factor != nullptr, "a ", name_, " schedule needs a factor function");
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    auto checked = [factor, g, per_group](int64_t s) {
      const double f = factor(g, s);  // checked on its own: the message names the factor
      require(std::isfinite(f) && f >= 0, "the schedule's factor", per_group ? " of parameter group " : "",
              per_group ? std::to_string(g) : "", " at step ", s, " is ", f, " (it must be finite and >= 0)");
      return f;
    };
    chains_.push_back({of == FactorOf::BaseRate
                           ? closed_form([checked](double base, int64_t s) { return base * checked(s); })
                           : chainable([checked](double lr, double, int64_t s) { return lr * checked(s); })});
  }
  if (!chains_.empty()) note_form(chains_[0][0]);
  phases_ = {first_phase(chains_, made_lrs_)};
  apply(0);
  settings_.emplace_back(name_, std::nullopt);
}

namespace {

// What PyTorch's class of schedule `name` keeps of its own at `step` (none for most).
PythonSchedulerFields python_fields_of(const std::string& name, const ScheduleOptions& o, size_t groups, int64_t step) {
  PythonSchedulerFields fields;
  // PyTorch's chainable schedulers' settings, in the order their constructors set them.
  if (name == "step") {
    fields.state = {{"step_size", o.step_size.value_or(0)}, {"gamma", o.gamma.value_or(0.1)}};
  } else if (name == "multistep") {
    fields.state = {{"gamma", o.gamma.value_or(0.1)}};
    fields.counted = {{"milestones", milestone_steps(o.milestones.value_or(""))}};
  } else if (name == "exponential") {
    fields.state = {{"gamma", o.gamma.value_or(0.0)}};
  } else if (name == "cosine_annealing") {
    fields.state = {{"T_max", o.t_max.value_or(0)}, {"eta_min", o.eta_min}};
  } else if (name == "constant_lr") {
    fields.state = {{"factor", constant_factor(o, name)}, {"total_iters", o.total_iters}};
  } else if (name == "linear_lr") {
    fields.state = {{"start_factor", o.start_factor}, {"end_factor", o.end_factor}, {"total_iters", o.total_iters}};
  } else if (name == "polynomial_lr") {
    fields.state = {{"total_iters", o.total_iters}, {"power", o.power}};
  } else if (name == "cosine_annealing_warm_restarts") {
    const int64_t t_0 = o.t_0.value_or(1);
    const WarmRestartsPosition at = warm_restarts_position(t_0, o.t_mult, step);
    if (at.overflows)
      fail(Status::Unsupported, "the ", name, " schedule's period after step ", step, " exceeds 64 bits (T_0 ", t_0,
           ", T_mult ", o.t_mult, ")");
    fields.state = {{"T_0", t_0}, {"T_i", at.t_i}, {"T_mult", o.t_mult}, {"eta_min", o.eta_min}, {"T_cur", at.t_cur}};
  } else if (name == "swa_lr") {
    for (const double rate : per_group(o.swa_lr, 0.0, groups, "swa_lr", name))
      fields.group_keys.push_back({{"swa_lr", rate}});
    fields.state = {{"anneal_epochs", o.anneal_epochs}};
  }
  return fields;
}

}  // namespace

PythonSchedulerFields LambdaScheduler::python_fields(int64_t step) const {
  // A sequence's or chain's are its parts' (python_part).
  if (settings_.size() != 1 || !settings_[0].second) return {};
  return python_fields_of(settings_[0].first, *settings_[0].second, base_lrs_.size(), step);
}

PythonPartState LambdaScheduler::python_part(size_t index, int64_t steps_in) const {
  if (index >= settings_.size()) fail(Status::Internal, "no schedule ", index, " in '", name_, "'");
  PythonPartState part{base_lrs_, {}};  // every part's base rates are the groups' initial_lr
  const auto& [name, options] = settings_[index];
  // Before its milestone a part stands where its making left it (its step 0), set one step back.
  if (options) part.fields = python_fields_of(name, *options, base_lrs_.size(), std::max<int64_t>(0, steps_in));
  return part;
}

LambdaScheduler::Phase LambdaScheduler::first_phase(const std::vector<std::vector<Schedule>>& chains,
                                                    const std::vector<double>& made_at) {
  Phase phase{0, {}, {}};
  for (size_t g = 0; g < chains.size(); ++g) {
    Schedule schedule = chains[g].size() == 1 ? chains[g][0] : chained(chains[g]);
    if (!schedule.closed_form) phase.steps.push_back(schedule.next);
    phase.rules.push_back(rule_of(std::move(schedule), made_at.at(g)));
  }
  return phase;
}

const LambdaScheduler::Phase& LambdaScheduler::phase_at(int64_t step) const {
  // SequentialLR's step: the schedule whose milestone was reached last.
  const auto after = std::upper_bound(phases_.begin(), phases_.end(), step,
                                      [](int64_t s, const Phase& phase) { return s < phase.milestone; });
  return *std::prev(after);
}

std::vector<double> LambdaScheduler::lrs_at(const std::vector<double>& base_lrs, int64_t step) const {
  const Phase& phase = phase_at(step);
  return rates(phase.rules, base_lrs, step - phase.milestone, step);
}

void LambdaScheduler::check_rates(const std::vector<double>& lrs, int64_t step) {
  for (double lr : lrs)
    require(std::isfinite(lr), "the schedule's learning rate at step ", step, " is ", lr, " (it must be finite)");
}

std::vector<double> LambdaScheduler::rates(const std::vector<ScheduleRule>& rules, const std::vector<double>& base_lrs,
                                           int64_t steps_in, int64_t step) {
  std::vector<double> lrs;
  for (size_t g = 0; g < base_lrs.size(); ++g) lrs.push_back(rules[g](base_lrs[g], steps_in));
  check_rates(lrs, step);
  return lrs;
}

void LambdaScheduler::apply(int64_t step) { set_rates(step, lrs_at(base_lrs_, step)); }

void LambdaScheduler::step() {
  const auto entered = enter("step");
  const int64_t step = step_count() + 1;
  const Phase& phase = phase_at(step);
  // A closed form, and a schedule's restart at its milestone (step(0)'s closed form), start from the base rates.
  if (phase.steps.empty() || phase.milestone == step) return apply(step);
  std::vector<double> lrs;
  for (size_t g = 0; g < base_lrs_.size(); ++g)
    lrs.push_back(phase.steps[g](optimizer_->lr(g), base_lrs_[g], step - phase.milestone));
  check_rates(lrs, step);
  set_rates(step, std::move(lrs));
}

void LambdaScheduler::restart() {
  const auto entered = enter("step");
  if (!restart_rule_ || phases_.size() > 1 || chain_length() > 1)  // a composite restarts only parts it made
    fail(Status::Internal, "the '", name_, "' schedule cannot be restarted at a milestone");
  const ScheduleRule rule = restart_rule_();
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(rule(base, 0));
  check_rates(lrs, 0);
  set_rates(0, std::move(lrs));
}

LambdaScheduler::Phase LambdaScheduler::first_phase_again(const std::vector<double>& reset,
                                                          std::vector<double>& lrs) const {
  Phase first = first_phase(chains_, reset);
  lrs = rates(first.rules, base_lrs_, 0, 0);
  return first;
}

void LambdaScheduler::start_again(const std::vector<double>& reset) {
  const auto entered = enter("then");
  std::vector<double> lrs;
  phases_[0] = first_phase_again(reset, lrs);
  set_rates(0, std::move(lrs));
}

void LambdaScheduler::require_unstepped(const char* what) const {
  require(step_count() == 0, "a ", what, " is made before the first step; the scheduler has taken ", step_count());
}

void LambdaScheduler::then(int64_t milestone, const std::string& name, const Options& options) {
  const auto entered = enter("then");
  require_unstepped("sequence");
  // A chain leads the sequence as PyTorch 2's SequentialLR([ChainedScheduler(...), ...]) runs it: its
  // parts start again together (step 0 of each from the rate the one before set). It cannot come
  // later: the ChainedScheduler's step takes no step(0).
  require(milestone > phases_.back().milestone, "a sequence's milestones must grow from 1, got ", milestone, " after ",
          phases_.back().milestone);
  if (name == kPlateauSchedule)
    fail(Status::InvalidArgument, "PyTorch's SequentialLR does not take a ", kPlateauSchedule, " schedule");
  if (name == kOneCycleSchedule || name == kCyclicSchedule)
    fail(Status::Internal, "the ", name, " scheduler joins a sequence through schedule_then (scheduler_composites.h)");
  const Schedule schedule = named_schedule(name, options, optimizer_->default_lr());
  note_form(schedule);
  const ScheduleRule rule = restarted_schedule_rule(name, options, optimizer_->default_lr());
  // PyTorch's SequentialLR sets each group's rate to its initial_lr, then makes the first schedule's
  // step 0 again from there (the same rates, unless the schedule was made after another moved them).
  std::vector<double> lrs;
  Phase first = first_phase_again(base_lrs_, lrs);
  const size_t groups = base_lrs_.size();
  phases_.push_back(
      {milestone, std::vector<ScheduleRule>(groups, rule),
       schedule.closed_form ? std::vector<Schedule::Next>{} : std::vector<Schedule::Next>(groups, schedule.next)});
  phases_[0] = std::move(first);
  name_ += "," + name + "@" + std::to_string(milestone);
  settings_.emplace_back(name, scheduler_option_table().read(options));
  set_rates(0, std::move(lrs));
}

void LambdaScheduler::chain(const std::string& name, const Options& options) {
  const auto entered = enter("chain");
  require_unstepped("chain");
  if (phases_.size() > 1)  // a sequence inside a chain: schedule_chain makes a SchedulerChain over it
    fail(Status::Internal, "the sequence '", name_, "' is chained through schedule_chain (scheduler_composites.h)");
  if (name == kPlateauSchedule)
    fail(Status::InvalidArgument, "PyTorch's ChainedScheduler steps without a metric: a ", kPlateauSchedule,
         " schedule cannot be chained");
  if (name == kOneCycleSchedule || name == kCyclicSchedule)
    fail(Status::Internal, "the ", name, " scheduler joins a chain through schedule_chain (scheduler_composites.h)");
  require(chain_length() < kMaxChainedSchedules, "a chain holds at most ", kMaxChainedSchedules, " schedules");
  const std::vector<Schedule> added = named_group_schedules(name, options, optimizer_->default_lr(), base_lrs_.size());
  std::vector<std::vector<Schedule>> chains = chains_;
  for (size_t g = 0; g < chains.size(); ++g) chains[g].push_back(added[g]);
  walks_ = true;  // a chain is walked
  Phase phase = first_phase(chains, made_lrs_);
  // Made on the optimizer, the new schedule sets its step 0 from the rate the chain set: checked first.
  std::vector<double> lrs = rates(phase.rules, base_lrs_, 0, 0);
  chains_ = std::move(chains);
  phases_[0] = std::move(phase);
  name_ += "+" + name;
  settings_.emplace_back(name, scheduler_option_table().read(options));
  set_rates(0, std::move(lrs));
}

void LambdaScheduler::check_state(const SchedulerState& state) const {
  const auto running = running_callbacks();
  check_state_shape(state);
  require(state.step >= 0, "a scheduler state needs a step >= 0, got ", state.step);
  check_finite_rates(state.base_lrs, "base learning rates");
  if (!state.lrs.empty() || !state.last_lrs.empty()) {
    check_saved_rates(state);  // resumed from as PyTorch does: nothing is computed
    return;
  }
  // An older state's rates are computed at its step. PyTorch continues a chainable recursion from the rate it saved;
  // here the rate is computed anew from step 0, about 50 ns a step: a bound keeps a load from running without end.
  require(!walks_ || state.step <= kMaxWalkedStep, "the '", name_, "' schedule is computed step by step from ",
          "its start, and a scheduler state's step must then be at most ", kMaxWalkedStep, ", got ", state.step);
  (void)lrs_at(state.base_lrs, state.step);  // a schedule that fails at that step fails here, before any change
}

void LambdaScheduler::load_state(const SchedulerState& state) {
  const auto entered = enter("loading a scheduler's state");
  check_state(state);
  base_lrs_ = state.base_lrs;
  if (state.lrs.empty())
    apply(state.step);
  else
    restore_rates(state);
}

}  // namespace acc
