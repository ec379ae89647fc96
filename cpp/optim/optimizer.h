// Optimizers over a model's parameters, with parameter groups, chosen by name (optim/algorithm.h):
// torch::optim's and torch::optim optimizers of ours.
#pragma once

#include <torch/optim/optimizer.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/options.h"
#include "optim/optimizer_options.h"
#include "model/model.h"

namespace acc {

class OptimizerAlgorithm;
class FusedBackwardOptimizer;

// What the C API and schedulers see of an optimizer; the Accelerator's wrapper is one too.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Moves the named parameters into a new group with the optimizer's options plus `overrides`.
  virtual void add_param_group(const std::vector<std::string>& names, const Options& overrides) = 0;
  // One of optimizer_algorithm's names (optim/algorithm.h).
  virtual const std::string& algorithm() const = 0;
  // Whether each element's update depends only on that element's gradient and state, so that a
  // contiguous slice of the flattened parameters can be stepped on its own (ZeRO sharding keeps
  // state only for its slice). True for all but Adafactor, whose row/column moments span a whole
  // matrix and whose step size scales with the RMS of the whole parameter.
  virtual bool elementwise() const = 0;
  virtual size_t num_param_groups() const = 0;
  virtual double lr(size_t group) const = 0;
  // Any finite rate, as PyTorch's group["lr"] takes (a schedule's arithmetic may leave one a few ulp
  // below 0).
  virtual void set_lr(size_t group, double lr) = 0;
  // A rate set by hand (acc_optimizer_set_lr): also >= 0, as PyTorch's optimizers take one when made.
  void set_lr_by_hand(size_t group, double lr);
  // The lr the optimizer was created with (transformers' optimizer.defaults["lr"]).
  virtual double default_lr() const = 0;
  // PyTorch's group["initial_lr"]: none until a scheduler is made on the optimizer. The first one
  // sets it to the group's rate then (setdefault), and every later one takes it as its base rate;
  // OneCycleLR sets it to max_lr / div_factor (`overwrite`).
  virtual std::optional<double> initial_lr(size_t group) const = 0;
  virtual void set_initial_lr(size_t group, double lr, bool overwrite) = 0;
  // PyTorch's maximize (for the whole optimizer).
  virtual bool maximize() const { return false; }
  // PyTorch's foreach (none: its default) and fused choices, for the whole optimizer.
  virtual std::optional<bool> foreach () const { return std::nullopt; }
  virtual bool fused() const { return false; }
  virtual void step() = 0;
  virtual void zero_grad() = 0;  // set_to_none, as PyTorch's default and Accelerate's
  // A schedule-free optimizer's train() / eval() (optim/schedule_free.h): its parameters move to the
  // point gradients are taken at, or to the average that evaluation uses. Other optimizers have no
  // modes and ignore it, as Accelerate's AcceleratedOptimizer.train() / eval() do.
  virtual void set_train_mode(bool train);
  virtual torch::optim::Optimizer& impl() = 0;
  virtual std::shared_ptr<Model> model() const = 0;
  // Makes gradients() current before the step reads them (a sharded optimizer attaches its slices
  // of the averaged gradients); most optimizers' parameters hold theirs already.
  virtual void attach_gradients() {}
  // Whether each process holds only slices of the parameters' state (sharded data parallelism).
  virtual bool holds_state_slices() const { return false; }
  // Whether `found` (inf/nan among this optimizer's gradients) holds on any process: a sharded
  // optimizer sees only its slices, and every process must skip or take the step alike.
  virtual bool on_any_process(bool found) { return found; }
  // The gradients its parameters have (aliasing them).
  std::vector<at::Tensor> gradients();
  // The LOMO optimizer it is (optim/lomo.h), which updates the parameters inside backward; null for
  // every other algorithm.
  FusedBackwardOptimizer* fused_backward();
  // add_param_group for the trainable parameters whose names match `patterns` (NamePatterns);
  // returns how many moved. None trainable among the matches is an error.
  size_t add_param_group_matching(const std::string& patterns, const Options& overrides);
  // While a wrapper owns this optimizer's steps (sharding re-points its groups at slices and gathers
  // the parameters after each step), stepping or zeroing it directly (through the handle passed to
  // prepare) is refused with `reason`; empty: allowed again. The wrapper calls step() itself.
  void set_owner_reason(std::string reason) { owner_reason_ = std::move(reason); }
  // Fails (InvalidArgument, naming `call`) while a wrapper owns the steps.
  void require_unowned(const char* call) const;

 private:
  std::string owner_reason_;
};

// A torch::optim::Optimizer chosen by name (cpp/optim/algorithm.h).
class TorchOptimizer final : public Optimizer {
 public:
  // algorithm: one of Optimizer::algorithm()'s names. Every trainable parameter goes into group 0.
  TorchOptimizer(std::shared_ptr<Model> model, const std::string& algorithm, const Options& options);

  void add_param_group(const std::vector<std::string>& names, const Options& overrides) override;
  const std::string& algorithm() const override;
  bool elementwise() const override;
  size_t num_param_groups() const override;
  double lr(size_t group) const override;
  void set_lr(size_t group, double lr) override;
  double default_lr() const override { return impl_->defaults().get_lr(); }
  std::optional<double> initial_lr(size_t group) const override;
  void set_initial_lr(size_t group, double lr, bool overwrite) override;
  void step() override;
  void zero_grad() override;
  torch::optim::Optimizer& impl() override { return *impl_; }
  bool maximize() const override { return maximize_; }
  std::optional<bool> foreach () const override {
    return options_.has("foreach") ? std::optional<bool>(options_.get_bool("foreach", false)) : std::nullopt;
  }
  bool fused() const override { return options_.get_bool("fused", false); }
  std::shared_ptr<Model> model() const override { return model_; }

 private:
  std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& options) const;
  void check_group(size_t group) const;
  // impl_'s step, with an overflowing hyper-parameter reported as the caller's mistake.
  void step_rule();
  // Refuses (InvalidArgument, naming the parameter) a gradient of another dtype or device than its
  // parameter; tells whether a parameter's dtype or device changed since note_placement
  // (acc_model_to; new groups).
  bool check_gradients_and_placement() const;
  [[noreturn]] void refuse_gradient_unlike(const at::Tensor& parameter) const;
  // Records the parameters' dtypes and devices and, from them, each group's largest rate.
  void note_placement();

  std::shared_ptr<Model> model_;
  const OptimizerAlgorithm* algorithm_;
  Options options_;
  std::shared_ptr<void> trainable_set_hold_;  // see Model::hold_trainable_set
  std::unique_ptr<torch::optim::Optimizer> impl_;
  bool maximize_ = false;  // PyTorch's maximize, for the whole optimizer (see step())
  bool maximize_in_rule_ = false;  // impl_ applies maximize itself (a fused kernel)
  bool stepped_ = false;
  // The parameters' dtypes and devices at the last step: the state follows them when they change.
  std::vector<std::pair<at::ScalarType, at::Device>> placement_;
  // Per group, the largest rate its parameters' dtypes hold and the dtype that sets it (none: the
  // group has no rate), derived from placement_.
  std::vector<std::optional<std::pair<double, at::ScalarType>>> rate_limits_;
  std::vector<std::optional<double>> initial_lrs_;  // per group (shorter: none for the groups after)
};

}  // namespace acc
