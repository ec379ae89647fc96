// PyTorch's chainable schedulers, whose get_lr() computes each step's rate from the rate before:
// StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, ConstantLR, LinearLR, PolynomialLR and SWALR
// (and CosineAnnealingWarmRestarts, whose rate comes from its base rate). Their roundings follow from that
// recursion (StepLR's 0.1 decayed four times is not 0.1 * 0.1 ** 4), so a rule here walks the
// same recursion, step by step, from a group's base rate, with the same operations in the same
// order; it remembers where each base's walk stands, so stepping on costs one step.
#pragma once

#include <cstdint>
#include <vector>

#include "schedule/named_schedules.h"

namespace acc {

ScheduleRule step_lr_rule(int64_t step_size, double gamma);
// milestones may repeat a step: the rate is then multiplied by gamma that many times over.
ScheduleRule multistep_lr_rule(std::vector<int64_t> milestones, double gamma);
ScheduleRule exponential_lr_rule(double gamma);
// `restarted`: from the closed form's rate at step 0 (PyTorch's step(0) in SequentialLR), not the base rate.
ScheduleRule cosine_annealing_lr_rule(int64_t t_max, double eta_min, bool restarted = false);
// factor in (0, 1]: PyTorch's division by it at total_iters is refused beforehand.
ScheduleRule constant_lr_rule(double factor, int64_t total_iters, bool restarted = false);
ScheduleRule linear_lr_rule(double start_factor, double end_factor, int64_t total_iters);
ScheduleRule polynomial_lr_rule(int64_t total_iters, double power);
// PyTorch's SWALR (torch.optim.swa_utils): from the rate it finds to swa_lr over anneal_epochs steps
// (at once with 0), by a cosine or a straight line, then swa_lr.
ScheduleRule swa_lr_rule(double swa_lr, int64_t anneal_epochs, bool cosine);
ScheduleRule cosine_annealing_warm_restarts_rule(int64_t t_0, int64_t t_mult, double eta_min);

}  // namespace acc
