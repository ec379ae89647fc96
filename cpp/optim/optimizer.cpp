#include "optim/optimizer.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <set>

#include "common/error.h"

namespace acc {
namespace {

const std::set<std::string>& keys_for(const std::string& algorithm) {
  static const std::set<std::string> sgd = {"lr", "weight_decay", "momentum", "dampening", "nesterov"};
  static const std::set<std::string> adam = {"lr", "weight_decay", "beta1", "beta2", "eps", "amsgrad"};
  if (algorithm == "sgd") return sgd;
  if (algorithm == "adam" || algorithm == "adamw") return adam;
  fail(Status::InvalidArgument, "unknown optimizer '", algorithm, "' (known: sgd, adam, adamw)");
}

}  // namespace

std::vector<at::Tensor> Optimizer::gradients() {
  std::vector<at::Tensor> grads;
  for (auto& group : impl().param_groups())
    for (auto& p : group.params())
      if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

TorchOptimizer::TorchOptimizer(std::shared_ptr<Model> model, const std::string& algorithm, const Options& options)
    : model_(std::move(model)), algorithm_(algorithm), options_(options) {
  require(options.kind() == OptionsKind::Optimizer, "optimizer options must be of kind optimizer, got ",
          options_kind_name(options.kind()));
  auto defaults = make_options(options_);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(model_->trainable_parameters());
  if (algorithm_ == "sgd")
    impl_ = std::make_unique<torch::optim::SGD>(groups, static_cast<torch::optim::SGDOptions&>(*defaults));
  else if (algorithm_ == "adam")
    impl_ = std::make_unique<torch::optim::Adam>(groups, static_cast<torch::optim::AdamOptions&>(*defaults));
  else
    impl_ = std::make_unique<torch::optim::AdamW>(groups, static_cast<torch::optim::AdamWOptions&>(*defaults));
}

std::unique_ptr<torch::optim::OptimizerOptions> TorchOptimizer::make_options(const Options& o) const {
  const auto& allowed = keys_for(algorithm_);
  for (const auto& key : o.keys_set())
    require(allowed.count(key), "option '", key, "' does not apply to the ", algorithm_, " optimizer");
  const double lr = o.get_double("lr");
  if (algorithm_ == "sgd") {
    torch::optim::SGDOptions sgd(lr);
    sgd.momentum(o.get_double("momentum", 0.0))
        .dampening(o.get_double("dampening", 0.0))
        .weight_decay(o.get_double("weight_decay", 0.0))
        .nesterov(o.get_bool("nesterov", false));
    require(!sgd.nesterov() || (sgd.momentum() > 0 && sgd.dampening() == 0),
            "nesterov momentum requires momentum > 0 and dampening = 0");
    return std::make_unique<torch::optim::SGDOptions>(sgd);
  }
  const auto betas = std::make_tuple(o.get_double("beta1", 0.9), o.get_double("beta2", 0.999));
  require(std::get<0>(betas) < 1.0 && std::get<1>(betas) < 1.0, "beta1 and beta2 must be below 1");
  if (algorithm_ == "adam") {
    torch::optim::AdamOptions adam(lr);
    adam.betas(betas).eps(o.get_double("eps", 1e-8)).weight_decay(o.get_double("weight_decay", 0.0)).amsgrad(
        o.get_bool("amsgrad", false));
    return std::make_unique<torch::optim::AdamOptions>(adam);
  }
  torch::optim::AdamWOptions adamw(lr);
  adamw.betas(betas).eps(o.get_double("eps", 1e-8)).weight_decay(o.get_double("weight_decay", 1e-2)).amsgrad(
      o.get_bool("amsgrad", false));
  return std::make_unique<torch::optim::AdamWOptions>(adamw);
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
  require(!stepped_, "parameter groups can only be added before the first step");
  require(!names.empty(), "a parameter group needs at least one parameter name");
  Options merged = options_;
  for (const auto& key : overrides.keys_set()) merged.set_from_text(key, overrides.get_text(key));

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
  impl_->add_param_group(torch::optim::OptimizerParamGroup(moved, make_options(merged)));
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

void TorchOptimizer::set_lr(size_t group, double lr) {
  check_group(group);
  require(std::isfinite(lr) && lr >= 0, "learning rate must be a finite number >= 0, got ", lr);
  impl_->param_groups()[group].options().set_lr(lr);
}

void TorchOptimizer::step() {
  at::NoGradGuard no_grad;
  impl_->step();
  stepped_ = true;
}

void TorchOptimizer::zero_grad() {
  for (auto& group : impl_->param_groups())
    for (auto& p : group.params())
      if (p.grad().defined()) p.mutable_grad().reset();
}

}  // namespace acc
