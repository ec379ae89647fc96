// Learning-rate schedules with the names and formulas of transformers' get_scheduler(), plus
// step decay. Like PyTorch's LambdaLR: lr = base_lr * factor(step), the factor of step 0 applied
// at construction, base_lr being each group's learning rate at that moment.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/options.h"
#include "optim/optimizer.h"

namespace acc {

// The factor of a named schedule at a step; exposed for tests.
std::function<double(int64_t)> schedule_factor(const std::string& name, const Options& options, double default_lr);

class Scheduler {
 public:
  Scheduler(std::shared_ptr<Optimizer> optimizer, const std::string& name, const Options& options);

  void step();
  double last_lr(size_t group) const;
  int64_t step_count() const { return step_; }
  const std::shared_ptr<Optimizer>& optimizer() const { return optimizer_; }

 private:
  void apply();

  std::shared_ptr<Optimizer> optimizer_;
  std::function<double(int64_t)> factor_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lrs_;
  int64_t step_ = 0;
};

}  // namespace acc
