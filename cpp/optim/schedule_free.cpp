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

// Group 0 (the package checks it alone) must be in train mode, before the closure runs.
template <class Options>
void require_train_mode(const torch::optim::Optimizer& optimizer, const char* name) {
  const auto& groups = optimizer.param_groups();
  if (groups.empty()) return;
  require(static_cast<const Options&>(groups[0].options()).progress().train_mode, "the ", name,
          " optimizer is in eval mode: switch it to training before a step (acc_optimizer_set_training(opt, 1), the "
          "package's train()) and back (0, its eval()) before evaluating or saving the averaged weights, as "
          "schedulefree requires");
}

// Every group's step, planned before any changes: every gradient dense, every weight finite. A group
// that has no state yet (added after train()) takes group 0's mode: the package would leave it
// flagged eval, and eval() would then skip it.
template <class Options>
std::vector<GroupStep> plan_step(torch::optim::Optimizer& optimizer, const char* rule) {
  std::vector<GroupStep> plan;
  auto& groups = optimizer.param_groups();
  for (auto& group : groups) {
    const auto& o = static_cast<const Options&>(group.options());
    for (const auto& p : group.params())
      if (p.grad().defined()) dense_grad(p, rule);
    plan.push_back(plan_group(o.lr(), o.averaging(), o.progress()));
  }
  const bool training = !groups.empty() && static_cast<const Options&>(groups[0].options()).progress().train_mode;
  for (auto& group : groups) {
    bool has_state = false;
    for (const auto& p : group.params())
      has_state = has_state || optimizer.state().count(compat::optimizer_state_key(p)) > 0;
    if (!has_state) static_cast<Options&>(group.options()).progress().train_mode = training;
  }
  return plan;
}

// Records a group's planned step in its progress (k advances after its parameters' steps).
void commit(ScheduleFreeProgress& progress, const GroupStep& s) {
  progress.scheduled_lr = s.lr;
  progress.lr_max = s.lr_max;
  progress.weight_sum = s.weight_sum;
}

// The parameters with a gradient in `group`, each given a state (z a copy of the parameter, the
// moments zero) before any of them is stepped, as the package does.
template <class Make>
std::vector<at::Tensor> active_parameters(torch::optim::Optimizer& optimizer, torch::optim::OptimizerParamGroup& group,
                                          Make&& make) {
  std::vector<at::Tensor> active;
  for (auto& p : group.params()) {
    if (!p.grad().defined()) continue;
    state_of<ScheduleFreeParamState>(optimizer, p, [&] { return make(p); });
    active.push_back(p);
  }
  return active;
}

ScheduleFreeParamState& param_state(torch::optim::Optimizer& optimizer, const at::Tensor& p) {
  return static_cast<ScheduleFreeParamState&>(*optimizer.state().at(compat::optimizer_state_key(p)));
}

// Moves each group not in `train` mode: parameters with a state go toward z by weight(group).
template <class Options, class Weight>
void switch_mode(torch::optim::Optimizer& optimizer, bool train, Weight&& weight) {
  at::NoGradGuard no_grad;
  for (auto& group : optimizer.param_groups()) {
    auto& options = static_cast<Options&>(group.options());
    if (options.progress().train_mode == train) continue;
    const double w = weight(options);
    for (auto& p : group.params()) {
      auto it = optimizer.state().find(compat::optimizer_state_key(p));
      if (it != optimizer.state().end())
        p.lerp_(static_cast<ScheduleFreeParamState&>(*it->second).z().to(p.device()), w);
    }
    options.progress().train_mode = train;
  }
}

template <class Options>
bool group0_train_mode(const torch::optim::Optimizer& optimizer) {
  const auto& groups = optimizer.param_groups();
  return !groups.empty() && static_cast<const Options&>(groups[0].options()).progress().train_mode;
}

}  // namespace

AdamWScheduleFree::AdamWScheduleFree(std::vector<torch::optim::OptimizerParamGroup> groups,
                                     const AdamWScheduleFreeOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<AdamWScheduleFreeOptions>(defaults)) {}

