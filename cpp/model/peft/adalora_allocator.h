// AdaLoRA's rank allocator (PEFT's RankAllocator and AdaLoraModel.update_and_allocate): after each
// step it smooths every adapter tensor's sensitivity |p * grad| (beta1) and its uncertainty
// (beta2); on the budget's steps it zeroes the entries of each layer's E whose importance (E's own
// plus the means of its row of A and column of B) is at most the k-th smallest over all layers, k
// the ranks above the budget, which falls from init_r per layer to target_r per layer as a cubic
// between tinit and total_step - tfinal. From there on the last pattern is applied after each step.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "model/peft/lora.h"

namespace acc {

class AdaloraAllocator {
 public:
  // The budget starts at init_r per adapted layer (PEFT's, counted before a file's pruned layers
  // are resized) and ends at target_r per layer.
  AdaloraAllocator(const AdaloraConfig& config, size_t layers);

  // PEFT's update_and_allocate(global_step) over `adapters` (their tensors' gradients, after
  // backward): updates the smoothed scores, and prunes where the schedule says so, setting
  // `config.rank_pattern` (by module) to the entries kept. Fails (InvalidArgument, naming the
  // tensor) where an adapter tensor has no gradient while the scores are being smoothed, where the
  // budget cannot be met (target_r not below init_r), or past the pruning phase with no pattern yet.
  void update_and_allocate(const std::vector<LoraAdapter>& adapters, int64_t global_step, AdaloraConfig& config);

  // The budget of ranks at `step` (PEFT's budget_schedule) and whether it prunes there.
  std::pair<int64_t, bool> budget_schedule(const AdaloraConfig& config, int64_t step) const;

 private:
  void update_importance(const std::vector<LoraAdapter>& adapters, const AdaloraConfig& config);
  // Zeroes the least important entries of E down to `budget` ranks; returns the kept entries by
  // module, over init_r (a file's layer holds the rows of `config`'s held pattern).
  AdaloraPattern mask_to_budget(const std::vector<LoraAdapter>& adapters, int64_t budget,
                                const AdaloraConfig& config) const;
  void reset() { scores_.clear(); }

  int64_t initial_budget_, target_budget_;
  // Per adapter, per tensor (A, B, E): the smoothed importance and uncertainty.
  struct Smoothed {
    at::Tensor importance, uncertainty;
  };
  std::vector<std::vector<Smoothed>> scores_;
};

}  // namespace acc
