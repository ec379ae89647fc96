#include "schedule/scheduler_composites.h"

#include <algorithm>
#include <iterator>
#include <optional>

#include "common/error.h"
#include "optim/group_hyperparameters.h"
#include "schedule/composite_python_state.h"
#include "schedule/cycling_scheduler.h"
#include "schedule/named_schedules.h"
#include "schedule/schedule_options.h"

namespace acc {
namespace {

bool has_own_scheduler(const std::string& name) { return name == kOneCycleSchedule || name == kCyclicSchedule; }

const CyclingScheduler* as_cycling(const std::shared_ptr<IndexedScheduler>& part) {
  return dynamic_cast<const CyclingScheduler*>(part.get());
}

// What a part's making may change on the optimizer, put back if the part or the composite's own
// construction fails.
class GroupSnapshot {
 public:
  explicit GroupSnapshot(Optimizer& optimizer) : optimizer_(optimizer), momentum_key_(cycled_momentum_key(optimizer)) {
    for (size_t g = 0; g < optimizer.num_param_groups(); ++g) {
      lrs_.push_back(optimizer.lr(g));
      initial_lrs_.push_back(optimizer.initial_lr(g));
      if (!momentum_key_.empty()) momenta_.push_back(group_hyperparameter(optimizer, g, momentum_key_));
    }
  }
  void restore() const {
    for (size_t g = 0; g < lrs_.size(); ++g) {
      optimizer_.set_lr(g, lrs_[g]);
      // A part is only ever made after the first, which set every initial_lr.
      if (initial_lrs_[g]) optimizer_.set_initial_lr(g, *initial_lrs_[g], true);
      if (!momentum_key_.empty()) set_cycled_momentum(optimizer_, g, momenta_[g]);
    }
  }

