#include "optim/optimizer.h"

#include <ATen/Dispatch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "common/compat.h"
#include "common/error.h"
#include "optim/algorithm.h"
#include "optim/fused_rules.h"
#include "optim/lomo.h"
#include "optim/optimizer_state.h"
#include "optim/rule_helpers.h"
#include "optim/schedule_free.h"

namespace acc {
namespace {

// A choice that needs a newer libtorch than the one built against is unsupported, and says so.
void require_pytorch(bool built, const char* what) {
  if (!built)
    fail(Status::Unsupported, what, "; this library was built against ", TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR);
}

}  // namespace

void Optimizer::set_train_mode(bool train) {
  if (auto* modes = dynamic_cast<ScheduleFreeModes*>(&impl())) modes->set_train_mode(train);
}

FusedBackwardOptimizer* Optimizer::fused_backward() { return dynamic_cast<FusedBackwardOptimizer*>(&impl()); }

std::vector<at::Tensor> Optimizer::gradients() {
  std::vector<at::Tensor> grads;
  for (auto& group : impl().param_groups())
    for (auto& p : group.params())
      if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

TorchOptimizer::TorchOptimizer(std::shared_ptr<Model> model, const std::string& algorithm, const Options& options)
    : model_(std::move(model)),
      algorithm_(&optimizer_algorithm(algorithm)),
      options_(options),
      trainable_set_hold_(model_->hold_trainable_set(
          "the model has an optimizer, made over its trainable parameters of the time: add LoRA adapters and unfreeze "
          "parameters before creating it (a parameter added now would never be trained)",
          /*freezing_too=*/false)) {
  require(options.kind() == OptionsKind::Optimizer, "optimizer options must be of kind optimizer, got ",
          options_kind_name(options.kind()));
  require(!model_->estimating_lora_ga(),
          "LoRA-GA's gradients are being estimated (acc_model_begin_lora_ga), without optimizer steps: create the "
          "optimizer after acc_model_add_lora_ga, over the adapters it adds");
  auto defaults = make_options(options_);
  maximize_ = options_.get_bool("maximize", false);
  const bool fused = this->fused();
  const std::optional<bool> foreach = this->foreach ();
  require(!(fused && foreach.value_or(false)), "fused and foreach cannot both be true, as in PyTorch");
  require_pytorch(!fused || compat::kFusedOptimizers, "fused optimizers need PyTorch 2.4 or later");
  // PyTorch 1.13's foreach rules rounded otherwise again and are not written here.
  require_pytorch(!foreach.value_or(false) || compat::kPythonOptimizers2,
                  "foreach=true steps PyTorch 2.x's foreach rules");
  std::vector<at::Tensor> trainable = model_->trainable_parameters();
  // PyTorch refuses an empty list too ("optimizer got an empty parameter list"): its steps would do nothing.
  require(!trainable.empty(), "the model has no trainable parameters (none, or all frozen): an optimizer over them ",
          "would never change anything");
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::move(trainable));
  impl_ = fused ? algorithm_->make_fused_optimizer(std::move(groups), *defaults)
                : algorithm_->make_optimizer(std::move(groups), *defaults);
  require(impl_ != nullptr, "the ", algorithm_->name(), " optimizer has no fused implementation");
  // Rules whose foreach form rounds as their one-tensor form (SGD, RMSprop, Adamax, Adadelta, Rprop)
  // have no choice to make.
  if (auto* choice = dynamic_cast<ForeachChoice*>(impl_.get())) choice->set_foreach(foreach);
  if (auto* rule = dynamic_cast<MaximizeInRule*>(impl_.get())) {
    rule->set_maximize(maximize_);
    maximize_in_rule_ = true;
  }
}

const std::string& TorchOptimizer::algorithm() const { return algorithm_->name(); }

bool TorchOptimizer::elementwise() const { return algorithm_->elementwise(); }

std::unique_ptr<torch::optim::OptimizerOptions> TorchOptimizer::make_options(const Options& o) const {
  const auto& allowed = algorithm_->keys();
  for (const auto& key : o.keys_set()) {
    if (allowed.count(key)) continue;
    std::string list;
    for (const auto& k : allowed) list += (list.empty() ? "" : ", ") + k;
    fail(Status::InvalidArgument, "option '", key, "' does not apply to the ", algorithm(), " optimizer (it takes ",
         list, ")");
  }
  return algorithm_->make_options(o);
}

size_t Optimizer::add_param_group_matching(const std::string& patterns, const Options& overrides) {
  const auto owner = model();
  std::vector<std::string> trainable;  // frozen parameters are in no group
  for (const auto& name : owner->parameter_names_matching(patterns))
    if (owner->find_tensor(name).requires_grad()) trainable.push_back(name);
  require(!trainable.empty(), "every parameter matching '", patterns, "' is frozen");
  add_param_group(trainable, overrides);
  return trainable.size();
}

void TorchOptimizer::add_param_group(const std::vector<std::string>& names, const Options& overrides) {
  if (fused_backward())
    fail(Status::Unsupported, "the ", algorithm(), " optimizer has one parameter group: lomo_optim's optimizers apply ",
         "one rate, weight decay and clipping to every parameter");
  require(!stepped_, "parameter groups can only be added before the first step");
  require(!names.empty(), "a parameter group needs at least one parameter name");
  for (const char* key : {"fused", "maximize", "foreach"})
    require(!overrides.has(key), "'", key, "' is chosen for the whole optimizer, when it is made, not for a group");
  Options merged = options_;
  for (const auto& key : overrides.keys_set()) merged.set_from_text(key, overrides.get_text(key));
  auto options = make_options(merged);  // before anything moves: bad options change nothing

  std::vector<at::Tensor> moved;
  std::set<const c10::TensorImpl*> moving;
  for (const auto& name : names) {
    at::Tensor p = model_->find_tensor(name);
    require(p.requires_grad(), "'", name, "' is not a trainable parameter");
    require(moving.insert(p.unsafeGetTensorImpl()).second, "parameter '", name, "' is listed twice");
    moved.push_back(p);
  }
  for (auto& group : impl_->param_groups()) {
    auto& params = group.params();
    params.erase(std::remove_if(params.begin(), params.end(),
                                [&](const at::Tensor& p) { return moving.count(p.unsafeGetTensorImpl()) > 0; }),
                 params.end());
  }
  // State kept from the start (Adagrad's accumulator) is made again (torch::optim refuses a new
  // group's parameter that has state), from the optimizer's own options: torch's constructor fills
  // every group's accumulators with its initial_accumulator_value, whatever the group says.
  for (const auto& p : moved) impl_->state().erase(compat::optimizer_state_key(p));
  auto as_given = options->clone();
  impl_->add_param_group(torch::optim::OptimizerParamGroup(moved, std::move(options)));
  // Later libtorch releases (2.14 does) merge a new group's options into the optimizer's defaults,
  // taking a field equal to its constructor's default as unset: a group's explicit weight_decay 0,
  // momentum 0 or amsgrad false became the optimizer's. Ours are complete: they stand as given.
  impl_->param_groups().back().set_options(std::move(as_given));
  for (const auto& p : moved)
    if (auto state = algorithm_->initial_state(p, impl_->defaults()))
      impl_->state()[compat::optimizer_state_key(p)] = std::move(state);
}

size_t TorchOptimizer::num_param_groups() const { return impl_->param_groups().size(); }

void TorchOptimizer::check_group(size_t group) const {
  require(group < num_param_groups(), "parameter group ", group, " does not exist (the optimizer has ",
          num_param_groups(), ")");
}

double TorchOptimizer::lr(size_t group) const {
  check_group(group);
  return impl_->param_groups()[group].options().get_lr();
}

std::optional<double> TorchOptimizer::initial_lr(size_t group) const {
  check_group(group);
  return group < initial_lrs_.size() ? initial_lrs_[group] : std::nullopt;
}

void TorchOptimizer::set_initial_lr(size_t group, double lr, bool overwrite) {
  check_group(group);
  if (initial_lrs_.size() <= group) initial_lrs_.resize(group + 1);
  if (overwrite || !initial_lrs_[group]) initial_lrs_[group] = lr;
}

void Optimizer::require_unowned(const char* call) const {
  if (!owner_reason_.empty()) fail(Status::InvalidArgument, call, ": ", owner_reason_);
}

void Optimizer::set_lr_by_hand(size_t group, double lr) {
  require(!(lr < 0), "learning rate must be a finite number >= 0, got ", lr);
  set_lr(group, lr);
}

void TorchOptimizer::set_lr(size_t group, double lr) {
  check_group(group);
  require(std::isfinite(lr), "learning rate must be a finite number, got ", lr);
  impl_->param_groups()[group].options().set_lr(lr);
}

// PyTorch's one-tensor and foreach rules with maximize start by negating the gradient, and negation
// is exact: so for them the gradients are negated in place for the step and given back as they
// were. The fused kernels are handed maximize as PyTorch hands it (MaximizeInRule).
void TorchOptimizer::step() {
  at::NoGradGuard no_grad;
  if (check_gradients_and_placement()) {
    follow_parameters(*this);  // acc_model_to after steps: the state follows (a no-op before any step)
    note_placement();
  }
  // A rate the parameters' dtype cannot hold fails inside the rule (after some state changed).
  for (size_t g = 0; g < rate_limits_.size(); ++g) {
    if (!rate_limits_[g]) continue;  // Adafactor's relative step has no rate
    const double rate = impl_->param_groups()[g].options().get_lr();
    require(!(std::abs(rate) > rate_limits_[g]->first), "parameter group ", g, "'s learning rate ", rate,
            " does not fit the parameters' dtype ", rate_limits_[g]->second);
  }
  if (!maximize_ || maximize_in_rule_) {
    step_rule();
  } else {
    const std::vector<at::Tensor> grads = gradients();
    for (const auto& g : grads) g.neg_();
    try {
      step_rule();
    } catch (...) {
      for (const auto& g : grads) g.neg_();
      throw;
    }
    for (const auto& g : grads) g.neg_();
  }
  stepped_ = true;
}

// A gradient of another dtype or device than its parameter comes from a graph recorded before the
// parameter moved (acc_model_to between forward and backward); the rules' kernels would fail inside
// ATen (an internal assertion), and only after some state changed. One walk over the parameters
// checks that and whether the placement changed, as it runs at every step.
bool TorchOptimizer::check_gradients_and_placement() const {
  size_t i = 0;
  bool changed = false;
  for (const auto& group : impl_->param_groups())
    for (const auto& p : group.params()) {
      const at::Tensor& grad = p.grad();
      if (grad.defined() && (grad.scalar_type() != p.scalar_type() || grad.device() != p.device()))
        refuse_gradient_unlike(p);
      changed = changed || i >= placement_.size() || placement_[i] != std::make_pair(p.scalar_type(), p.device());
      ++i;
    }
  return changed || i != placement_.size();
}

void TorchOptimizer::refuse_gradient_unlike(const at::Tensor& p) const {
  const at::Tensor& grad = p.grad();
  std::string name = "?";
  for (const auto& [n, t] : model_->named_parameters())
    if (t.is_same(p)) name = n;
  fail(Status::InvalidArgument, "parameter '", name, "' is ", p.scalar_type(), " on ", p.device(),
       " but its gradient is ", grad.scalar_type(), " on ", grad.device(),
       ": the gradient comes from a forward made before the model moved (acc_model_to); zero the gradients "
       "(acc_optimizer_zero_grad) and compute them again");
}

void TorchOptimizer::note_placement() {
  placement_.clear();
  rate_limits_.clear();
  for (const auto& group : impl_->param_groups()) {
    std::optional<std::pair<double, at::ScalarType>> limit;
    try {
      (void)group.options().get_lr();
      limit.emplace(std::numeric_limits<double>::max(), at::kDouble);
    } catch (const Error&) {
      // Adafactor's relative step has no rate to check.
    }
    for (const auto& p : group.params()) {
      placement_.emplace_back(p.scalar_type(), p.device());
      const double most = AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.scalar_type(), "rate limit",
                                                          [] { return static_cast<double>(std::numeric_limits<scalar_t>::max()); });
      if (limit && most < limit->first) limit.emplace(most, p.scalar_type());
    }
    rate_limits_.push_back(limit);
  }
}

void TorchOptimizer::step_rule() {
  try {
    impl_->step();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // A hyper-parameter (weight decay, eps, ...) the parameters' dtype cannot hold: the caller's value.
    // (c10::Error, or a std::runtime_error from the rules' scalar conversions.)
    const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
    const std::string what = c10_error ? c10_error->what_without_backtrace() : e.what();
    if (what.find("without overflow") != std::string::npos)
      fail(Status::InvalidArgument, "the ", algorithm(), " step: a hyper-parameter does not fit the parameters' dtype (",
           what, ")");
    throw;
  }
}

void TorchOptimizer::zero_grad() {
  for (auto& group : impl_->param_groups())
    for (auto& p : group.params())
      if (p.grad().defined()) p.mutable_grad().reset();
}

}  // namespace acc