bool AdamWScheduleFree::train_mode() const { return group0_train_mode<AdamWScheduleFreeOptions>(*this); }

// eval: x = y + (z - y)(1 - 1/beta1); train: y = x + (z - x)(1 - beta1).
void AdamWScheduleFree::set_train_mode(bool train) {
  switch_mode<AdamWScheduleFreeOptions>(*this, train, [&](const AdamWScheduleFreeOptions& o) {
    const double beta1 = std::get<0>(o.betas());
    return train ? 1 - beta1 : 1 - 1 / beta1;
  });
}

at::Tensor AdamWScheduleFree::step(LossClosure closure) {
  require_train_mode<AdamWScheduleFreeOptions>(*this, "adamw_schedule_free");
  return with_closure(closure, [&] {
    const std::vector<GroupStep> plan = plan_step<AdamWScheduleFreeOptions>(*this, "AdamWScheduleFree");
    for (size_t g = 0; g < plan.size(); ++g) {
      auto& group = param_groups()[g];
      auto& o = static_cast<AdamWScheduleFreeOptions&>(group.options());
      const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
      const double eps = o.eps(), decay = o.weight_decay(), inner = o.inner_momentum();
      const int64_t k = o.progress().k;
      const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(k + 1));
      const double bias_correction1 = inner != 0 ? 1 - std::pow(inner, static_cast<double>(k + 1)) : 0.0;
      const GroupStep& s = plan[g];
      commit(o.progress(), s);
      const auto active = active_parameters(*this, group, [&](const at::Tensor& p) {
        auto fresh = std::make_unique<ScheduleFreeParamState>();
        fresh->z(p.clone(at::MemoryFormat::Preserve));
        fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        if (inner != 0) fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        return fresh;
      });
      for (const auto& y : active) {
        ScheduleFreeParamState& st = param_state(*this, y);
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
      }
      o.progress().k = k + 1;
    }
  });
}

SGDScheduleFree::SGDScheduleFree(std::vector<torch::optim::OptimizerParamGroup> groups,
                                 const SGDScheduleFreeOptions& defaults)
    : torch::optim::Optimizer(std::move(groups), std::make_unique<SGDScheduleFreeOptions>(defaults)) {}

bool SGDScheduleFree::train_mode() const { return group0_train_mode<SGDScheduleFreeOptions>(*this); }

void SGDScheduleFree::set_train_mode(bool train) {
  switch_mode<SGDScheduleFreeOptions>(
      *this, train, [&](const SGDScheduleFreeOptions& o) { return train ? 1 - o.momentum() : 1 - 1 / o.momentum(); });
}

at::Tensor SGDScheduleFree::step(LossClosure closure) {
  require_train_mode<SGDScheduleFreeOptions>(*this, "sgd_schedule_free");
  return with_closure(closure, [&] {
    const std::vector<GroupStep> plan = plan_step<SGDScheduleFreeOptions>(*this, "SGDScheduleFree");
    for (size_t g = 0; g < plan.size(); ++g) {
      auto& group = param_groups()[g];
      auto& o = static_cast<SGDScheduleFreeOptions&>(group.options());
      const double momentum = o.momentum(), decay = o.weight_decay();
      const int64_t k = o.progress().k;
      const GroupStep& s = plan[g];
      commit(o.progress(), s);
      const auto active = active_parameters(*this, group, [&](const at::Tensor& p) {
        auto fresh = std::make_unique<ScheduleFreeParamState>();
        fresh->z(p.clone(at::MemoryFormat::Preserve));
        return fresh;
      });
      for (const auto& y : active) {
        ScheduleFreeParamState& st = param_state(*this, y);
        at::Tensor grad = y.grad();
        if (decay != 0) grad.add_(y, decay);  // in place, as the package does
        y.lerp_(st.z(), s.ckp1);
        y.add_(grad, s.lr * (momentum * (1 - s.ckp1) - 1));
        st.z().sub_(grad, s.lr);
      }
      o.progress().k = k + 1;
    }
  });
}

}  // namespace acc
