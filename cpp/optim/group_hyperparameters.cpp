#include "optim/group_hyperparameters.h"

#include "common/error.h"
#include "optim/algorithm.h"

namespace acc {
namespace {

torch::optim::OptimizerOptions& group_options(Optimizer& optimizer, size_t group) {
  auto& groups = optimizer.impl().param_groups();
  require(group < groups.size(), "parameter group ", group, " does not exist (the optimizer has ", groups.size(), ")");
  return groups[group].options();
}

}  // namespace

std::string cycled_momentum_key(const Optimizer& optimizer) {
  const char* key = optimizer_algorithm(optimizer.algorithm()).cycled_momentum();
  return key ? key : "";
}

void set_cycled_momentum(Optimizer& optimizer, size_t group, double value) {
  optimizer_algorithm(optimizer.algorithm()).set_cycled_momentum(group_options(optimizer, group), value);
}

double group_hyperparameter(Optimizer& optimizer, size_t group, const std::string& key) {
  const OptimizerAlgorithm& algorithm = optimizer_algorithm(optimizer.algorithm());
  const nlohmann::json j = algorithm.options_to_json(group_options(optimizer, group));
  require(j.contains(key) && j[key].is_number(), "the ", optimizer.algorithm(), " optimizer has no '", key, "'");
  return j[key].get<double>();
}

void check_group_hyperparameter(Optimizer& optimizer, size_t group, const std::string& key, double value) {
  const OptimizerAlgorithm& algorithm = optimizer_algorithm(optimizer.algorithm());
  nlohmann::json j = algorithm.options_to_json(group_options(optimizer, group));
  require(j.contains(key) && j[key].is_number(), "the ", optimizer.algorithm(), " optimizer has no '", key, "'");
  j[key] = value;
  algorithm.check_options_json(j, "parameter group " + std::to_string(group));
}

}  // namespace acc