 private:
  Optimizer& optimizer_;
  std::string momentum_key_;
  std::vector<double> lrs_;
  std::vector<std::optional<double>> initial_lrs_;
  std::vector<double> momenta_;
};

// PyTorch's parts read some of their numbers from the optimizer's groups, which the part made last
// writes: refused where that would change a part already made.
void check_part_may_join(const std::vector<std::shared_ptr<IndexedScheduler>>& parts, const std::string& name,
                         const Options& options) {
  if (!has_own_scheduler(name)) return;
  for (const auto& part : parts) {
    if (part->name() != kOneCycleSchedule) continue;
    if (name == kOneCycleSchedule)
      fail(Status::Unsupported, "a sequence or chain holds one ", kOneCycleSchedule, " schedule (PyTorch's second ",
           "OneCycleLR rewrites the initial_lr, max_lr and min_lr that the first one reads from the optimizer)");
    const bool cycles = scheduler_option_table().read(options).cycle_momentum;
    if (cycles && as_cycling(part)->cycles_momentum())
      fail(Status::Unsupported, "a ", kCyclicSchedule, " schedule cycling the momentum cannot follow a ",
           kOneCycleSchedule, " schedule that cycles it in a sequence or chain (PyTorch's CyclicLR rewrites the ",
           "max_momentum and base_momentum that the OneCycleLR reads from the optimizer); set cycle_momentum false ",
           "on one of them");
  }
}

// `scheduler` as a sequence's or chain's first part: a LambdaScheduler (a chain of rules leading a
// sequence, as in PyTorch 2; a sequence of rules leading a chain) or a scheduler of its own.
std::shared_ptr<IndexedScheduler> as_first_part(const std::shared_ptr<Scheduler>& scheduler) {
  auto first = std::dynamic_pointer_cast<IndexedScheduler>(scheduler);
  if (!first) fail(Status::Internal, "the ", scheduler->name(), " scheduler cannot lead a sequence or chain");
  return first;
}

// Whether schedule `name` joining `scheduler` (as a chain's part if `chaining`) makes a composite
// over it: where either is a scheduler of its own, or a sequence of rules is chained (PyTorch's
// ChainedScheduler steps a SequentialLR as any other part). Otherwise `scheduler` takes it (a
// LambdaScheduler of rules, a composite made before, or one that refuses).
bool makes_composite(const Scheduler& scheduler, const std::string& name, bool chaining) {
  if (dynamic_cast<const CyclingScheduler*>(&scheduler)) return true;
  const auto* rules = dynamic_cast<const LambdaScheduler*>(&scheduler);
  return rules && (has_own_scheduler(name) || (chaining && rules->is_sequence()));
}

}  // namespace

std::shared_ptr<Scheduler> schedule_then(const std::shared_ptr<Scheduler>& scheduler, int64_t milestone,
                                         const std::string& name, const Options& options) {
  scheduler->refuse_from_callbacks("then");
  if (!makes_composite(*scheduler, name, false)) {
    scheduler->then(milestone, name, options);
    return scheduler;
  }
  auto sequence = std::make_shared<SchedulerSequence>(as_first_part(scheduler));
  sequence->then(milestone, name, options);
  return sequence;
}

std::shared_ptr<Scheduler> schedule_chain(const std::shared_ptr<Scheduler>& scheduler, const std::string& name,
                                          const Options& options) {
  scheduler->refuse_from_callbacks("chain");
  if (!makes_composite(*scheduler, name, true)) {
    scheduler->chain(name, options);
    return scheduler;
  }
  auto chain = std::make_shared<SchedulerChain>(as_first_part(scheduler));
  chain->chain(name, options);
  return chain;
}

// ---- SchedulerComposite ----

SchedulerComposite::SchedulerComposite(std::shared_ptr<IndexedScheduler> first, const char* separator)
    : optimizer_(first->optimizer()), name_(first->name()), separator_(separator) {
  if (first->step_count() != 0)
    fail(Status::InvalidArgument, "a sequence or chain is made before the first step; the scheduler has taken ",
         first->step_count());
  for (size_t g = 0; g < optimizer_->num_param_groups(); ++g) last_lrs_.push_back(first->last_lr(g));
  parts_.push_back(std::move(first));
}

void SchedulerComposite::refuse_from_callbacks(const char* call) const {
  Scheduler::refuse_from_callbacks(call);
  for (const auto& part : parts_) part->refuse_from_callbacks(call);
}

void SchedulerComposite::require_unstepped(const char* what) const {
  require(step_ == 0, "a ", what, " is made before the first step; the scheduler has taken ", step_);
}

void SchedulerComposite::add_part(const std::string& name, const Options& options, const std::string& suffix,
                                  const std::function<void()>& then_construct) {
  if (name == kPlateauSchedule)
    fail(Status::InvalidArgument, "PyTorch's SequentialLR and ChainedScheduler step without a metric: a ",
         kPlateauSchedule, " schedule cannot be part of one");
  check_part_may_join(parts_, name, options);
  const GroupSnapshot before(*optimizer_);
  try {
    auto part = std::dynamic_pointer_cast<IndexedScheduler>(make_scheduler(optimizer_, name, options));
    if (!part) fail(Status::Internal, "the ", name, " schedule has no step count to sequence or chain");
    then_construct();
    parts_.push_back(std::move(part));
  } catch (...) {
    before.restore();
    throw;
  }
  name_ += separator_ + name + suffix;
}

void SchedulerComposite::note_step(int64_t step) {
  step_ = step;
  last_lrs_ = group_lrs(*optimizer_);
}

SchedulerState SchedulerComposite::state() const {
  SchedulerState state = parts_.front()->state();
  state.step = step_;
  state.schedule = name_;
  state.lrs = group_lrs(*optimizer_);
  state.last_lrs = last_lrs_;
  return state;
}

void SchedulerComposite::check_state(const SchedulerState& state) const {
  check_schedule_name(state);
  require_groups_unchanged("loading a scheduler's state");
  require(!state.plateau, "the state is a ", kPlateauSchedule, " scheduler's, not this schedule's");
  require(state.step >= 0, "a scheduler state needs a step >= 0, got ", state.step);
  // Resumed from the rates it saved, as PyTorch's optimizer state holds them: a state without them
  // (from before they were saved) cannot be this composite's. The parts check them (part_state);
  // the base rates are each part's own.
  require(!state.lrs.empty(), "the '", name_, "' schedule resumes from saved rates, which the state lacks");
}

PythonPartState SchedulerComposite::python_part(size_t index, int64_t steps_in) const {
  for (const auto& part : parts_) {
    const size_t schedules = python_schedule_count(part->name());
    if (index < schedules) return part->python_part(index, steps_in);
    index -= schedules;
  }
  fail(Status::Internal, "the '", name_, "' schedule has fewer parts than asked for");
}

SchedulerState SchedulerComposite::part_state(const IndexedScheduler& part, const SchedulerState& state,
                                              int64_t steps_in) {
  SchedulerState own = part.state();
  own.step = steps_in;
  own.lrs = state.lrs;
  own.last_lrs = state.last_lrs;
  return own;
}

// ---- SchedulerSequence ----

size_t SchedulerSequence::part_at(int64_t step) const {
  return static_cast<size_t>(
      std::distance(milestones_.begin(), std::upper_bound(milestones_.begin(), milestones_.end(), step)));
}

void SchedulerSequence::then(int64_t milestone, const std::string& name, const Options& options) {
  const auto entered = enter("then");
  require_unstepped("sequence");
  const int64_t last = milestones_.empty() ? 0 : milestones_.back();
  require(milestone > last, "a sequence's milestones must grow from 1, got ", milestone, " after ", last);
  if (!has_own_scheduler(name) && name != kPlateauSchedule)
    (void)restarted_schedule_rule(name, options, optimizer_->default_lr());  // refuses what cannot restart
  add_part(name, options, "@" + std::to_string(milestone), [&] {
    // SequentialLR's construction: every group's rate back to its initial_lr (a one_cycle's, if one
    // was made), then the first part's step 0 again from there.
    const std::vector<double> reset = initial_lrs(*optimizer_);
    for (size_t g = 0; g < reset.size(); ++g) optimizer_->set_lr(g, reset[g]);
    parts_.front()->start_again(reset);
  });
  milestones_.push_back(milestone);
  note_step(0);
}

void SchedulerSequence::chain(const std::string& name, const Options&) {
  fail(Status::Unsupported, "the sequence '", name_, "' cannot be chained with '", name, "' here: a sequence ",
       "with a one_cycle or cyclic is not built into a chain; a sequence of schedules with a rule is");
}

void SchedulerSequence::step() {
  const auto entered = enter("step");
  const int64_t next = step_ + 1;
  const size_t index = part_at(next);
  if (index > 0 && milestones_[index - 1] == next)
    parts_[index]->restart();  // PyTorch's step(0)
  else
    parts_[index]->step();
  note_step(next);
}

void SchedulerSequence::check_state(const SchedulerState& state) const {
  const auto running = running_callbacks();
  SchedulerComposite::check_state(state);
  const size_t index = part_at(state.step);
  parts_[index]->check_state(part_state(*parts_[index], state, state.step - milestone_of(index)));
}

void SchedulerSequence::load_state(const SchedulerState& state) {
  const auto entered = enter("loading a scheduler's state");
  check_state(state);
  const size_t index = part_at(state.step);
  parts_[index]->load_state(part_state(*parts_[index], state, state.step - milestone_of(index)));
  step_ = state.step;
  last_lrs_ = state.last_lrs;
}

// ---- SchedulerChain ----

void SchedulerChain::chain(const std::string& name, const Options& options) {
  const auto entered = enter("chain");
  require_unstepped("chain");
  // ChainedScheduler sets nothing back: the part's making is its step 0, from the rate the chain left.
  add_part(name, options, "", [] {});
  note_step(0);
}

void SchedulerChain::then(int64_t, const std::string& name, const Options&) {
  fail(Status::Unsupported, "the chain '", name_, "' cannot lead a sequence (with '", name, "') here: a chain with ",
       "a one_cycle or cyclic, or with a sequence, is not built into one; a chain of schedules with a rule is");
}

void SchedulerChain::step() {
  const auto entered = enter("step");
  std::vector<double> lrs_before = group_lrs(*optimizer_);  // with the step count, all a rollback needs
  try {
    for (const auto& part : parts_) part->step();
  } catch (...) {
    SchedulerState before;
    before.step = step_;
    before.lrs = std::move(lrs_before);
    before.last_lrs = last_lrs_;
    apply_state(before);
    throw;
  }
  note_step(step_ + 1);
}

void SchedulerChain::check_state(const SchedulerState& state) const {
  const auto running = running_callbacks();
  SchedulerComposite::check_state(state);
  for (const auto& part : parts_) part->check_state(part_state(*part, state, state.step));
}

void SchedulerChain::load_state(const SchedulerState& state) {
  const auto entered = enter("loading a scheduler's state");
  check_state(state);
  apply_state(state);
}

void SchedulerChain::apply_state(const SchedulerState& state) {
  // Each part in turn, as each step runs them (the momentum is the last cycling part's); the rates are the saved ones.
  for (const auto& part : parts_) part->load_state(part_state(*part, state, state.step));
  for (size_t g = 0; g < state.lrs.size(); ++g) optimizer_->set_lr(g, state.lrs[g]);
  step_ = state.step;
  last_lrs_ = state.last_lrs;
}

}  // namespace acc
