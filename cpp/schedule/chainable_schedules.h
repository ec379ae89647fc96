// PyTorch's chainable schedulers, whose get_lr() computes each step's rate from the rate before:
// StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, ConstantLR, LinearLR, PolynomialLR and SWALR
// (and CosineAnnealingWarmRestarts, whose rate comes from its base rate). Their roundings follow from that
// recursion (StepLR's 0.1 decayed four times is not 0.1 * 0.1 ** 4), so each is that recursion, with
// the same operations in the same order, walked from a group's base rate by rule_of
// (schedule/schedule_form.h), or run inside a chain.
#pragma once

#include <cstdint>
#include <vector>

#include "schedule/schedule_form.h"

namespace acc {

Schedule step_lr(int64_t step_size, double gamma);
// milestones may repeat a step: the rate is then multiplied by gamma that many times over.
Schedule multistep_lr(std::vector<int64_t> milestones, double gamma);
Schedule exponential_lr(double gamma);
// `restarted`: from the closed form's rate at step 0 (PyTorch's step(0) in SequentialLR), not the base rate.
Schedule cosine_annealing_lr(int64_t t_max, double eta_min, bool restarted = false);
// factor in (0, 1]: PyTorch's division by it at total_iters is refused beforehand.
Schedule constant_lr(double factor, int64_t total_iters, bool restarted = false);
Schedule linear_lr(double start_factor, double end_factor, int64_t total_iters);
Schedule polynomial_lr(int64_t total_iters, double power);
// PyTorch's SWALR (torch.optim.swa_utils): from the rate it finds to swa_lr over anneal_epochs steps
// (at once with 0), by a cosine or a straight line, then swa_lr.
Schedule swa_lr(double swa_lr, int64_t anneal_epochs, bool cosine);
Schedule cosine_annealing_warm_restarts(int64_t t_0, int64_t t_mult, double eta_min);

// Where PyTorch's CosineAnnealingWarmRestarts stands after `step` steps of one each: T_cur steps into
// a period of T_i, a restart whenever T_cur reaches T_i, each period T_mult times the one before.
// `overflows`: the next period would exceed 64 bits (no step reaches it; T_cur stays in this one).
struct WarmRestartsPosition {
  int64_t t_cur, t_i;
  bool overflows = false;
};
WarmRestartsPosition warm_restarts_position(int64_t t_0, int64_t t_mult, int64_t step);

}  // namespace acc
