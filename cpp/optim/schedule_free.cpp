#include "optim/schedule_free.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "optim/rule_helpers.h"

namespace acc {
namespace {

// A group's step k+1 as the package computes it (Python's floats: its ** is libm's pow): the
// warmed-up rate, the averaging coefficient, and the sums the group keeps after it.
struct GroupStep {
  double lr;          // the warmed-up rate
  double ckp1;        // the weight of z in y's interpolation: weight / weight_sum
  double lr_max;      // the largest rate so far, this one included
  double weight_sum;  // the averaging weights so far, this one included
};

GroupStep plan_group(double base_lr, const ScheduleFreeAveraging& a, const ScheduleFreeProgress& progress) {
  const int64_t k = progress.k;
  const double sched = k < a.warmup_steps ? static_cast<double>(k + 1) / static_cast<double>(a.warmup_steps) : 1.0;
  const double lr = base_lr * sched;
  const double lr_max = std::max(lr, progress.lr_max);
  const double weight = std::pow(static_cast<double>(k + 1), a.r) * std::pow(lr_max, a.weight_lr_power);
  // Where Python's ** raises (0 to a negative power), the step fails before anything changes.
  require(std::isfinite(weight), "the schedule-free averaging weight (step ", k + 1, ")^r * (max rate ", lr_max,
          ")^weight_lr_power is ", weight, ": with weight_lr_power < 0 the rate must not be 0");
  const double weight_sum = progress.weight_sum + weight;
  // The package catches the ZeroDivisionError of a zero sum (every rate so far 0) as 0.
  return {lr, weight_sum == 0.0 ? 0.0 : weight / weight_sum, lr_max, weight_sum};
}

// The interpolation between x and z: AdamW's beta1, SGD's momentum.
double beta_of(const AdamWScheduleFreeOptions& o) { return std::get<0>(o.betas()); }
double beta_of(const SGDScheduleFreeOptions& o) { return o.momentum(); }

template <class Options>
bool group0_train_mode(const torch::optim::Optimizer& optimizer) {
  const auto& groups = optimizer.param_groups();
  return !groups.empty() && static_cast<const Options&>(groups[0].options()).progress().train_mode;
}

// Every group's step, planned before any changes: every gradient dense, every weight finite. A group
// that has no state yet (added after train()) takes group 0's mode, train (checked before): the
// package would leave it flagged eval, and eval() would then skip it.
template <class Options>
std::vector<GroupStep> plan_step(torch::optim::Optimizer& optimizer, const char* rule) {
  std::vector<GroupStep> plan;
  for (auto& group : optimizer.param_groups()) {
    auto& o = static_cast<Options&>(group.options());
    bool has_state = false;
    for (const auto& p : group.params()) {
      if (p.grad().defined()) dense_grad(p, rule);
      has_state = has_state || optimizer.state().count(compat::optimizer_state_key(p)) > 0;
    }
    plan.push_back(plan_group(o.lr(), o.averaging(), o.progress()));
    if (!has_state) o.progress().train_mode = true;
  }
  return plan;
}

// Records a group's planned step in its progress (k advances after its parameters' steps).
void commit(ScheduleFreeProgress& progress, const GroupStep& s) {
  progress.scheduled_lr = s.lr;
  progress.lr_max = s.lr_max;
  progress.weight_sum = s.weight_sum;
}

// One step of every group, as both optimizers take it: group 0 in train mode (the package checks it
// alone, before the closure), the groups planned, then in each group the parameters with a gradient
// get their state (`make(p, options)`, all before any steps, as the package does) and are stepped by
// the rule `group_rule(options, k, planned step)` returns for the group.
template <class Options, class Make, class GroupRule>
at::Tensor step_groups(torch::optim::Optimizer& optimizer, const torch::optim::Optimizer::LossClosure& closure,
                       const char* name, const char* rule, Make&& make, GroupRule&& group_rule) {
  require(optimizer.param_groups().empty() || group0_train_mode<Options>(optimizer), "the ", name,
          " optimizer is in eval mode: switch it to training before a step (acc_optimizer_set_training(opt, 1), the "
          "package's train()) and back (0, its eval()) before evaluating or saving the averaged weights, as "
          "schedulefree requires");
  return with_closure(closure, [&] {
    const std::vector<GroupStep> plan = plan_step<Options>(optimizer, rule);
    for (size_t g = 0; g < plan.size(); ++g) {
      auto& group = optimizer.param_groups()[g];
      auto& o = static_cast<Options&>(group.options());
      const int64_t k = o.progress().k;
      commit(o.progress(), plan[g]);
      std::vector<std::pair<at::Tensor, ScheduleFreeParamState*>> active;
      for (auto& p : group.params())
        if (p.grad().defined())
          active.emplace_back(p, &state_of<ScheduleFreeParamState>(optimizer, p, [&] { return make(p, o); }));
      const auto step_parameter = group_rule(o, k, plan[g]);
      for (auto& [y, state] : active) step_parameter(y, *state);
      o.progress().k = k + 1;
    }
  });
}

// Moves each group not in `train` mode: parameters with a state go toward z (eval: x = y + (z - y)
// (1 - 1/beta); train: y = x + (z - x)(1 - beta)).
template <class Options>
void switch_mode(torch::optim::Optimizer& optimizer, bool train) {
  at::NoGradGuard no_grad;
  for (auto& group : optimizer.param_groups()) {
    auto& options = static_cast<Options&>(group.options());
    if (options.progress().train_mode == train) continue;
    const double beta = beta_of(options), weight = train ? 1 - beta : 1 - 1 / beta;
    for (auto& p : group.params()) {
      auto it = optimizer.state().find(compat::optimizer_state_key(p));
      if (it != optimizer.state().end())
        p.lerp_(static_cast<ScheduleFreeParamState&>(*it->second).z().to(p.device()), weight);
    }
    options.progress().train_mode = train;
  }
}

}  // namespace

AdamWScheduleFree::AdamWScheduleFree(std::vector<torch::optim::OptimizerParamGroup> groups,
                                     const AdamWScheduleFreeOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<AdamWScheduleFreeOptions>(defaults)) {}

bool AdamWScheduleFree::train_mode() const { return group0_train_mode<AdamWScheduleFreeOptions>(*this); }

void AdamWScheduleFree::set_train_mode(bool train) { switch_mode<AdamWScheduleFreeOptions>(*this, train); }

at::Tensor AdamWScheduleFree::step(LossClosure closure) {
  using Options = AdamWScheduleFreeOptions;
  const auto make = [](const at::Tensor& p, const Options& o) {
    auto fresh = std::make_unique<ScheduleFreeParamState>();
    fresh->z(p.clone(at::MemoryFormat::Preserve));
    fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
    if (o.inner_momentum() != 0) fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
    return fresh;
  };
  const auto group_rule = [](const Options& o, int64_t k, const GroupStep& s) {
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    const double eps = o.eps(), decay = o.weight_decay(), inner = o.inner_momentum();
    const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(k + 1));
    const double bias_correction1 = inner != 0 ? 1 - std::pow(inner, static_cast<double>(k + 1)) : 0.0;
    return [=](const at::Tensor& y, ScheduleFreeParamState& st) {
      at::Tensor grad = y.grad();
      st.exp_avg_sq().mul_(beta2).addcmul_(grad, grad, 1 - beta2);
      const at::Tensor denom = st.exp_avg_sq().div(bias_correction2).sqrt_().add_(eps);
      at::Tensor normalized;
      if (inner != 0) {
        st.exp_avg().mul_(inner).add_(grad, 1 - inner);
        normalized = st.exp_avg().div(bias_correction1).div_(denom);
      } else {
        normalized = grad.div_(denom);  // the package normalizes the gradient in place
      }
      if (decay != 0) normalized.add_(y, decay);  // weight decay taken at y
      // y moves toward z and along the step without forming x.
      y.lerp_(st.z(), s.ckp1);
      y.add_(normalized, s.lr * (beta1 * (1 - s.ckp1) - 1));
      st.z().sub_(normalized, s.lr);
    };
  };
  return step_groups<Options>(*this, closure, "adamw_schedule_free", "AdamWScheduleFree", make, group_rule);
}

