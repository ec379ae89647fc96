// What differs between optimizer algorithms, each described in one place: the option keys it takes,
// its torch::optim options and optimizer, its group hyper-parameters as JSON and its per-parameter
// state as named tensors (the fields of a checkpoint, named as PyTorch's state_dict names them).
// TorchOptimizer and the optimizer checkpoint code work through this and know no algorithm by name.
#pragma once

#include <torch/optim/optimizer.h>

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/options.h"

namespace acc {

// A parameter's state by field name; counters ("step") are 0-dim int64 tensors.
using StateFields = std::map<std::string, at::Tensor>;

class OptimizerAlgorithm {
 public:
  virtual ~OptimizerAlgorithm() = default;

  virtual const std::string& name() const = 0;
  // The ACC_OPTIONS_OPTIMIZER keys it takes; another key set is an error.
  virtual const std::set<std::string>& keys() const = 0;
  // See Optimizer::elementwise.
  virtual bool elementwise() const { return true; }
  // Whether it keeps no state for any parameter (LOMO: the gradient alone makes the update).
  virtual bool stateless() const { return false; }

  // torch::optim options from options whose keys are checked; values out of range are errors.
  virtual std::unique_ptr<torch::optim::OptimizerOptions> make_options(const Options& options) const = 0;
  virtual std::unique_ptr<torch::optim::Optimizer> make_optimizer(
      std::vector<torch::optim::OptimizerParamGroup> groups, const torch::optim::OptimizerOptions& defaults) const = 0;
  // PyTorch's fused=True implementation (optim/fused_rules.h) with the same options and state, where
  // the algorithm has one (sgd, adam, adamw, adagrad; "fused" is then among its keys); null otherwise.
  virtual std::unique_ptr<torch::optim::Optimizer> make_fused_optimizer(
      std::vector<torch::optim::OptimizerParamGroup> /*groups*/, const torch::optim::OptimizerOptions& /*defaults*/) const {
    return nullptr;
  }
  // The state a parameter has before its first step, made from the optimizer's options (torch's
  // constructor's), where the algorithm keeps one (Adagrad's accumulator); null where state starts
  // at the first step.
  virtual std::unique_ptr<torch::optim::OptimizerParamState> initial_state(
      const at::Tensor& /*param*/, const torch::optim::OptimizerOptions& /*group*/) const {
    return nullptr;
  }

  // A group's hyper-parameters for the checkpoint's metadata, their check (the ranges the
  // optimizer itself accepts; `where` names the group in errors) and their application.
  virtual nlohmann::json options_to_json(const torch::optim::OptimizerOptions& options) const = 0;
  virtual void check_options_json(const nlohmann::json& j, const std::string& where) const = 0;
  virtual void set_options_from_json(torch::optim::OptimizerOptions& options, const nlohmann::json& j) const = 0;

  // The fields of a state (undefined tensors left out), and a state from such fields.
  virtual StateFields state_fields(const torch::optim::OptimizerParamState& state) const = 0;
  virtual std::unique_ptr<torch::optim::OptimizerParamState> make_state(const StateFields& fields) const = 0;
  // Exactly the fields a saved state of `param` holds, with their shapes, when its group's saved
  // options are `group` (checked already).
  virtual std::map<std::string, std::vector<int64_t>> state_shapes(const nlohmann::json& group,
                                                                   const at::Tensor& param) const = 0;
  // OneCycleLR's cycled hyper-parameter, as PyTorch picks it (beta1 where the optimizer has betas,
  // else its momentum): its name in options_to_json, or null where it has neither; and its direct
  // setter, for every scheduler step (the scheduler checks the values' range once, by name).
  virtual const char* cycled_momentum() const { return nullptr; }
  virtual void set_cycled_momentum(torch::optim::OptimizerOptions& /*options*/, double /*value*/) const {}

