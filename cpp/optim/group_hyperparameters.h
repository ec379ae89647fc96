// A parameter group's hyper-parameter by its checkpoint name ("momentum", "beta1"), read and set
// through the algorithm's description (optim/algorithm.h), for schedules that move more than the
// learning rate (OneCycleLR and CyclicLR cycle the momentum).
#pragma once

#include <cstddef>
#include <string>

#include "optim/optimizer.h"

namespace acc {

// What OneCycleLR cycles (OptimizerAlgorithm::cycled_momentum): "beta1", "momentum", or empty.
std::string cycled_momentum_key(const Optimizer& optimizer);
// Sets it on a group, unchecked (its range is checked once by set_group_hyperparameter).
void set_cycled_momentum(Optimizer& optimizer, size_t group, double value);

double group_hyperparameter(Optimizer& optimizer, size_t group, const std::string& key);
// Throws unless `value` is one the algorithm accepts for `key` (as a loaded checkpoint's is checked).
void check_group_hyperparameter(Optimizer& optimizer, size_t group, const std::string& key, double value);

}  // namespace acc