SGDScheduleFree::SGDScheduleFree(std::vector<torch::optim::OptimizerParamGroup> groups,
                                 const SGDScheduleFreeOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<SGDScheduleFreeOptions>(defaults)) {}

bool SGDScheduleFree::train_mode() const { return group0_train_mode<SGDScheduleFreeOptions>(*this); }

void SGDScheduleFree::set_train_mode(bool train) { switch_mode<SGDScheduleFreeOptions>(*this, train); }

at::Tensor SGDScheduleFree::step(LossClosure closure) {
  using Options = SGDScheduleFreeOptions;
  const auto make = [](const at::Tensor& p, const Options&) {
    auto fresh = std::make_unique<ScheduleFreeParamState>();
    fresh->z(p.clone(at::MemoryFormat::Preserve));
    return fresh;
  };
  const auto group_rule = [](const Options& o, int64_t, const GroupStep& s) {
    const double momentum = o.momentum(), decay = o.weight_decay();
    return [=](const at::Tensor& y, ScheduleFreeParamState& st) {
      at::Tensor grad = y.grad();
      if (decay != 0) grad.add_(y, decay);  // in place, as the package does
      y.lerp_(st.z(), s.ckp1);
      y.add_(grad, s.lr * (momentum * (1 - s.ckp1) - 1));
      st.z().sub_(grad, s.lr);
    };
  };
  return step_groups<Options>(*this, closure, "sgd_schedule_free", "SGDScheduleFree", make, group_rule);
}

}  // namespace acc