  // The dtype of its state tensors for a parameter.
  virtual at::ScalarType state_dtype(const at::Tensor& param) const { return param.scalar_type(); }
  // A state field's own dtype, whatever the parameter's (8-bit optimizers' uint8 codes and float32
  // maxima), when its group's saved options are `group`: a loaded field must have it and keeps it.
  // None: a floating-point field, loaded in state_dtype.
  virtual std::optional<at::ScalarType> field_dtype(const std::string& /*field*/, const nlohmann::json& /*group*/,
                                                    const at::Tensor& /*param*/) const {
    return std::nullopt;
  }
  // Whether a state field is a number PyTorch keeps as a 0-dim float32 tensor on the CPU whatever the
  // parameter's dtype and device (NAdam's mu_product), which stays so where the state moves or loads
  // (make_state brings it to float32); counters ("step") stay on the CPU too.
  virtual bool scalar_on_cpu(const std::string& /*field*/) const { return false; }
  // Checks the values of a loaded state field whose shape and dtype were found right, where the
  // algorithm bounds them (`where` names it in the error).
  virtual void check_state_field(const std::string& /*field*/, const at::Tensor& /*value*/,
                                 const std::string& /*where*/) const {}
};

// "sgd", "adam", "adamw", "rmsprop", "adagrad", "lion", "adafactor", "radam", "nadam", "adamax", "adadelta",
// "rprop", "asgd", "adamw_schedule_free", "sgd_schedule_free", "lomo", "adalomo", "adam_8bit", "adamw_8bit",
// "ademamix_8bit", "lion_8bit", "sgd_8bit", "rmsprop_8bit", "adagrad_8bit";
// another name is an error that lists them (bitsandbytes' paged ones, "paged_<name>", Unsupported).
const OptimizerAlgorithm& optimizer_algorithm(const std::string& name);

// Helpers for the descriptions.
namespace algorithm_detail {
// A number of `j` in [min, max] (max excluded unless max_inclusive); null allowed when nullable.
void check_number(const nlohmann::json& j, const char* key, double min, double max, bool max_inclusive,
                  const std::string& where, bool nullable = false);
void check_flag(const nlohmann::json& j, const char* key, const std::string& where);
// A group's "lr": any finite number. PyTorch's optimizers refuse a negative one when made, but a
// schedule's arithmetic may leave one a few ulp below 0 (LinearLR annealing to 0), and it is saved so.
void check_learning_rate(const nlohmann::json& j, const std::string& where, bool nullable = false);
// The hyper-parameters Adam and its variants share: lr (check_learning_rate), weight_decay and eps
// >= 0, beta1 and beta2 in [0, 1), as PyTorch's ranges.
void check_adam_hyperparameters(const nlohmann::json& j, const std::string& where);
// An optional hyper-parameter as JSON (null when unset), and back.
nlohmann::json nullable(const std::optional<double>& value);
std::optional<double> optional_number(const nlohmann::json& j, const char* key);
at::Tensor step_tensor(int64_t step);
int64_t step_value(const StateFields& fields);
// fields[key] where the tensor is defined.
void put(StateFields& fields, const char* key, const at::Tensor& t);
at::Tensor get(const StateFields& fields, const char* key);  // undefined when absent
// A 0-dim state field's value in [min, max] ((min, max] unless min_inclusive), else an error naming
// `where` and saying what the value is.
void check_scalar_field(const at::Tensor& value, double min, bool min_inclusive, double max, const std::string& where,
                        const char* what);
const OptimizerAlgorithm& sgd();
const OptimizerAlgorithm& adam();
const OptimizerAlgorithm& adamw();
const OptimizerAlgorithm& rmsprop();
const OptimizerAlgorithm& adagrad();
const OptimizerAlgorithm& lion();
const OptimizerAlgorithm& adafactor();
const OptimizerAlgorithm& adam_8bit();
const OptimizerAlgorithm& adamw_8bit();
const OptimizerAlgorithm& ademamix_8bit();
const OptimizerAlgorithm& lion_8bit();
const OptimizerAlgorithm& sgd_8bit();
const OptimizerAlgorithm& rmsprop_8bit();
const OptimizerAlgorithm& adagrad_8bit();
const OptimizerAlgorithm& radam();
const OptimizerAlgorithm& nadam();
const OptimizerAlgorithm& adamax();
const OptimizerAlgorithm& adadelta();
const OptimizerAlgorithm& rprop();
const OptimizerAlgorithm& asgd();
const OptimizerAlgorithm& adamw_schedule_free();
const OptimizerAlgorithm& sgd_schedule_free();
const OptimizerAlgorithm& lomo();
const OptimizerAlgorithm& adalomo();
}  // namespace algorithm_detail

}  // namespace acc
