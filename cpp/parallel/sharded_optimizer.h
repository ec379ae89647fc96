// The optimizer of a model under sharded data parallelism: the user's optimizer, its parameter
// groups re-pointed at what this process owns of each parameter (ShardedDataParallel::pieces), so
// it keeps state for 1/N of the model. Elementwise rules (SGD, Adam, AdamW, ...) give on a piece
// exactly what they give on the whole parameter. A step attaches the pieces' averaged gradients,
// steps them, and lets the engine all-gather the parameters (stages 1 and 2).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer_state.h"
#include "optim/optimizer_wrapper.h"
#include "parallel/sharded_data_parallel.h"

namespace acc {

class ShardedOptimizer final : public OptimizerWrapper {
 public:
  // `inner` must have no state yet (it is prepared before its first step).
  ShardedOptimizer(std::shared_ptr<Optimizer> inner, std::shared_ptr<ShardedDataParallel> engine);

  void add_param_group(const std::vector<std::string>& names, const Options& overrides) override;
  bool holds_state_slices() const override { return true; }
  void step() override;
  void attach_gradients() override { engine_->attach_piece_gradients(); }
  bool on_any_process(bool found) override;
  void zero_grad() override;
  // Moves this process's slices, then (stages 1 and 2) gathers the parameters as after a step.
  void set_train_mode(bool train) override;
  // The pieces, named after their parameters (optimizer state is saved and checked by these names).
  std::shared_ptr<Model> model() const override { return pieces_model_; }

  const std::shared_ptr<ShardedDataParallel>& engine() const { return engine_; }
  // Every parameter name of each group, as the user's optimizer had them (a process's groups hold
  // only the parameters it owns a piece of).
  const std::vector<std::vector<std::string>>& group_names() const { return group_names_; }
  // A whole optimizer's snapshot (consolidated, or DDP's) cut down to this process's slices;
  // `source` names it in errors.
  OptimizerSnapshot slice(const OptimizerSnapshot& whole, const std::string& source) const;

 private:
  std::shared_ptr<ShardedDataParallel> engine_;
  std::shared_ptr<Model> pieces_model_;
  std::vector<std::vector<std::string>> group_names_;
};

}  // namespace acc
