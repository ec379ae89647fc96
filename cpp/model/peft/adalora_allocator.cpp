#include "model/peft/adalora_allocator.h"

#include <ATen/core/grad_mode.h>

#include <cmath>
#include <string>

#include "common/error.h"
#include "model/peft/adalora.h"

namespace acc {
namespace {

constexpr const char* kScored[] = {kAdaloraA, kAdaloraB, kAdaloraE};

const at::Tensor& scored(const LoraAdapter& adapter, size_t t) { return factor_named(adapter.factors, kScored[t]); }

}  // namespace

AdaloraAllocator::AdaloraAllocator(const AdaloraConfig& config, size_t layers)
    : initial_budget_(config.init_r * static_cast<int64_t>(layers)),
      target_budget_(config.target_r * static_cast<int64_t>(layers)) {}

std::pair<int64_t, bool> AdaloraAllocator::budget_schedule(const AdaloraConfig& config, int64_t step) const {
  if (step <= config.tinit) return {initial_budget_, false};
  if (step > config.total_step - config.tfinal) return {target_budget_, true};
  // PEFT's float arithmetic: a true division, the cube by pow, truncated to an integer.
  const double coefficient = 1.0 - static_cast<double>(step - config.tinit) /
                                       static_cast<double>(config.total_step - config.tfinal - config.tinit);
  const double budget = static_cast<double>(initial_budget_ - target_budget_) * std::pow(coefficient, 3.0) +
                        static_cast<double>(target_budget_);
  return {static_cast<int64_t>(budget), step % config.delta_t == 0};
}

void AdaloraAllocator::update_importance(const std::vector<LoraAdapter>& adapters, const AdaloraConfig& config) {
  for (const LoraAdapter& adapter : adapters)
    for (size_t t = 0; t < 3; ++t)
      require(scored(adapter, t).grad().defined(), "AdaLoRA's update_and_allocate reads the gradient of '",
              adapter.site.module, kScored[t],
              "', which has none: call it after the backward and before zeroing the gradients (under zero_stage 2 "
              "or 3 no process keeps them whole)");
  at::NoGradGuard no_grad;
  if (scores_.size() != adapters.size()) scores_.assign(adapters.size(), std::vector<Smoothed>(3));
  for (size_t k = 0; k < adapters.size(); ++k)
    for (size_t t = 0; t < 3; ++t) {
      const at::Tensor& p = scored(adapters[k], t);
      Smoothed& s = scores_[k][t];
      if (!s.importance.defined() || s.importance.sizes() != p.sizes())
        s.importance = at::zeros_like(p), s.uncertainty = at::zeros_like(p);
      else if (s.importance.device() != p.device())  // the model moved (acc_model_to): the scores follow
        s.importance = s.importance.to(p.device()), s.uncertainty = s.uncertainty.to(p.device());
      const at::Tensor sensitivity = (p * p.grad()).abs();
      s.importance = s.importance * config.beta1 + sensitivity * (1 - config.beta1);
      s.uncertainty = s.uncertainty * config.beta2 + (sensitivity - s.importance).abs() * (1 - config.beta2);
    }
}

AdaloraPattern AdaloraAllocator::mask_to_budget(const std::vector<LoraAdapter>& adapters, int64_t budget,
                                                const AdaloraConfig& config) const {
  require(scores_.size() == adapters.size(), "AdaLoRA prunes from the importance of earlier steps: call ",
          "update_and_allocate for every step from the first");
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> triplets, all;
  for (size_t k = 0; k < adapters.size(); ++k) {
    const std::vector<Smoothed>& s = scores_[k];
    auto score = [&](size_t t) { return s[t].importance * s[t].uncertainty; };
    const at::Tensor a = at::mean(score(0), {1}, /*keepdim=*/true);
    const at::Tensor b = at::mean(score(1), {0}, /*keepdim=*/false).view({-1, 1});
    const at::Tensor sum = score(2).view(-1) + at::cat({a, b}, 1).sum({1}, /*keepdim=*/false).view(-1);
    triplets.push_back(sum.view({-1, 1}));
    all.push_back(sum.view(-1));
  }
  const at::Tensor scores = at::cat(all);
  const int64_t k = initial_budget_ - budget;
  require(k >= 1 && k <= scores.numel(), "AdaLoRA cannot prune to a budget of ", budget, " ranks: its initial ",
          "budget is ", initial_budget_, " and ", scores.numel(), " entries are held, which leaves ", k,
          " to prune (target_r must lie below init_r, total_step within what a double's budget schedule resolves; ",
          "PEFT's kthvalue fails too)");
  const at::Tensor threshold = std::get<0>(at::kthvalue(scores, k));
  AdaloraPattern pattern;
  for (size_t i = 0; i < adapters.size(); ++i) {
    const at::Tensor pruned = triplets[i] <= threshold;
    at::Tensor e = scored(adapters[i], 2);
    e.masked_fill_(pruned.to(e.device()), 0.0);
    // The rows' flags over init_r entries: a file's layer holds its kept entries' rows only.
    const at::Tensor kept = pruned.logical_not().view(-1).to(at::kCPU);
    const std::vector<int64_t> rows = config.held_rows(adapters[i].site.module);
    std::vector<bool> entries(static_cast<size_t>(config.init_r), false);
    for (int64_t j = 0; j < kept.numel(); ++j)
      entries[static_cast<size_t>(rows[static_cast<size_t>(j)])] = kept[j].item<bool>();
    pattern.emplace_back(adapters[i].site.module, std::move(entries));
  }
  return pattern;
}

void AdaloraAllocator::update_and_allocate(const std::vector<LoraAdapter>& adapters, int64_t global_step,
                                           AdaloraConfig& config) {
  require(global_step >= 0, "AdaLoRA's global_step must not be negative, got ", global_step);
  const int64_t final_start = config.total_step - config.tfinal;
  if (global_step < final_start) {
    const std::vector<std::vector<Smoothed>> before = scores_;  // (handles: the update makes new tensors)
    update_importance(adapters, config);
    const auto [budget, prune] = budget_schedule(config, global_step);
    try {
      if (prune) config.rank_pattern = mask_to_budget(adapters, budget, config);
    } catch (...) {  // a refused pruning changes nothing
      scores_ = before;
      throw;
    }
  } else if (global_step == final_start) {  // the last pruning, to target_r per layer
    config.rank_pattern = mask_to_budget(adapters, budget_schedule(config, global_step).first, config);
    reset();
  } else {  // the final phase: the pattern applied again after each step
    require(!config.rank_pattern.empty(), "AdaLoRA's step ", global_step, " comes after its last pruning (step ",
            final_start, "), which has not happened: call update_and_allocate for every step");
    at::NoGradGuard no_grad;
    for (const LoraAdapter& adapter : adapters) {
      const std::vector<bool>* kept = config.kept(adapter.site.module);
      require(kept != nullptr, "AdaLoRA's rank_pattern has no entry for '", adapter.site.module, "'");
      at::Tensor e = scored(adapter, 2);
      const std::vector<int64_t> rows = config.held_rows(adapter.site.module);
      require(static_cast<int64_t>(rows.size()) == e.size(0), "AdaLoRA's lora_E of '", adapter.site.module, "' has ",
              e.size(0), " entries; its pattern holds ", rows.size());
      std::vector<uint8_t> pruned;
      for (int64_t row : rows) pruned.push_back((*kept)[static_cast<size_t>(row)] ? 0 : 1);
      e.masked_fill_(at::tensor(pruned, at::kByte).to(at::kBool).view({-1, 1}).to(e.device()), 0.0);
    }
  }
}

}  // namespace acc
